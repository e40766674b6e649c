package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// problems collects the bad values of one section, each naming its key
// (section.key).
type problems struct {
	section string
	errs    []error
}

// bad records that key (without the section) has a bad value.
func (p *problems) bad(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s.%s: "+format, append([]any{p.section, key}, args...)...))
}

// positive checks that each of the durations, by key, is above zero.
func (p *problems) positive(ds map[string]Duration) {
	for _, key := range slices.Sorted(maps.Keys(ds)) { // a stable order, a stable message
		if ds[key].Duration <= 0 {
			p.bad(key, "must be a positive duration")
		}
	}
}

// Validate checks every value, section by section, and names the key of
// each bad one. The checks that span two sections (a key that needs
// another) are Config's own.
func (c Config) Validate() error {
	var errs []error
	for _, section := range []struct {
		name  string
		check func(*problems)
	}{
		{"storage", c.Storage.validate}, {"http", c.HTTP.validate}, {"jobs", c.Jobs.validate},
		{"reconciler", c.Reconciler.validate}, {"leader", c.Leader.validate}, {"scheduler", c.Scheduler.validate},
		{"runs", c.Runs.validate}, {"budgets", c.Budgets.validate}, {"events", c.Events.validate},
		{"auth", c.Auth.validate}, {"log", c.Log.validate}, {"knowledge", c.Knowledge.validate},
		{"runner", c.Runner.validate}, {"adapters", c.Adapters.validate}, {"secrets", c.Secrets.validate}, {"auth", c.crossChecks},
		{"notify", c.Notify.validate},
		{"digest", c.Digest.validate},
		{"retention", c.Retention.validate}, {"retention", c.retentionChecks},
	} {
		p := &problems{section: section.name}
		section.check(p)
		errs = append(errs, p.errs...)
	}
	return errors.Join(errs...)
}

// crossChecks are the rules between sections: what [auth] needs of [http]
// and [knowledge].
func (c Config) crossChecks(p *problems) {
	if c.Auth.OIDCClientID != "" && c.HTTP.PublicURL == "" {
		p.bad("oidc_client_id", "needs http.public_url: the redirect URI is <http.public_url>/auth/oidc/callback")
	}
	if t := c.Knowledge.ServiceToken; t != "" && checkServiceToken(t) == nil && t == c.Auth.BootstrapToken {
		p.errs = append(p.errs, errors.New("knowledge.service_token: must differ from auth.bootstrap_token"))
	}
}

// retentionChecks: a runner is removed only once it is surely gone, so
// [retention] runners must be longer than [runs] grace (checked on the
// old [runs] runner_retention when that is set instead).
func (c Config) retentionChecks(p *problems) {
	if c.Runs.RunnerRetention.Duration != 0 {
		return // [runs] checks its own key
	}
	if d := c.Retention.Runners.Duration; d > 0 && d <= c.Runs.Grace.Duration {
		p.bad("runners", "%s must be longer than runs.grace (%s)", c.Retention.Runners, c.Runs.Grace)
	}
}

func (s Storage) validate(p *problems) {
	switch s.Engine {
	case "sqlite":
		if s.Path == "" {
			p.bad("path", "must not be empty")
		}
	case "rqlite":
		if len(s.URLs()) == 0 {
			p.bad("url", "must name at least one rqlite node")
		}
		for _, u := range s.URLs() {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				p.bad("url", "%q must start with http:// or https://", u)
			}
		}
	default:
		p.bad("engine", "%q is not sqlite or rqlite", s.Engine)
	}
	switch s.ReadConsistency {
	case "none", "weak", "linearizable", "strong":
	default:
		p.bad("read_consistency", "%q is not none, weak, linearizable or strong", s.ReadConsistency)
	}
}

func (h HTTP) validate(p *problems) {
	if err := checkAddr(h.Addr); err != nil {
		p.bad("addr", "%q %v", h.Addr, err)
	}
	if h.PublicURL != "" {
		if err := checkURL(h.PublicURL); err != nil {
			p.bad("public_url", "%q %v", h.PublicURL, err)
		}
	}
	if h.MaxBodyBytes < 1024 || h.MaxBodyBytes > 1<<30 {
		p.bad("max_body_bytes", "%d is outside 1024 … 1073741824", h.MaxBodyBytes)
	}
	if h.MaxConns < 1 || h.MaxConns > 1_000_000 {
		p.bad("max_conns", "%d is outside 1 … 1000000", h.MaxConns)
	}
	if h.MaxConnsPerIP < 0 || h.MaxConnsPerIP > 1_000_000 {
		p.bad("max_conns_per_ip", "%d is outside 0 … 1000000 (0: no per-address cap)", h.MaxConnsPerIP)
	}
	p.positive(map[string]Duration{"read_header_timeout": h.ReadHeaderTimeout, "read_timeout": h.ReadTimeout,
		"write_timeout": h.WriteTimeout, "idle_timeout": h.IdleTimeout})
	if hd, r := h.ReadHeaderTimeout, h.ReadTimeout; hd.Duration > r.Duration && r.Duration > 0 {
		p.bad("read_header_timeout", "%s must not exceed http.read_timeout (%s)", hd, r)
	}
}

func (j Jobs) validate(p *problems) {
	if j.Concurrency < 1 || j.Concurrency > 1024 {
		p.bad("concurrency", "%d is outside 1 … 1024", j.Concurrency)
	}
	if j.MaxAttempts < 1 || j.MaxAttempts > 1000 {
		p.bad("max_attempts", "%d is outside 1 … 1000", j.MaxAttempts)
	}
	p.positive(map[string]Duration{"lease": j.Lease, "poll": j.Poll, "backoff_cap": j.BackoffCap, "shutdown_grace": j.ShutdownGrace})
}

func (r Reconciler) validate(p *problems) {
	p.positive(map[string]Duration{"interval": r.Interval})
	if r.Slack.Duration < 0 {
		p.bad("slack", "must not be negative")
	}
}

func (d Digest) validate(p *problems) {
	if d.Every.Duration < time.Minute {
		p.bad("every", "%s is shorter than 1m", d.Every)
	}
}

func (l Leader) validate(p *problems) {
	p.positive(map[string]Duration{"ttl": l.TTL, "renew": l.Renew})
	if l.Renew.Duration >= l.TTL.Duration && l.TTL.Duration > 0 {
		p.bad("renew", "%s must be shorter than leader.ttl (%s)", l.Renew, l.TTL)
	}
}

func (s Scheduler) validate(p *problems) {
	p.positive(map[string]Duration{"interval": s.Interval})
	if s.PlatformLimit < 0 || s.PlatformLimit > 10000 {
		p.bad("platform_limit", "%d is outside 0 … 10000 (0: no limit)", s.PlatformLimit)
	}
}

func (r Runs) validate(p *problems) {
	p.positive(map[string]Duration{"grace": r.Grace, "unclaimed_after": r.UnclaimedAfter})
	if r.LogLimit < 1024 || r.LogLimit > 1<<30 {
		p.bad("log_limit", "%d is outside 1024 … 1073741824 (bytes)", r.LogLimit)
	}
	if d := r.RunnerRetention.Duration; d < 0 {
		p.bad("runner_retention", "must be a positive duration (it is the old name of retention.runners)")
	} else if d > 0 && d <= r.Grace.Duration {
		p.bad("runner_retention", "%s must be longer than runs.grace (%s)", r.RunnerRetention, r.Grace)
	}
	if r.MaxInterruptions < 1 || r.MaxInterruptions > 100 {
		p.bad("max_interruptions", "%d is outside 1 … 100", r.MaxInterruptions)
	}
}

// validate checks [retention]: every key a positive duration; a runner is
// removed only once it is surely gone (longer than [runs] grace).
func (r Retention) validate(p *problems) {
	p.positive(map[string]Duration{"run_logs": r.RunLogs, "jobs": r.Jobs, "sessions": r.Sessions,
		"notifications": r.Notifications, "deliveries": r.Deliveries, "runners": r.Runners, "interval": r.Interval})
}

func (b Budgets) validate(p *problems) {
	if _, err := b.Location(); err != nil || b.Timezone == "" {
		p.bad("timezone", "%q is not a time zone such as \"UTC\" or \"Europe/Berlin\"", b.Timezone)
	}
}

func (e Events) validate(p *problems) {
	p.positive(map[string]Duration{"tail_interval": e.TailInterval, "auth_recheck": e.AuthRecheck,
		"ping_interval": e.PingInterval, "ping_timeout": e.PingTimeout})
}

func (a Auth) validate(p *problems) {
	if a.OIDCIssuer != "" {
		if !strings.HasPrefix(a.OIDCIssuer, "https://") && !strings.HasPrefix(a.OIDCIssuer, "http://") {
			p.bad("oidc_issuer", "%q must be an http(s) URL", a.OIDCIssuer)
		}
		if a.OIDCAudience == "" {
			p.bad("oidc_audience", "must be set when auth.oidc_issuer is")
		}
	}
	if d := a.SessionTTL.Duration; d < time.Minute || d > 30*24*time.Hour {
		p.bad("session_ttl", "%s is outside 1m … 720h", a.SessionTTL)
	}
	if a.OIDCClientID != "" && a.OIDCIssuer == "" {
		p.bad("oidc_client_id", "needs auth.oidc_issuer: the issuer the browser signs in with")
	}
	if a.OIDCClientSecret != "" && a.OIDCClientID == "" {
		p.bad("oidc_client_secret", "is set without auth.oidc_client_id")
	}
	if t := a.BootstrapToken; t != "" && len(t) < 16 {
		p.bad("bootstrap_token", "must be at least 16 characters")
	}
}

func (l Log) validate(p *problems) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		p.bad("level", "%q is not debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		p.bad("format", "%q is not text or json", l.Format)
	}
}

// validate checks Core's side of the service and the service's own keys.
func (k Knowledge) validate(p *problems) {
	if err := checkURL(k.URL); err != nil {
		p.bad("url", "%q %v", k.URL, err)
	}
	if t := k.ServiceToken; t != "" {
		if err := checkServiceToken(t); err != nil {
			p.bad("service_token", "%v", err)
		}
	}
	p.positive(map[string]Duration{"wait": k.Wait})
	if err := checkURL(k.Core); err != nil {
		p.bad("core", "%q %v", k.Core, err)
	}
	if d := k.AuthCache.Duration; d <= 0 || d > 10*time.Minute {
		p.bad("auth_cache", "%s is outside 0 … 10m (exclusive of 0)", k.AuthCache)
	}
}

var (
	labelRE  = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
	envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (r Runner) validate(p *problems) {
	if err := checkURL(r.Server); err != nil {
		p.bad("server", "%q %v", r.Server, err)
	}
	if strings.ContainsFunc(r.Token, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		p.bad("token", "holds spaces or control characters")
	}
	if len(r.Name) > 200 || strings.ContainsFunc(r.Name, func(c rune) bool { return c < ' ' || c == 0x7f }) {
		p.bad("name", "must be at most 200 characters without control characters")
	}
	if len(r.Labels) > 32 {
		p.bad("labels", "has %d labels; at most 32", len(r.Labels))
	}
	for k, v := range r.Labels {
		if !labelRE.MatchString(k) {
			p.bad("labels", "%q is not a label name ([a-z][a-z0-9_.-]{0,63})", k)
		}
		if len(v) > 200 {
			p.bad("labels."+k, "must be at most 200 characters")
		}
	}
	if r.Workdir == "" {
		p.bad("workdir", "must not be empty")
	}
	if r.Sessions < 1 || r.Sessions > 64 {
		p.bad("sessions", "%d is outside 1 … 64", r.Sessions)
	}
	switch r.Sandbox {
	case "bwrap", "none":
	default:
		p.bad("sandbox", "%q is not bwrap or none", r.Sandbox)
	}
	for _, k := range r.PassEnv {
		switch {
		case !envVarRE.MatchString(k):
			p.bad("pass_env", "%q is not an environment variable name", k)
		case strings.HasPrefix(k, "CLAUDECODE"):
			p.bad("pass_env", "%q: claude-code's own markers are never passed to a session", k)
		}
	}
	for _, h := range r.Hide {
		if h == "" || h == "/" {
			p.bad("hide", "%q: name a file or folder other than /", h)
		}
	}
	p.positive(map[string]Duration{"checkpoint": r.Checkpoint, "drain": r.Drain, "watchdog": r.Watchdog, "heartbeat": r.Heartbeat})
}

func (a Adapters) validate(p *problems) {
	if a.ClaudeCode.Command == "" {
		p.bad("claude-code.command", "must not be empty")
	}
	o := a.OpenCode
	if o.Command == "" {
		p.bad("opencode.command", "must not be empty")
	}
	switch o.Provider {
	case "anthropic", "openai":
	default:
		p.bad("opencode.provider", "%q is not anthropic or openai", o.Provider)
	}
	if o.BaseURL != "" {
		if err := checkURL(o.BaseURL); err != nil {
			p.bad("opencode.base_url", "%q %v", o.BaseURL, err)
		}
	}
	for _, pr := range []struct {
		key string
		v   float64
	}{{"input", o.Prices.Input}, {"output", o.Prices.Output}, {"cache_read", o.Prices.CacheRead}, {"cache_write", o.Prices.CacheWrite}} {
		if pr.v < 0 || pr.v > 10000 || pr.v != pr.v {
			p.bad("opencode.prices."+pr.key, "%v is outside 0 … 10000 (dollars per million tokens)", pr.v)
		}
	}
}

// checkServiceToken accepts a service credential of at least
// MinServiceToken printable characters without spaces.
func checkServiceToken(t string) error {
	if len(t) < MinServiceToken {
		return fmt.Errorf("must be at least %d characters", MinServiceToken)
	}
	if strings.ContainsFunc(t, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return errors.New("holds spaces or control characters")
	}
	return nil
}

// checkURL accepts an http(s) URL with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("is not an http(s) URL such as http://127.0.0.1:8080")
	}
	return nil
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
