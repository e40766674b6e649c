package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultsNeedNoFile(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Storage.Path != "data/core.db" || c.Storage.Engine != "sqlite" || c.HTTP.Addr != "127.0.0.1:8080" {
		t.Fatalf("storage/http defaults: %+v %+v", c.Storage, c.HTTP)
	}
	j := c.Jobs
	if j.Concurrency != 8 || j.Lease.Duration != 5*time.Minute || j.Poll.Duration != time.Second || j.BackoffCap.Duration != 10*time.Minute {
		t.Fatalf("jobs defaults: %+v", j)
	}
	if c.Reconciler.Interval.Duration != time.Minute || c.Reconciler.Slack.Duration != 5*time.Minute {
		t.Fatalf("reconciler defaults: %+v", c.Reconciler)
	}
	if c.Runs.Grace.Duration != 2*time.Minute || c.Runs.UnclaimedAfter.Duration != 2*time.Minute {
		t.Fatalf("runs defaults: %+v", c.Runs)
	}
	if c.Notify.EscalateAfter.Duration != 4*time.Hour {
		t.Fatalf("notify defaults: %+v", c.Notify)
	}
}

func TestFileOverridesDefaults(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ballet.toml")
	if err := os.WriteFile(p, []byte("[storage]\npath = \"x/y.db\"\n[jobs]\nconcurrency = 3\nlease = \"90s\"\n[reconciler]\nslack = \"0s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Storage.Path != "x/y.db" || c.Jobs.Concurrency != 3 || c.Jobs.Lease.Duration != 90*time.Second || c.Reconciler.Slack.Duration != 0 {
		t.Fatalf("got %+v", c)
	}
	if c.Jobs.Poll.Duration != time.Second {
		t.Fatal("a key missing from the file lost its default")
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct{ toml, want string }{
		{"[storage]\npaht = \"x\"\n", "unknown key storage.paht"},
		{"[secrets]\nallow = [\"env:GITEA_{ORG}_*\"]\n", "secrets.allow: \"env:GITEA_{ORG}_*\": no wildcard may follow {ORG}"},
		{"[secrets]\nallow = [\"file:/etc/forge/{org}*\"]\n", "secrets.allow: \"file:/etc/forge/{org}*\": {org} must be a whole path component"},
		{"[jobz]\nconcurrency = 1\n", "unknown key jobz"},
		{"[jobs]\nconcurrency = 0\n", "jobs.concurrency: 0 is outside 1 … 1024"},
		{"[jobs]\nlease = \"soon\"\n", `line 2: jobs.lease: "soon" is not a duration`},
		{"[jobs]\nlease = \"5x\"\n", `jobs.lease: "5x" is not a duration`},
		{"[http]\nread_timeout = \"fast\"\n", `http.read_timeout: "fast" is not a duration`},
		{"[events]\nping_interval = 30\n", `events.ping_interval: "30" is not a duration`},
		{"[jobs]\nconcurrency = \"eight\"\n", "line 2: jobs.concurrency: must be an integer, not a string"},
		{"[http]\naddr = 8080\n", "http.addr: must be a string, not an integer"},
		{"[auth]\nplatform_admins = \"alice\"\n", "auth.platform_admins: must be an array, not a string"},
		{"[http]\nwrite_timeout = \"0s\"\n", "http.write_timeout: must be a positive duration"},
		{"[http]\nidle_timeout = \"-1s\"\n", "http.idle_timeout: must be a positive duration"},
		{"[http]\nread_header_timeout = \"1m\"\nread_timeout = \"10s\"\n", "http.read_header_timeout: 1m0s must not exceed http.read_timeout"},
		{"[http]\nmax_conns = 0\n", "http.max_conns: 0 is outside 1 … 1000000"},
		{"[http]\nmax_conns_per_ip = -1\n", "http.max_conns_per_ip: -1 is outside 0 … 1000000"},
		{"[events]\nping_timeout = \"0s\"\n", "events.ping_timeout: must be a positive duration"},
		{"[jobs]\nlease = \"-1s\"\n", "jobs.lease: must be a positive duration"},
		{"[storage]\nengine = \"postgres\"\n", `storage.engine: "postgres" is not sqlite or rqlite`},
		{"[storage]\nengine = \"rqlite\"\nurl = \"127.0.0.1:4001\"\n", "storage.url: \"127.0.0.1:4001\" must start with http://"},
		{"[http]\naddr = \"8080\"\n", `http.addr: "8080" is not host:port`},
		{"[http]\naddr = \"127.0.0.1:99999\"\n", `http.addr: "127.0.0.1:99999" has port "99999": a port is a number from 0 to 65535`},
		{"[http]\naddr = \"127.0.0.1:-1\"\n", `http.addr: "127.0.0.1:-1" has port "-1"`},
		{"[http]\naddr = \"127.0.0.1:http\"\n", `http.addr: "127.0.0.1:http" has port "http"`},
		{"[http]\naddr = \"exa mple:80\"\n", `http.addr: "exa mple:80" has host "exa mple": not an IP address or host name`},
		{"[http]\naddr = \"999.1.1.1:80\"\n", `http.addr: "999.1.1.1:80" has host "999.1.1.1"`},
		{"[reconciler]\ninterval = \"0s\"\n", "reconciler.interval: must be a positive duration"},
		{"[digest]\nevery = \"59s\"\n", "digest.every: 59s is shorter than 1m"},
		{"[digest]\nevery = \"-1h\"\n", "digest.every: -1h0m0s is shorter than 1m"},
		{"[auth]\nsession_ttl = \"30s\"\n", "auth.session_ttl: 30s is outside 1m … 720h"},
		{"[auth]\nsession_ttl = \"721h\"\n", "auth.session_ttl: 721h0m0s is outside 1m … 720h"},
		{"[auth]\noidc_client_id = \"ui\"\n", "auth.oidc_client_id: needs auth.oidc_issuer"},
		{"[auth]\noidc_issuer = \"https://id.example\"\noidc_audience = \"a\"\noidc_client_id = \"ui\"\n",
			"auth.oidc_client_id: needs http.public_url: the redirect URI is <http.public_url>/auth/oidc/callback"},
		{"[auth]\noidc_client_secret = \"s\"\n", "auth.oidc_client_secret: is set without auth.oidc_client_id"},
		{"[events]\nauth_recheck = \"0s\"\n", "events.auth_recheck: must be a positive duration"},
		{"[runs]\nunclaimed_after = \"0s\"\n", "runs.unclaimed_after: must be a positive duration"},
		{"[runs]\nrunner_retention = \"-1h\"\n", "runs.runner_retention: must be a positive duration (it is the old name of retention.runners)"},
		{"[runs]\nrunner_retention = \"2h\"\n[retention]\nrunners = \"3h\"\n", "runs.runner_retention is the old name of retention.runners: set only retention.runners"},
		{"[retention]\nrunners = \"1m\"\n", "retention.runners: 1m0s must be longer than runs.grace (2m0s)"},
		{"[retention]\nrun_logs = \"0s\"\n", "retention.run_logs: must be a positive duration"},
		{"[retention]\njobs = \"-1h\"\n", "retention.jobs: must be a positive duration"},
		{"[retention]\nsessions = \"0s\"\nnotifications = \"0s\"\n", "retention.notifications: must be a positive duration\nretention.sessions: must be a positive duration"},
		{"[retention]\ninterval = \"0s\"\n", "retention.interval: must be a positive duration"},
		{"[retention]\nrun_logs = \"30 days\"\n", "retention.run_logs: \"30 days\" is not a duration"},
		{"[retention]\nkeep = \"1h\"\n", "unknown key retention.keep"},
		{"[runs]\nmax_interruptions = 0\n", "runs.max_interruptions: 0 is outside 1 … 100"},
		{"[runs]\nprovider_wait = \"0s\"\n", "runs.provider_wait: must be a positive duration"},
		{"[runs]\nprovider_wait = \"31m\"\n", "runs.provider_wait: 31m0s is longer than 30m (the longest wait)"},
		{"[runs]\ngrace = \"3h\"\nrunner_retention = \"2h\"\n", "runs.runner_retention: 2h0m0s must be longer than runs.grace (3h0m0s)"},
		{"[leader]\nttl = \"5s\"\nrenew = \"10s\"\n", "leader.renew: 10s must be shorter than leader.ttl"},
		{"[log]\nlevel = \"loud\"\n", `log.level: "loud"`},
		{"[budgets]\ntimezone = \"Mars/Olympus\"\n", `budgets.timezone: "Mars/Olympus" is not a time zone`},
		{"[notify]\nescalate_after = \"30s\"\n", "notify.escalate_after: 30s is outside 1m … 720h"},
		{"[notify]\nescalate_after = \"721h\"\n", "notify.escalate_after: 721h0m0s is outside 1m … 720h"},
		{"[notify]\nescalate_after = \"soon\"\n", "notify.escalate_after"},
		{"[storage\n", "line 2: expected"},
		{"[runner]\nserver = \"127.0.0.1:8080\"\n", `runner.server: "127.0.0.1:8080" is not an http(s) URL`},
		{"[runner]\nsessions = 65\n", "runner.sessions: 65 is outside 1 … 64"},
		{"[runner]\nsandbox = \"docker\"\n", `runner.sandbox: "docker" is not bwrap or none`},
		{"[runner]\npass_env = [\"A-B\"]\n", `runner.pass_env: "A-B" is not an environment variable name`},
		{"[runner]\npass_env = [\"CLAUDECODE_X\"]\n", `runner.pass_env: "CLAUDECODE_X": claude-code's own markers`},
		{"[runner]\nlabels = {Zone = \"eu\"}\n", `runner.labels: "Zone" is not a label name`},
		{"[runner]\ncheckpoint = \"0s\"\n", "runner.checkpoint: must be a positive duration"},
		{"[runner]\ndrain = \"-1s\"\n", "runner.drain: must be a positive duration"},
		{"[runner]\nwatchdog = \"0s\"\n", "runner.watchdog: must be a positive duration"},
		{"[runner]\nheartbeat = \"-1s\"\n", "runner.heartbeat: must be a positive duration"},
		{"[runner]\nworkdir = \"\"\n", "runner.workdir: must not be empty"},
		{"[runner]\ntoken = \"a b\"\n", "runner.token: holds spaces"},
		{"[runner]\nhide = [\"/\"]\n", `runner.hide: "/": name a file or folder other than /`},
		{"[runner]\nsesions = 2\n", "unknown key runner.sesions"},
		{"[adapters.claude-code]\ncommand = \"\"\n", "adapters.claude-code.command: must not be empty"},
		{"[adapters.opencode]\nprovider = \"google\"\n", `adapters.opencode.provider: "google" is not anthropic or openai`},
		{"[adapters.opencode]\nbase_url = \"localhost\"\n", `adapters.opencode.base_url: "localhost" is not an http(s) URL`},
		{"[adapters.opencode.prices]\ninput = -1.0\n", "adapters.opencode.prices.input: -1 is outside 0 … 10000"},
		{"[adapters.cursor]\ncommand = \"x\"\n", "unknown key adapters.cursor"},
		{"[knowledge]\nurl = \"127.0.0.1:8090\"\n", `knowledge.url: "127.0.0.1:8090" is not an http(s) URL`},
		{"[knowledge]\nwait = \"0s\"\n", "knowledge.wait: must be a positive duration"},
		{"[knowledge]\nservice_token = \"short\"\n", "knowledge.service_token: must be at least 32 characters"},
		{"[knowledge]\nservice_token = \"0123456789 0123456789 0123456789 x\"\n", "knowledge.service_token: holds spaces"},
		{"[auth]\nbootstrap_token = \"same-0123456789-0123456789-0123456789\"\n[knowledge]\nservice_token = \"same-0123456789-0123456789-0123456789\"\n",
			"knowledge.service_token: must differ from auth.bootstrap_token"},
	}
	for _, c := range cases {
		_, err := Parse(c.toml, "test.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.toml, err, c.want)
		}
	}
}

// TestTimeZone: a zone resolves from the embedded tzdata, so a machine
// without system time zones accepts it too.
func TestTimeZone(t *testing.T) {
	c, err := Parse("[budgets]\ntimezone = \"America/New_York\"\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	loc, err := c.Budgets.Location()
	if err != nil || loc.String() != "America/New_York" {
		t.Fatalf("Location() = %v, %v", loc, err)
	}
}

func TestGoodAddrs(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:65535", ":8080", "localhost:8080", "[::1]:8080", "core-1.example.com:443"} {
		if _, err := Parse("[http]\naddr = \""+addr+"\"\n", "t"); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

func TestRqliteURLs(t *testing.T) {
	c, err := Parse("[storage]\nengine = \"rqlite\"\nurl = \"http://127.0.0.1:4001, http://127.0.0.1:4011/\"\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Storage.URLs(); len(u) != 2 || u[1] != "http://127.0.0.1:4011" {
		t.Fatalf("urls %v", u)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("[storage]\npath = \"x.db\"\n")
	f.Add("[jobs]\nlease = \"5m\"\nconcurrency = 2\n")
	f.Add("[leader]\nttl = \"1s\"\nrenew = \"2s\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse(text, "fuzz")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("accepted an invalid config: %v", verr)
		}
	})
}

// `ballet config` prints no secret: the bootstrap token, the rqlite
// password and the runner token are masked.
func TestWriteMasksSecrets(t *testing.T) {
	c := Default()
	c.Auth.BootstrapToken = "bootstrap-secret-0123456789"
	c.Storage.Password = "rqlite-secret"
	c.Runner.Token = "ballet_runner_secret"
	c.Knowledge.ServiceToken = "knowledge-secret-0123456789-0123456789"
	c.Auth.OIDCClientSecret = "oidc-client-secret"
	var b strings.Builder
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"bootstrap-secret", "rqlite-secret", "ballet_runner_secret", "knowledge-secret", "oidc-client-secret"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("ballet config prints %q", secret)
		}
	}
	if strings.Count(b.String(), `"********"`) != 5 {
		t.Errorf("not every secret is masked:\n%s", b.String())
	}
}

func TestBootstrapTokenPath(t *testing.T) {
	c := Default()
	if got := c.BootstrapTokenPath(); got != "data/bootstrap-token" {
		t.Errorf("%q", got)
	}
	c.Auth.BootstrapTokenFile = "/etc/ballet/token"
	if got := c.BootstrapTokenPath(); got != "/etc/ballet/token" {
		t.Errorf("%q", got)
	}
}

// TestKnowledgeTokenFromEnvironment: BALLET_KNOWLEDGE_TOKEN overrides the
// key and is checked like it.
func TestKnowledgeTokenFromEnvironment(t *testing.T) {
	c := Default()
	c.Knowledge.ServiceToken = "from-the-file-0123456789-0123456789"
	c.Auth.BootstrapToken = "bootstrap-0123456789-0123456789-0123"
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == KnowledgeEnvToken && v != "" }
	}
	if got, err := c.KnowledgeToken(env("")); err != nil || got != c.Knowledge.ServiceToken {
		t.Errorf("without the variable: %q, %v", got, err)
	}
	if got, err := c.KnowledgeToken(env("from-the-environment-0123456789-012")); err != nil || got != "from-the-environment-0123456789-012" {
		t.Errorf("with the variable: %q, %v", got, err)
	}
	for v, want := range map[string]string{"short": "BALLET_KNOWLEDGE_TOKEN: must be at least 32", c.Auth.BootstrapToken: "must differ from auth.bootstrap_token"} {
		if _, err := c.KnowledgeToken(env(v)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", v, err, want)
		}
	}
}

// TestKnowledgeConfig: the Knowledge service's own defaults, its keys
// validated naming the key, and BALLET_KNOWLEDGE_TOKEN over the file.
func TestKnowledgeConfig(t *testing.T) {
	t.Setenv(KnowledgeEnvToken, "")
	c, err := LoadKnowledge("")
	if err != nil || c.Storage.Path != "data/knowledge.db" || c.HTTP.Addr != "127.0.0.1:8090" ||
		c.Knowledge.Core != "http://127.0.0.1:8080" || c.Knowledge.AuthCache.Duration != 30*time.Second {
		t.Fatalf("defaults: %+v %v", c.Knowledge, err)
	}
	for text, key := range map[string]string{
		"[knowledge]\ncore = \"ftp://x\"":        "knowledge.core",
		"[knowledge]\nservice_token = \"short\"": "knowledge.service_token",
		"[knowledge]\nauth_cache = \"0s\"":       "knowledge.auth_cache",
		"[knowledge]\nauth_cache = \"11m\"":      "knowledge.auth_cache",
		"[knowledge]\nnope = 1":                  "knowledge.nope",
	} {
		if _, err := Parse(text, "k.toml"); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", text, err, key)
		}
	}
	path := filepath.Join(t.TempDir(), "k.toml")
	os.WriteFile(path, []byte("[knowledge]\nservice_token = \"from-the-file-0123456789abcdef0123\"\n[http]\naddr = \"127.0.0.1:9999\"\n"), 0o600)
	t.Setenv(KnowledgeEnvToken, "from-the-environment-0123456789abcdef")
	c, err = LoadKnowledge(path)
	if err != nil || c.Knowledge.ServiceToken != "from-the-environment-0123456789abcdef" || c.HTTP.Addr != "127.0.0.1:9999" || c.Storage.Path != "data/knowledge.db" {
		t.Fatalf("file and environment: %+v %v", c, err)
	}
}

// The old [runs] runner_retention still works: it is what the runners'
// retention is when a file sets it, and `ballet config` prints the
// retention under its new name only while the old one is unset.
func TestRunnerRetentionOldName(t *testing.T) {
	def := Default()
	if def.RunnerRetention() != 24*time.Hour || def.Retention.Interval.Duration != time.Hour ||
		def.Retention.RunLogs.Duration != 30*24*time.Hour || def.Retention.Jobs.Duration != 7*24*time.Hour {
		t.Fatalf("retention defaults: %+v", def.Retention)
	}
	old, err := Parse("[runs]\nrunner_retention = \"48h\"\n", "old.toml")
	if err != nil || old.RunnerRetention() != 48*time.Hour {
		t.Fatalf("the old key: %v, %v", old.RunnerRetention(), err)
	}
	cur, err := Parse("[retention]\nrunners = \"72h\"\n", "new.toml")
	if err != nil || cur.RunnerRetention() != 72*time.Hour {
		t.Fatalf("the new key: %v, %v", cur.RunnerRetention(), err)
	}
	var out strings.Builder
	if err := Write(&out, def); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "runner_retention") || !strings.Contains(out.String(), "runners = \"24h0m0s\"") {
		t.Fatalf("`ballet config` prints:\n%s", out.String())
	}
}
