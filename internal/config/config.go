// Package config reads Ballet's TOML configuration. Every key has a default,
// so no file is needed; unknown keys and bad values are errors that name the
// key.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // budgets.timezone resolves alike on every machine, with or without system tzdata

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
	Knowledge  Knowledge  `toml:"knowledge"`
	// Runner and Adapters configure `ballet runner`; Core ignores them, and
	// the runner ignores Core's sections.
	Runner   Runner   `toml:"runner"`
	Adapters Adapters `toml:"adapters"`
	Secrets  Secrets  `toml:"secrets"`

	// File is the file the configuration was loaded from ("": none), one
	// of the files no secret reference may name.
	File string `toml:"-"`
}

// Runner configures `ballet runner`, the process that runs agent sessions.
type Runner struct {
	Server string `toml:"server"` // Core's URL (http://127.0.0.1:8080)
	// Token is the runner token (BALLET_RUNNER_TOKEN overrides it).
	Token   string            `toml:"token"`
	Name    string            `toml:"name"`    // "": the host name
	Labels  map[string]string `toml:"labels"`  // sent at registration
	Workdir string            `toml:"workdir"` // workspaces, mirrors, per-run homes, session state (data/runner)
	// Sessions is how many sessions run at once (2).
	Sessions int `toml:"sessions"`
	// Sandbox is "bwrap" (the default: bubblewrap) or "none".
	Sandbox string `toml:"sandbox"`
	// PassEnv names more variables of the runner's environment that
	// sessions get (beyond PATH, LANG and the model credentials).
	PassEnv []string `toml:"pass_env"`
	// Hide lists more paths sessions must not see (the runner's folder, its
	// config file, Core's data folder and the user's home are hidden
	// anyway).
	Hide []string `toml:"hide"`
	// Checkpoint: a running session's work is pushed to its checkpoint ref
	// this often (5m).
	Checkpoint Duration `toml:"checkpoint"`
	// Drain: on SIGTERM, running sessions get this long to finish (1m).
	Drain Duration `toml:"drain"`
	// Watchdog stops a session that printed nothing for this long (30m):
	// it must allow for the longest build or test run an agent starts.
	Watchdog Duration `toml:"watchdog"`
	// Heartbeat: the runner and each of its runs tell Core they live this
	// often (10s); it must stay well under Core's [runs] grace.
	Heartbeat Duration `toml:"heartbeat"`
}

// Adapters configures the agent CLIs.
type Adapters struct {
	ClaudeCode ClaudeCode `toml:"claude-code"`
	OpenCode   OpenCode   `toml:"opencode"`
}

// ClaudeCode configures the claude-code adapter.
type ClaudeCode struct {
	Command string `toml:"command"` // the executable (claude, from PATH)
	Model   string `toml:"model"`   // when a stage names none; "": the CLI's default
}

// OpenCode configures the opencode adapter.
type OpenCode struct {
	Command  string `toml:"command"`  // the executable (opencode, from PATH)
	Model    string `toml:"model"`    // when a stage names none (claude-sonnet-4-5)
	Provider string `toml:"provider"` // anthropic (default) or openai (an OpenAI-compatible API)
	BaseURL  string `toml:"base_url"` // "": ANTHROPIC_BASE_URL or OPENAI_BASE_URL
	// Prices are the model's dollars per million tokens for opencode's cost
	// figures; all 0: opencode's own.
	Prices Prices `toml:"prices"`
}

// Prices are dollars per million tokens.
type Prices struct {
	Input      float64 `toml:"input"`
	Output     float64 `toml:"output"`
	CacheRead  float64 `toml:"cache_read"`
	CacheWrite float64 `toml:"cache_write"`
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
	// SessionTTL is a browser session's absolute lifetime from sign-in
	// (never extended by use; capped by the credential it was made from).
	SessionTTL Duration `toml:"session_ttl"`
	// OIDCClientID enables the browser's sign-in through the issuer
	// (authorization code flow with PKCE); it needs [http] public_url for
	// the redirect URI <public_url>/auth/oidc/callback.
	OIDCClientID     string `toml:"oidc_client_id"`
	OIDCClientSecret string `toml:"oidc_client_secret"` // "" for a public client
}

// Knowledge configures Core's side of the Knowledge service: the proxy
// under /api/v1/knowledge, the MCP tools and the entries a stage names.
type Knowledge struct {
	URL string `toml:"url"` // the service's URL (http://127.0.0.1:8090)
	// ServiceToken is the credential Core and the Knowledge service share
	// (BALLET_KNOWLEDGE_TOKEN overrides it): Core calls the service with
	// it, and only it may call Core's introspection endpoint. Never a user
	// credential; "" leaves Knowledge unconfigured.
	ServiceToken string `toml:"service_token"`
	// Wait: an agent stage whose entries cannot be fetched (the service is
	// down) retries this long since it was entered, then its flow waits
	// for an answer (10m).
	Wait Duration `toml:"wait"`

	// The service's own side (`ballet knowledge`, its own file: its
	// [storage] and [http] are its own, see KnowledgeDefault).

	// Core is Core's URL, whose introspection endpoint resolves callers'
	// credentials (http://127.0.0.1:8080).
	Core string `toml:"core"`
	// AuthCache is how long Core's answer about a credential is used
	// (30s): a credential Core revoked stops working within it, and while
	// Core is down, known credentials keep working until it runs out. At
	// most 10m.
	AuthCache Duration `toml:"auth_cache"`
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
	Addr string `toml:"addr"` // 127.0.0.1:8080
	// PublicURL is Core's URL as runners and agent sessions reach it
	// (the MCP endpoint a lease names is PublicURL + /api/v1/mcp); ""
	// means http://<addr> (127.0.0.1 when addr names no host).
	PublicURL    string `toml:"public_url"`
	MaxBodyBytes int64  `toml:"max_body_bytes"` // request body limit (1 MiB)
	// ReadHeaderTimeout bounds reading a request's headers (10s),
	// ReadTimeout its headers and body (30s), WriteTimeout the time from
	// its headers to the end of the answer (30s; long polls and the
	// realtime WebSocket extend it), IdleTimeout a keep-alive connection
	// between requests (60s).
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	ReadTimeout       Duration `toml:"read_timeout"`
	WriteTimeout      Duration `toml:"write_timeout"`
	IdleTimeout       Duration `toml:"idle_timeout"`
	// MaxConns caps open connections (2048), MaxConnsPerIP those from one
	// remote address (512; 0: no per-address cap, e.g. behind a proxy).
	// Excess connections are answered 503 and closed at once.
	MaxConns      int `toml:"max_conns"`
	MaxConnsPerIP int `toml:"max_conns_per_ip"`
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
	// UnclaimedAfter: a flow whose run no runner leased this long needs
	// attention (no_runner) (2m).
	UnclaimedAfter Duration `toml:"unclaimed_after"`
	// LogLimit is how many bytes of a run's session output Core keeps
	// (8 MiB); the rest is dropped and the truncation marked.
	LogLimit int64 `toml:"log_limit"`
}

// DefaultLogLimit is [runs] log_limit's default.
const DefaultLogLimit = 8 << 20

// PublicURL is Core's URL for runners and sessions: [http] public_url,
// else http://<[http] addr> (127.0.0.1 for an address without host or on
// every interface), without a trailing slash.
func (c Config) PublicURL() string {
	if c.HTTP.PublicURL != "" {
		return strings.TrimRight(c.HTTP.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(c.HTTP.Addr)
	if err != nil {
		return "http://" + c.HTTP.Addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
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
	// PingInterval is how often the realtime WebSocket pings a client
	// (30s); one that does not answer within PingTimeout (10s) is dropped.
	PingInterval Duration `toml:"ping_interval"`
	PingTimeout  Duration `toml:"ping_timeout"`
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
		HTTP: HTTP{Addr: "127.0.0.1:8080", MaxBodyBytes: 1 << 20,
			ReadHeaderTimeout: Duration{10 * time.Second}, ReadTimeout: Duration{30 * time.Second},
			WriteTimeout: Duration{30 * time.Second}, IdleTimeout: Duration{time.Minute},
			MaxConns: 2048, MaxConnsPerIP: 512},
		Jobs: Jobs{Concurrency: 8, Lease: Duration{5 * time.Minute}, Poll: Duration{time.Second},
			BackoffCap: Duration{10 * time.Minute}, MaxAttempts: 20, ShutdownGrace: Duration{30 * time.Second}},
		Reconciler: Reconciler{Interval: Duration{time.Minute}, Slack: Duration{5 * time.Minute}},
		Leader:     Leader{TTL: Duration{15 * time.Second}, Renew: Duration{5 * time.Second}},
		Scheduler:  Scheduler{Interval: Duration{10 * time.Second}},
		Runs:       Runs{Grace: Duration{2 * time.Minute}, UnclaimedAfter: Duration{2 * time.Minute}, LogLimit: DefaultLogLimit},
		Budgets:    Budgets{Timezone: "UTC"},
		Events: Events{TailInterval: Duration{200 * time.Millisecond}, AuthRecheck: Duration{time.Minute},
			PingInterval: Duration{30 * time.Second}, PingTimeout: Duration{10 * time.Second}},
		Auth: Auth{PlatformAdmins: []string{}, SessionTTL: Duration{12 * time.Hour}},
		Log:  Log{Level: "info", Format: "text"},
		Knowledge: Knowledge{URL: "http://127.0.0.1:8090", Wait: Duration{10 * time.Minute},
			Core: "http://127.0.0.1:8080", AuthCache: Duration{30 * time.Second}},
		Runner: Runner{Server: "http://127.0.0.1:8080", Labels: map[string]string{}, Workdir: "data/runner", Sessions: 2,
			Sandbox: "bwrap", PassEnv: []string{}, Hide: []string{}, Checkpoint: Duration{5 * time.Minute},
			Drain: Duration{time.Minute}, Watchdog: Duration{30 * time.Minute}, Heartbeat: Duration{10 * time.Second}},
		Adapters: Adapters{
			ClaudeCode: ClaudeCode{Command: "claude"},
			OpenCode:   OpenCode{Command: "opencode", Model: "claude-sonnet-4-5", Provider: "anthropic"},
		},
		Secrets: Secrets{Allow: []string{}},
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
	cfg, err = Parse(string(b), path)
	cfg.File = path
	return cfg, err
}

// Parse reads TOML text over the defaults; name is used in messages.
func Parse(text, name string) (Config, error) {
	return parseOver(Default(), text, name)
}

// parseOver parses text over the defaults cfg and validates the result.
func parseOver(cfg Config, text, name string) (Config, error) {
	md, err := toml.Decode(text, &cfg)
	if err != nil {
		return cfg, fmt.Errorf("config %s: %s", name, decodeError(err))
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

var (
	// lastKey matches the decoder's type errors: toml: line 2 (last key "jobs.concurrency"): …
	lastKey = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "([^"]*)"\): (.*)$`)
	// badType matches the decoder's incompatible-types message.
	badType = regexp.MustCompile(`^incompatible types: TOML value has type (\S+); destination has type (\S+)$`)
)

// decodeError turns a TOML decoding error into "line N: key: problem", so
// that every error names its key (a bad duration, a wrong type).
func decodeError(err error) string {
	line, key, msg := "", "", err.Error()
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line, key, msg = strconv.Itoa(pe.Position.Line), pe.LastKey, pe.Message
	} else if m := lastKey.FindStringSubmatch(msg); m != nil {
		line, key, msg = m[1], m[2], m[3]
	}
	if m := badType.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("must be %s, not %s", tomlType(m[2]), tomlType(m[1]))
	}
	out := msg
	if key != "" {
		out = key + ": " + out
	}
	if line != "" && line != "0" {
		out = "line " + line + ": " + out
	}
	return out
}

// tomlType names a type of the decoder's messages for a person.
func tomlType(t string) string {
	switch t {
	case "string":
		return "a string"
	case "integer", "int64":
		return "an integer"
	case "float", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "table", "struct":
		return "a table"
	}
	return t
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
	if err := checkAddr(c.HTTP.Addr); err != nil {
		bad("http.addr", "%q %v", c.HTTP.Addr, err)
	}
	if c.HTTP.PublicURL != "" {
		if err := checkURL(c.HTTP.PublicURL); err != nil {
			bad("http.public_url", "%q %v", c.HTTP.PublicURL, err)
		}
	}
	if c.Runs.LogLimit < 1024 || c.Runs.LogLimit > 1<<30 {
		bad("runs.log_limit", "%d is outside 1024 … 1073741824 (bytes)", c.Runs.LogLimit)
	}
	if c.HTTP.MaxBodyBytes < 1024 || c.HTTP.MaxBodyBytes > 1<<30 {
		bad("http.max_body_bytes", "%d is outside 1024 … 1073741824", c.HTTP.MaxBodyBytes)
	}
	if c.HTTP.MaxConns < 1 || c.HTTP.MaxConns > 1_000_000 {
		bad("http.max_conns", "%d is outside 1 … 1000000", c.HTTP.MaxConns)
	}
	if c.HTTP.MaxConnsPerIP < 0 || c.HTTP.MaxConnsPerIP > 1_000_000 {
		bad("http.max_conns_per_ip", "%d is outside 0 … 1000000 (0: no per-address cap)", c.HTTP.MaxConnsPerIP)
	}
	if c.Jobs.Concurrency < 1 || c.Jobs.Concurrency > 1024 {
		bad("jobs.concurrency", "%d is outside 1 … 1024", c.Jobs.Concurrency)
	}
	if c.Jobs.MaxAttempts < 1 || c.Jobs.MaxAttempts > 1000 {
		bad("jobs.max_attempts", "%d is outside 1 … 1000", c.Jobs.MaxAttempts)
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{
		{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout}, {"http.read_timeout", c.HTTP.ReadTimeout},
		{"http.write_timeout", c.HTTP.WriteTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout},
		{"jobs.lease", c.Jobs.Lease}, {"jobs.poll", c.Jobs.Poll}, {"jobs.backoff_cap", c.Jobs.BackoffCap},
		{"jobs.shutdown_grace", c.Jobs.ShutdownGrace}, {"reconciler.interval", c.Reconciler.Interval},
		{"leader.ttl", c.Leader.TTL}, {"leader.renew", c.Leader.Renew}, {"runs.grace", c.Runs.Grace}, {"runs.unclaimed_after", c.Runs.UnclaimedAfter},
		{"scheduler.interval", c.Scheduler.Interval}, {"events.tail_interval", c.Events.TailInterval},
		{"events.auth_recheck", c.Events.AuthRecheck}, {"knowledge.wait", c.Knowledge.Wait},
		{"events.ping_interval", c.Events.PingInterval}, {"events.ping_timeout", c.Events.PingTimeout},
	} {
		if d.v.Duration <= 0 {
			bad(d.key, "must be a positive duration")
		}
	}
	if h, r := c.HTTP.ReadHeaderTimeout, c.HTTP.ReadTimeout; h.Duration > r.Duration && r.Duration > 0 {
		bad("http.read_header_timeout", "%s must not exceed http.read_timeout (%s)", h, r)
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
	if d := c.Auth.SessionTTL.Duration; d < time.Minute || d > 30*24*time.Hour {
		bad("auth.session_ttl", "%s is outside 1m … 720h", c.Auth.SessionTTL)
	}
	if c.Auth.OIDCClientID != "" {
		if c.Auth.OIDCIssuer == "" {
			bad("auth.oidc_client_id", "needs auth.oidc_issuer: the issuer the browser signs in with")
		}
		if c.HTTP.PublicURL == "" {
			bad("auth.oidc_client_id", "needs http.public_url: the redirect URI is <http.public_url>/auth/oidc/callback")
		}
	}
	if c.Auth.OIDCClientSecret != "" && c.Auth.OIDCClientID == "" {
		bad("auth.oidc_client_secret", "is set without auth.oidc_client_id")
	}
	if t := c.Auth.BootstrapToken; t != "" && len(t) < 16 {
		bad("auth.bootstrap_token", "must be at least 16 characters")
	}
	if err := checkURL(c.Knowledge.URL); err != nil {
		bad("knowledge.url", "%q %v", c.Knowledge.URL, err)
	}
	if t := c.Knowledge.ServiceToken; t != "" {
		if err := checkServiceToken(t); err != nil {
			bad("knowledge.service_token", "%v", err)
		} else if t == c.Auth.BootstrapToken {
			bad("knowledge.service_token", "must differ from auth.bootstrap_token")
		}
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
	errs = append(errs, c.Knowledge.validate()...)
	errs = append(errs, c.Runner.validate()...)
	errs = append(errs, c.Adapters.validate()...)
	errs = append(errs, c.Secrets.validate()...)
	return errors.Join(errs...)
}

var (
	labelRE  = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
	envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (r Runner) validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("runner.%s: "+format, append([]any{key}, args...)...))
	}
	if err := checkURL(r.Server); err != nil {
		bad("server", "%q %v", r.Server, err)
	}
	if strings.ContainsFunc(r.Token, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		bad("token", "holds spaces or control characters")
	}
	if len(r.Name) > 200 || strings.ContainsFunc(r.Name, func(c rune) bool { return c < ' ' || c == 0x7f }) {
		bad("name", "must be at most 200 characters without control characters")
	}
	if len(r.Labels) > 32 {
		bad("labels", "has %d labels; at most 32", len(r.Labels))
	}
	for k, v := range r.Labels {
		if !labelRE.MatchString(k) {
			bad("labels", "%q is not a label name ([a-z][a-z0-9_.-]{0,63})", k)
		}
		if len(v) > 200 {
			bad("labels."+k, "must be at most 200 characters")
		}
	}
	if r.Workdir == "" {
		bad("workdir", "must not be empty")
	}
	if r.Sessions < 1 || r.Sessions > 64 {
		bad("sessions", "%d is outside 1 … 64", r.Sessions)
	}
	switch r.Sandbox {
	case "bwrap", "none":
	default:
		bad("sandbox", "%q is not bwrap or none", r.Sandbox)
	}
	for _, k := range r.PassEnv {
		switch {
		case !envVarRE.MatchString(k):
			bad("pass_env", "%q is not an environment variable name", k)
		case strings.HasPrefix(k, "CLAUDECODE"):
			bad("pass_env", "%q: claude-code's own markers are never passed to a session", k)
		}
	}
	for _, p := range r.Hide {
		if p == "" || p == "/" {
			bad("hide", "%q: name a file or folder other than /", p)
		}
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"checkpoint", r.Checkpoint}, {"drain", r.Drain}, {"watchdog", r.Watchdog}, {"heartbeat", r.Heartbeat}} {
		if d.v.Duration <= 0 {
			bad(d.key, "must be a positive duration")
		}
	}
	return errs
}

// validate checks the service's own keys (Validate checks Core's).
func (k Knowledge) validate() []error {
	var errs []error
	if err := checkURL(k.Core); err != nil {
		errs = append(errs, fmt.Errorf("knowledge.core: %q %v", k.Core, err))
	}
	if d := k.AuthCache.Duration; d <= 0 || d > 10*time.Minute {
		errs = append(errs, fmt.Errorf("knowledge.auth_cache: %s is outside 0 … 10m (exclusive of 0)", k.AuthCache))
	}
	return errs
}

func (a Adapters) validate() []error {
	var errs []error
	if a.ClaudeCode.Command == "" {
		errs = append(errs, errors.New("adapters.claude-code.command: must not be empty"))
	}
	o := a.OpenCode
	if o.Command == "" {
		errs = append(errs, errors.New("adapters.opencode.command: must not be empty"))
	}
	switch o.Provider {
	case "anthropic", "openai":
	default:
		errs = append(errs, fmt.Errorf("adapters.opencode.provider: %q is not anthropic or openai", o.Provider))
	}
	if o.BaseURL != "" {
		if err := checkURL(o.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("adapters.opencode.base_url: %q %v", o.BaseURL, err))
		}
	}
	for _, p := range []struct {
		key string
		v   float64
	}{{"input", o.Prices.Input}, {"output", o.Prices.Output}, {"cache_read", o.Prices.CacheRead}, {"cache_write", o.Prices.CacheWrite}} {
		if p.v < 0 || p.v > 10000 || p.v != p.v {
			errs = append(errs, fmt.Errorf("adapters.opencode.prices.%s: %v is outside 0 … 10000 (dollars per million tokens)", p.key, p.v))
		}
	}
	return errs
}

// checkURL accepts an http(s) URL with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("is not an http(s) URL such as http://127.0.0.1:8080")
	}
	return nil
}

// BootstrapTokenPath is where the platform-admin bootstrap token is kept:
// [auth] bootstrap_token_file, else bootstrap-token next to storage.path.
func (c Config) BootstrapTokenPath() string {
	if c.Auth.BootstrapTokenFile != "" {
		return c.Auth.BootstrapTokenFile
	}
	return filepath.Join(filepath.Dir(c.Storage.Path), "bootstrap-token")
}

// checkAddr accepts host:port with a numeric port 0 … 65535 and a host that
// is empty (every interface), an IP address or a host name.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("is not host:port (e.g. 127.0.0.1:8080)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("has port %q: a port is a number from 0 to 65535", port)
	}
	if host == "" || net.ParseIP(host) != nil {
		return nil
	}
	labels := strings.Split(host, ".")
	if _, err := strconv.Atoi(labels[len(labels)-1]); err == nil { // 999.1.1.1: neither an IP nor a name
		return fmt.Errorf("has host %q: not an IP address or host name", host)
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") ||
			strings.ContainsFunc(label, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
			}) {
			return fmt.Errorf("has host %q: not an IP address or host name", host)
		}
	}
	return nil
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
	if cfg.Auth.OIDCClientSecret != "" {
		cfg.Auth.OIDCClientSecret = "********"
	}
	if cfg.Runner.Token != "" {
		cfg.Runner.Token = "********"
	}
	if cfg.Knowledge.ServiceToken != "" {
		cfg.Knowledge.ServiceToken = "********"
	}
	if err := toml.NewEncoder(w).Encode(cfg); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}
