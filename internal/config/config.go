// Package config reads Ballet's TOML configuration. Every key has a default,
// so no file is needed; unknown keys and bad values are errors that name the
// key.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Duration is a time.Duration written as a string ("5m", "1s") in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"90s\" or \"5m\"", string(b))
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole configuration.
type Config struct {
	Storage    Storage    `toml:"storage"`
	HTTP       HTTP       `toml:"http"`
	Jobs       Jobs       `toml:"jobs"`
	Reconciler Reconciler `toml:"reconciler"`
	Leader     Leader     `toml:"leader"`
	Scheduler  Scheduler  `toml:"scheduler"`
	Runs       Runs       `toml:"runs"`
	Budgets    Budgets    `toml:"budgets"`
	Events     Events     `toml:"events"`
	Auth       Auth       `toml:"auth"`
	Log        Log        `toml:"log"`
}

// Auth configures authentication.
type Auth struct {
	// BootstrapToken is a platform-admin token (BALLET_BOOTSTRAP_TOKEN
	// overrides it). When neither is set, first start generates one into
	// BootstrapTokenFile.
	BootstrapToken     string   `toml:"bootstrap_token"`
	BootstrapTokenFile string   `toml:"bootstrap_token_file"` // default: bootstrap-token next to storage.path
	OIDCIssuer         string   `toml:"oidc_issuer"`          // empty: no OIDC
	OIDCAudience       string   `toml:"oidc_audience"`
	PlatformAdmins     []string `toml:"platform_admins"` // OIDC subjects
}

// Storage selects and configures the storage engine.
type Storage struct {
	Engine          string `toml:"engine"`           // "sqlite" (default) or "rqlite"
	Path            string `toml:"path"`             // SQLite file (default data/core.db)
	URL             string `toml:"url"`              // rqlite node URLs, comma-separated
	Username        string `toml:"username"`         // rqlite basic auth
	Password        string `toml:"password"`         // rqlite basic auth
	ReadConsistency string `toml:"read_consistency"` // rqlite read level (weak)
}

// HTTP configures the API server.
type HTTP struct {
	Addr         string `toml:"addr"`           // 127.0.0.1:8080
	MaxBodyBytes int64  `toml:"max_body_bytes"` // request body limit (1 MiB)
}

// Jobs configures the durable job orchestrator.
type Jobs struct {
	Concurrency   int      `toml:"concurrency"`    // 8
	Lease         Duration `toml:"lease"`          // 5m
	Poll          Duration `toml:"poll"`           // 1s
	BackoffCap    Duration `toml:"backoff_cap"`    // 10m
	MaxAttempts   int      `toml:"max_attempts"`   // 20
	ShutdownGrace Duration `toml:"shutdown_grace"` // 30s
}

// Reconciler configures the periodic repair pass.
type Reconciler struct {
	Interval Duration `toml:"interval"` // 1m
	Slack    Duration `toml:"slack"`    // 5m beyond a stage's timeout
}

// Scheduler configures the scheduler that starts ready tickets.
type Scheduler struct {
	Interval      Duration `toml:"interval"`       // safety-net pass (10s)
	PlatformLimit int      `toml:"platform_limit"` // running flows platform-wide when the platform's concurrency_limit is 0 (0: no limit)
}

// Runs configures agent sessions.
type Runs struct {
	Grace Duration `toml:"grace"` // a running run without a heartbeat this long fails (2m)
}

// Budgets configures how spend is rolled up.
type Budgets struct {
	Timezone string `toml:"timezone"` // the budget day's time zone (UTC)
}

// Location returns the budget day's time zone.
func (b Budgets) Location() (*time.Location, error) { return time.LoadLocation(b.Timezone) }

// Events configures the event feed behind the realtime API.
type Events struct {
	TailInterval Duration `toml:"tail_interval"` // how often the log is read for other instances' events (200ms)
	// AuthRecheck: how often a realtime connection's credential and its
	// subscriptions' access are re-checked at least (1m); revocations and
	// role changes apply at once, expiry at its instant.
	AuthRecheck Duration `toml:"auth_recheck"`
}

// Leader configures leader election among Core instances.
type Leader struct {
	TTL   Duration `toml:"ttl"`   // 15s
	Renew Duration `toml:"renew"` // 5s
}

// Log configures logging.
type Log struct {
	Level  string `toml:"level"`  // debug, info (default), warn, error
	Format string `toml:"format"` // text (default) or json
}

// Default returns the configuration used when no file is given.
func Default() Config {
	return Config{
		Storage: Storage{Engine: "sqlite", Path: "data/core.db", URL: "http://127.0.0.1:4001", ReadConsistency: "weak"},
		HTTP:    HTTP{Addr: "127.0.0.1:8080", MaxBodyBytes: 1 << 20},
		Jobs: Jobs{Concurrency: 8, Lease: Duration{5 * time.Minute}, Poll: Duration{time.Second},
			BackoffCap: Duration{10 * time.Minute}, MaxAttempts: 20, ShutdownGrace: Duration{30 * time.Second}},
		Reconciler: Reconciler{Interval: Duration{time.Minute}, Slack: Duration{5 * time.Minute}},
		Leader:     Leader{TTL: Duration{15 * time.Second}, Renew: Duration{5 * time.Second}},
		Scheduler:  Scheduler{Interval: Duration{10 * time.Second}},
		Runs:       Runs{Grace: Duration{2 * time.Minute}},
		Budgets:    Budgets{Timezone: "UTC"},
		Events:     Events{TailInterval: Duration{200 * time.Millisecond}, AuthRecheck: Duration{time.Minute}},
		Auth:       Auth{PlatformAdmins: []string{}},
		Log:        Log{Level: "info", Format: "text"},
	}
}

// Load reads the file at path over the defaults; an empty path returns the
// defaults.
func Load(path string) (Config, error) {
	cfg := Default()
	if path == "" {
		return cfg, cfg.Validate()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	return Parse(string(b), path)
}

// Parse reads TOML text over the defaults; name is used in messages.
func Parse(text, name string) (Config, error) {
	cfg := Default()
	md, err := toml.Decode(text, &cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return cfg, fmt.Errorf("config %s: line %d: %s", name, pe.Position.Line, pe.Message)
		}
		return cfg, fmt.Errorf("config %s: %w", name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return cfg, fmt.Errorf("config %s: unknown key %s", name, strings.Join(keys, ", "))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", name, err)
	}
	return cfg, nil
}

// Validate checks every value and names the key of each bad one.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	switch c.Storage.Engine {
	case "sqlite":
		if c.Storage.Path == "" {
			bad("storage.path", "must not be empty")
		}
	case "rqlite":
		if len(c.Storage.URLs()) == 0 {
			bad("storage.url", "must name at least one rqlite node")
		}
		for _, u := range c.Storage.URLs() {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				bad("storage.url", "%q must start with http:// or https://", u)
			}
		}
	default:
		bad("storage.engine", "%q is not sqlite or rqlite", c.Storage.Engine)
	}
	switch c.Storage.ReadConsistency {
	case "none", "weak", "linearizable", "strong":
	default:
		bad("storage.read_consistency", "%q is not none, weak, linearizable or strong", c.Storage.ReadConsistency)
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		bad("http.addr", "%q is not host:port", c.HTTP.Addr)
	}
	if c.HTTP.MaxBodyBytes < 1024 || c.HTTP.MaxBodyBytes > 1<<30 {
		bad("http.max_body_bytes", "%d is outside 1024 … 1073741824", c.HTTP.MaxBodyBytes)
	}
	if c.Jobs.Concurrency < 1 || c.Jobs.Concurrency > 1024 {
		bad("jobs.concurrency", "%d is outside 1 … 1024", c.Jobs.Concurrency)
	}
	if c.Jobs.MaxAttempts < 1 || c.Jobs.MaxAttempts > 1000 {
		bad("jobs.max_attempts", "%d is outside 1 … 1000", c.Jobs.MaxAttempts)
	}
	positive := map[string]Duration{
		"jobs.lease": c.Jobs.Lease, "jobs.poll": c.Jobs.Poll, "jobs.backoff_cap": c.Jobs.BackoffCap,
		"jobs.shutdown_grace": c.Jobs.ShutdownGrace, "reconciler.interval": c.Reconciler.Interval,
		"leader.ttl": c.Leader.TTL, "leader.renew": c.Leader.Renew, "runs.grace": c.Runs.Grace, "scheduler.interval": c.Scheduler.Interval, "events.tail_interval": c.Events.TailInterval,
		"events.auth_recheck": c.Events.AuthRecheck,
	}
	for _, key := range []string{"jobs.lease", "jobs.poll", "jobs.backoff_cap", "jobs.shutdown_grace", "reconciler.interval", "leader.ttl", "leader.renew", "runs.grace", "scheduler.interval", "events.tail_interval", "events.auth_recheck"} {
		if positive[key].Duration <= 0 {
			bad(key, "must be a positive duration")
		}
	}
	if c.Reconciler.Slack.Duration < 0 {
		bad("reconciler.slack", "must not be negative")
	}
	if c.Leader.Renew.Duration >= c.Leader.TTL.Duration && c.Leader.TTL.Duration > 0 {
		bad("leader.renew", "%s must be shorter than leader.ttl (%s)", c.Leader.Renew, c.Leader.TTL)
	}
	if c.Auth.OIDCIssuer != "" {
		if !strings.HasPrefix(c.Auth.OIDCIssuer, "https://") && !strings.HasPrefix(c.Auth.OIDCIssuer, "http://") {
			bad("auth.oidc_issuer", "%q must be an http(s) URL", c.Auth.OIDCIssuer)
		}
		if c.Auth.OIDCAudience == "" {
			bad("auth.oidc_audience", "must be set when auth.oidc_issuer is")
		}
	}
	if t := c.Auth.BootstrapToken; t != "" && len(t) < 16 {
		bad("auth.bootstrap_token", "must be at least 16 characters")
	}
	if c.Scheduler.PlatformLimit < 0 || c.Scheduler.PlatformLimit > 10000 {
		bad("scheduler.platform_limit", "%d is outside 0 … 10000 (0: no limit)", c.Scheduler.PlatformLimit)
	}
	if _, err := c.Budgets.Location(); err != nil || c.Budgets.Timezone == "" {
		bad("budgets.timezone", "%q is not a time zone such as \"UTC\" or \"Europe/Berlin\"", c.Budgets.Timezone)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q is not text or json", c.Log.Format)
	}
	return errors.Join(errs...)
}

// URLs splits the comma-separated rqlite node list.
func (s Storage) URLs() []string {
	var out []string
	for _, u := range strings.Split(s.URL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, strings.TrimRight(u, "/"))
		}
	}
	return out
}

// Write prints cfg as TOML, passwords masked.
func Write(w io.Writer, cfg Config) error {
	if cfg.Storage.Password != "" {
		cfg.Storage.Password = "********"
	}
	if cfg.Auth.BootstrapToken != "" {
		cfg.Auth.BootstrapToken = "********"
	}
	if err := toml.NewEncoder(w).Encode(cfg); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}
