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
	Notify   Notify   `toml:"notify"`
	Digest   Digest   `toml:"digest"`
	// Retention bounds what Core keeps (docs/operations.md#retention).
	Retention Retention `toml:"retention"`

	// File is the file the configuration was loaded from ("": none), one
	// of the files no secret reference may name.
	File string `toml:"-"`
}

// KnowledgeDefault is the Knowledge service's defaults: Default with its
// own database (data/knowledge.db) and address (127.0.0.1:8090).
func KnowledgeDefault() Config {
	c := Default()
	c.Storage.Path = "data/knowledge.db"
	c.Storage.URL = "http://127.0.0.1:4011"
	c.HTTP.Addr = "127.0.0.1:8090"
	return c
}

// LoadKnowledge reads the Knowledge service's file over KnowledgeDefault
// ("": the defaults alone), then BALLET_KNOWLEDGE_TOKEN over
// [knowledge] service_token.
func LoadKnowledge(path string) (Config, error) {
	cfg := KnowledgeDefault()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("read config: %w", err)
		}
		if cfg, err = parseOver(cfg, string(b), path); err != nil {
			return cfg, err
		}
	}
	t, err := cfg.KnowledgeToken(os.LookupEnv)
	if err != nil {
		return cfg, err
	}
	cfg.Knowledge.ServiceToken = t
	if err := cfg.Validate(); err != nil {
		if path == "" {
			return cfg, err
		}
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
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

// KnowledgeEnvToken overrides [knowledge] service_token.
const KnowledgeEnvToken = "BALLET_KNOWLEDGE_TOKEN"

// MinServiceToken is the shortest service credential accepted.
const MinServiceToken = 32

// KnowledgeToken returns the service credential: BALLET_KNOWLEDGE_TOKEN
// from lookup (os.LookupEnv) when set, else [knowledge] service_token. An
// environment value is checked like the key.
func (c Config) KnowledgeToken(lookup func(string) (string, bool)) (string, error) {
	if v, ok := lookup(KnowledgeEnvToken); ok && v != "" {
		if err := checkServiceToken(v); err != nil {
			return "", fmt.Errorf("%s: %w", KnowledgeEnvToken, err)
		}
		if v == c.Auth.BootstrapToken {
			return "", fmt.Errorf("%s: must differ from auth.bootstrap_token", KnowledgeEnvToken)
		}
		return v, nil
	}
	return c.Knowledge.ServiceToken, nil
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

// Digest configures the digest: per person, per period, what needs them,
// what finished, what failed and the spend (docs/notifications.md).
type Digest struct {
	Enabled bool     `toml:"enabled"` // false turns the digest off platform-wide (true)
	Every   Duration `toml:"every"`   // the period (24h; at least 1m)
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
	// RunnerRetention is the old name of [retention] runners, still read
	// (zero: unset; setting both is an error). Config.RunnerRetention
	// resolves the two.
	RunnerRetention Duration `toml:"runner_retention,omitempty"`
	// MaxInterruptions: how many times in a row a stage's session may end
	// interrupted (a restart, a lost runner, a drain, the kill switch, a
	// sandbox that did not start) and run again by itself before the flow
	// asks a blocking question (3).
	MaxInterruptions int `toml:"max_interruptions"`
}

// Retention bounds the data Core keeps: what is older than its key is
// deleted online, in small batches, by the leader's retention job every
// Interval (and once at start). Events are history and are never deleted.
type Retention struct {
	// RunLogs: a run's log is deleted this long after the run ended
	// (720h); reading it then answers 410.
	RunLogs Duration `toml:"run_logs"`
	// Jobs: a finished job (done or dead) is deleted this long after it
	// finished (168h).
	Jobs Duration `toml:"jobs"`
	// Sessions: a browser session is deleted this long after it expired
	// or ended (24h).
	Sessions Duration `toml:"sessions"`
	// Notifications: a read notification is deleted this long after it
	// was read (2160h); unread ones are kept.
	Notifications Duration `toml:"notifications"`
	// Deliveries: a webhook delivery that ended (succeeded, failed or
	// skipped) and a digest are deleted this long after (720h); each
	// person's latest digest stays.
	Deliveries Duration `toml:"deliveries"`
	// Runners: a runner not seen for longer, running nothing, is removed
	// (event runner.removed) (24h; longer than [runs] grace); one that
	// comes back registers again.
	Runners Duration `toml:"runners"`
	// Interval: how often the retention job runs (1h).
	Interval Duration `toml:"interval"`
}

// RunnerRetention is how long a runner may be gone before it is removed:
// [retention] runners, or the old [runs] runner_retention when that is
// what the file sets.
func (c Config) RunnerRetention() time.Duration {
	if c.Runs.RunnerRetention.Duration > 0 {
		return c.Runs.RunnerRetention.Duration
	}
	return c.Retention.Runners.Duration
}

// DefaultMaxInterruptions is [runs] max_interruptions' default.
const DefaultMaxInterruptions = 3

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

// LinkBase is where links to Ballet's pages point: [notify] base_url,
// else PublicURL, without a trailing slash.
func (c Config) LinkBase() string {
	if c.Notify.BaseURL != "" {
		return strings.TrimRight(c.Notify.BaseURL, "/")
	}
	return c.PublicURL()
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
		Runs: Runs{Grace: Duration{2 * time.Minute}, UnclaimedAfter: Duration{2 * time.Minute}, LogLimit: DefaultLogLimit,
			MaxInterruptions: DefaultMaxInterruptions},
		Budgets: Budgets{Timezone: "UTC"},
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
		Notify: Notify{EscalateAfter: Duration{4 * time.Hour}, WebhookTimeout: Duration{10 * time.Second},
			Email: NotifyEmail{Timeout: Duration{30 * time.Second}}},
		Digest: Digest{Enabled: true, Every: Duration{24 * time.Hour}},
		Retention: Retention{RunLogs: Duration{30 * 24 * time.Hour}, Jobs: Duration{7 * 24 * time.Hour},
			Sessions: Duration{24 * time.Hour}, Notifications: Duration{90 * 24 * time.Hour},
			Deliveries: Duration{30 * 24 * time.Hour}, Runners: Duration{24 * time.Hour}, Interval: Duration{time.Hour}},
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
	if md.IsDefined("runs", "runner_retention") && md.IsDefined("retention", "runners") {
		return cfg, fmt.Errorf("config %s: runs.runner_retention is the old name of retention.runners: set only retention.runners", name)
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

// BootstrapTokenPath is where the platform-admin bootstrap token is kept:
// [auth] bootstrap_token_file, else bootstrap-token next to storage.path.
func (c Config) BootstrapTokenPath() string {
	if c.Auth.BootstrapTokenFile != "" {
		return c.Auth.BootstrapTokenFile
	}
	return filepath.Join(filepath.Dir(c.Storage.Path), "bootstrap-token")
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
