package agent

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// The samples in testdata are real output of the pinned CLIs, recorded
// by the runner's tests (RUNNER_SAMPLES, see internal/runner).

// read feeds a sample to out line by line (with a reader that takes lines
// of any length) and returns the events.
func read(t testing.TB, out Output, sample string) []Event {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", sample))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var evs []Event
	for {
		line, err := r.ReadBytes('\n')
		if l := strings.TrimSuffix(string(line), "\n"); l != "" {
			evs = append(evs, out.Line([]byte(l), false))
		}
		if err != nil {
			return evs
		}
	}
}

func TestClaudeOutput(t *testing.T) {
	for _, c := range []struct {
		sample string
		want   Result
		final  int    // the index of the Final event, -1 for none
		abort  string // an Abort event holds this
	}{
		{"claude-done.ndjson", Result{Final: true, Report: &Report{"done", "Wrote the file."},
			Usage: runproto.Usage{InputTokens: 8215, OutputTokens: 56, CacheWriteTokens: 7029, CacheReadTokens: 14058, CostUSD: 0.05606115}}, 0, ""},
		{"claude-no-report.ndjson", Result{Final: true,
			Usage: runproto.Usage{InputTokens: 5343, OutputTokens: 50, CacheWriteTokens: 7029, CacheReadTokens: 7029, CostUSD: 0.04524645}}, 0, ""},
		{"claude-ask.ndjson", Result{Final: true,
			Usage: runproto.Usage{InputTokens: 5288, OutputTokens: 22, CacheWriteTokens: 7029, CacheReadTokens: 7029, CostUSD: 0.044661450000000005}}, 0, ""},
		{"claude-answered.ndjson", Result{Final: true, Report: &Report{"done", "Done as answered: teal"},
			Usage: runproto.Usage{InputTokens: 5318, OutputTokens: 16, CacheWriteTokens: 7029, CacheReadTokens: 7029, CostUSD: 0.044661450000000005}}, 0, ""},
		// An overload (529) is the provider's limit, not the agent's
		// failure.
		{"claude-api-error.ndjson", Result{Final: true, Limit: &Limit{Kind: LimitOverloaded, Status: 529},
			Error: "claude-code: API Error: 529 fake model: scripted overloaded_error"}, 0, ""},
		// Stopped mid-work, no result line: the answers' input and cache
		// tokens, no output; priced at claude-sonnet-4-5's list prices
		// (the model of the init line): 2589 × $3 + 7029 × $3.75 per
		// million.
		{"claude-cancelled.ndjson", Result{Usage: runproto.Usage{InputTokens: 2589, CacheWriteTokens: 7029, CostUSD: 0.03412575}}, -1, ""},
		// Killed in its fourth answer's command after three answers (one
		// tool call each): their input and cache tokens at list prices.
		{"claude-killed.ndjson", Result{Usage: runproto.Usage{InputTokens: 2619 + 2723 + 2827, CacheWriteTokens: 7029, CacheReadTokens: 2 * 7029,
			CostUSD: 0.05508315}}, -1, ""},
		{"claude-hang.ndjson", Result{}, -1, ""},
		{"claude-mcp-failed.ndjson", Result{Usage: runproto.Usage{InputTokens: 2589, CacheWriteTokens: 7029, CostUSD: 0.03412575}}, -1, "could not connect to Core's MCP endpoint (ballet: failed)"},
	} {
		t.Run(c.sample, func(t *testing.T) {
			out := Claude{}.Output("")
			evs := read(t, out, c.sample)
			got := out.Result()
			if !strings.HasPrefix(got.Error, c.want.Error) || (got.Error == "") != (c.want.Error == "") {
				t.Errorf("error %q, want it to start with %q", got.Error, c.want.Error)
			}
			if c.want.Error != "" && !strings.Contains(got.Error, "(terminal_reason api_error)") {
				t.Errorf("error %q does not name the terminal reason", got.Error)
			}
			got.Error, c.want.Error = "", ""
			if got.SessionID == "" {
				t.Error("no session id")
			}
			got.SessionID = ""
			// The model that served: the one the fake model named in its
			// answers (or, before any answer, the one the init line named).
			if got.Model != "claude-sonnet-4-5" {
				t.Errorf("model %q, want claude-sonnet-4-5", got.Model)
			}
			got.Model = ""
			if !sameUsage(got.Usage, c.want.Usage) {
				t.Errorf("usage %+v, want %+v", got.Usage, c.want.Usage)
			}
			got.Usage, c.want.Usage = runproto.Usage{}, runproto.Usage{}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("result %+v (report %+v), want %+v (report %+v)", got, got.Report, c.want, c.want.Report)
			}
			final, abort := -1, ""
			for i, e := range evs {
				if e.Final {
					final = len(evs) - 1 - i // counted from the end: the result is the last line
				}
				abort += e.Abort
			}
			if final != c.final || !strings.Contains(abort, c.abort) || (abort == "") != (c.abort == "") {
				t.Errorf("final event %d from the end, abort %q; want %d, %q", final, abort, c.final, c.abort)
			}
		})
	}
}

func TestOpenCodeOutput(t *testing.T) {
	for _, c := range []struct {
		sample string
		want   Result
	}{
		{"opencode-done.ndjson", Result{Report: &Report{"done", "Wrote the file."},
			Usage: runproto.Usage{InputTokens: 3783, OutputTokens: 56, CacheReadTokens: 4712, CostUSD: 0.0136026}}},
		{"opencode-no-report.ndjson", Result{Usage: runproto.Usage{InputTokens: 3217, OutputTokens: 50, CacheReadTokens: 2356, CostUSD: 0.0111078}}},
		{"opencode-ask.ndjson", Result{Usage: runproto.Usage{InputTokens: 3199, OutputTokens: 22, CacheReadTokens: 2356, CostUSD: 0.010633799999999999}}},
		{"opencode-answered.ndjson", Result{Report: &Report{"done", "Done as answered: teal"},
			Usage: runproto.Usage{InputTokens: 3229, OutputTokens: 16, CacheReadTokens: 2356, CostUSD: 0.010633799999999999}}},
		{"opencode-api-error.ndjson", Result{Error: "opencode: APIError: fake model: scripted overloaded_error",
			Limit: &Limit{Kind: LimitOverloaded, Status: 529, After: 10 * time.Millisecond}}},
		{"opencode-cancelled.ndjson", Result{}},
		// Killed in its third step: the two steps that finished, at the
		// cost opencode told.
		{"opencode-killed.ndjson", Result{Usage: runproto.Usage{InputTokens: 2766 + 483, OutputTokens: 17 + 17, CacheReadTokens: 2356, CostUSD: 0.0109638}}},
	} {
		t.Run(c.sample, func(t *testing.T) {
			out := OpenCode{}.Output("")
			for _, e := range read(t, out, c.sample) {
				if e.Final || e.Abort != "" {
					t.Errorf("event %+v: opencode has no final line", e)
				}
			}
			got := out.Result()
			if got.SessionID == "" {
				t.Error("no session id")
			}
			got.SessionID = ""
			got.Model = "" // the one opencode was told to use (its output names none)
			if !sameUsage(got.Usage, c.want.Usage) {
				t.Errorf("usage %+v, want %+v", got.Usage, c.want.Usage)
			}
			got.Usage, c.want.Usage = runproto.Usage{}, runproto.Usage{}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("result %+v (report %+v), want %+v (report %+v)", got, got.Report, c.want, c.want.Report)
			}
		})
	}
}

func sameUsage(a, b runproto.Usage) bool {
	d := a.CostUSD - b.CostUSD
	a.CostUSD, b.CostUSD = 0, 0
	return a == b && d < 1e-12 && d > -1e-12
}

// Lines that are no JSON, cut, or of unknown types change nothing; a
// submit_report the CLI refused (an error result) is no report.
func TestOutputSkipsWhatItDoesNotKnow(t *testing.T) {
	for _, out := range []Output{Claude{}.Output(""), OpenCode{}.Output("")} {
		for _, l := range []string{"not json", `{"type":"result","is_error":true,"result":"cut`, `{"type":"brand_new","x":1}`, `[1,2]`, ``} {
			if e := out.Line([]byte(l), l == `{"type":"result","is_error":true,"result":"cut`); e != (Event{}) {
				t.Errorf("%q: %+v", l, e)
			}
		}
		if r := out.Result(); !reflect.DeepEqual(r, Result{}) {
			t.Errorf("%T: %+v", out, r)
		}
	}
	out := Claude{}.Output("")
	out.Line([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"mcp__ballet__submit_report","input":{"outcome":"done","summary":"s"}}]}}`), false)
	out.Line([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"refused"}]}}`), false)
	if r := out.Result(); r.Report != nil {
		t.Errorf("a refused report counts: %+v", r.Report)
	}
	oc := OpenCode{}.Output("")
	oc.Line([]byte(`{"type":"tool_use","part":{"tool":"ballet_submit_report","state":{"status":"error","input":{"outcome":"done","summary":"s"}}}}`), false)
	if r := oc.Result(); r.Report != nil {
		t.Errorf("a failed report counts: %+v", r.Report)
	}
}

// spec is a session of ticket ACME-1 with two skills allowed.
func spec(t *testing.T) Spec {
	return Spec{
		Session: runproto.Session{
			Ticket: runproto.SessionTicket{Key: "ACME-1", Type: "task", Title: "Add a health endpoint", Description: "Add GET /health.",
				AcceptanceCriteria: "GET /health answers 200"},
			Stage: runproto.SessionStage{ID: "implement", Name: "Implement", Instructions: "Implement it.", Adapter: runproto.ClaudeCode,
				Model: "claude-sonnet-4-5", Iteration: 2, MaxIterations: 3},
			Skills: []runproto.SessionSkill{{Name: "house-style", Description: "How code\nis written", Content: "---\nname: old\n---\nTabs."},
				{Name: "testing", Description: "Tests", Content: "Table tests."}},
			PreviousReport:    &runproto.SessionReport{Stage: "review", Outcome: "failed", Report: "The handler lacks a test."},
			AnsweredQuestions: []runproto.SessionAnswer{{Question: "Which port?", Answer: "8080"}},
			Repository:        &runproto.SessionRepo{Forge: "git", URL: "/srv/acme.git", DefaultBranch: "main", Branch: "ballet/ACME-1"},
			MCP:               runproto.SessionMCP{URL: "http://127.0.0.1:8080/api/v1/mcp"},
		},
		RunToken: "ballet_run_secret", Workspace: t.TempDir(), Home: t.TempDir(),
		Environ: []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "ANTHROPIC_API_KEY=sk-1", "ANTHROPIC_BASE_URL=http://model:9/",
			"OPENAI_API_KEY=sk-2", "OPENAI_BASE_URL=http://oai:9/v1", "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "SSH_AUTH_SOCK=/run/agent",
			"AWS_SECRET_ACCESS_KEY=aws", "HTTPS_PROXY=http://proxy:3128", "BALLET_RUNNER_TOKEN=ballet_runner_x"},
		PassEnv: []string{"HTTPS_PROXY", "CLAUDECODE"},
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			m["DUPLICATE "+k] = v
		}
		m[k] = v
	}
	return m
}

// claude-code's retries of a refused request are capped unless pass_env
// passes the runner's own CLAUDE_CODE_MAX_RETRIES; with a meter, the CLI
// reaches the model API (ANTHROPIC_BASE_URL, else Anthropic's) through it.
func TestClaudeRetriesAndMeter(t *testing.T) {
	s := spec(t)
	s.Environ = append(s.Environ, "CLAUDE_CODE_MAX_RETRIES=7")
	s.PassEnv = append(s.PassEnv, "CLAUDE_CODE_MAX_RETRIES")
	var upstreams []string
	s.Meter = func(upstream string) (string, error) {
		upstreams = append(upstreams, upstream)
		return "http://127.0.0.1:1234", nil
	}
	cmd, err := Claude{}.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(cmd.Env)
	if env["CLAUDE_CODE_MAX_RETRIES"] != "7" || env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:1234" || !slices.Equal(upstreams, []string{"http://model:9"}) {
		t.Errorf("max retries %q, base URL %q, meter's upstreams %q", env["CLAUDE_CODE_MAX_RETRIES"], env["ANTHROPIC_BASE_URL"], upstreams)
	}
	s = spec(t)
	s.Environ = []string{"PATH=/bin", "ANTHROPIC_API_KEY=k"}
	upstreams = nil
	s.Meter = func(upstream string) (string, error) {
		upstreams = append(upstreams, upstream)
		return "http://127.0.0.1:1", nil
	}
	if _, err := (Claude{}).Prepare(s); err != nil || !slices.Equal(upstreams, []string{"https://api.anthropic.com"}) {
		t.Errorf("err %v, meter's upstreams %q", err, upstreams)
	}
}

// The claude-code command and environment are docs/agents.md's: the
// per-run home and config folder, the model credentials and pass_env, no
// other variable of the runner (CLAUDECODE* even when pass_env names it);
// Ballet's MCP server with the run token in a file of the home; only the
// editing, shell and skill tools; the stage's skills as folders.
func TestClaudePrepare(t *testing.T) {
	s := spec(t)
	cmd, err := Claude{Command: "/opt/claude"}.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(cmd.Env)
	want := map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": s.Home, "TMPDIR": filepath.Join(s.Home, "tmp"), "LANG": "C.UTF-8",
		"ANTHROPIC_API_KEY": "sk-1", "ANTHROPIC_BASE_URL": "http://model:9/", "HTTPS_PROXY": "http://proxy:3128",
		"CLAUDE_CONFIG_DIR": filepath.Join(s.Home, ".claude"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_MAX_RETRIES": "2",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("environment\n%v\nwant\n%v", env, want)
	}
	if cmd.Path != "/opt/claude" || cmd.SessionID == "" {
		t.Errorf("path %q, session id %q", cmd.Path, cmd.SessionID)
	}
	args := strings.Join(cmd.Args[2:], " ")
	wantArgs := "--output-format stream-json --verbose --include-partial-messages --model claude-sonnet-4-5 --session-id " + cmd.SessionID +
		" --no-session-persistence --mcp-config " + filepath.Join(s.Home, "mcp.json") + " --strict-mcp-config --permission-mode acceptEdits" +
		" --tools Bash,Edit,Write,Read,Glob,Grep,Skill --allowedTools mcp__ballet,Bash,Edit,Write,Read,Glob,Grep,Skill"
	if cmd.Args[0] != "-p" || args != wantArgs {
		t.Errorf("args %q\nwant -p PROMPT %s", cmd.Args, wantArgs)
	}
	if p, _ := Prompt(s); cmd.Args[1] != p {
		t.Errorf("the prompt argument is not the prompt")
	}
	if strings.Contains(strings.Join(cmd.Args, " "), s.RunToken) {
		t.Error("the run token is on the command line")
	}
	var mcpConfig map[string]map[string]map[string]any
	b, err := os.ReadFile(filepath.Join(s.Home, "mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &mcpConfig); err != nil {
		t.Fatal(err)
	}
	ballet := mcpConfig["mcpServers"]["ballet"]
	if ballet["type"] != "http" || ballet["url"] != s.Session.MCP.URL ||
		ballet["headers"].(map[string]any)["Authorization"] != "Bearer ballet_run_secret" || len(mcpConfig["mcpServers"]) != 1 {
		t.Errorf("mcp.json: %s", b)
	}
	if fi, _ := os.Stat(filepath.Join(s.Home, "mcp.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mcp.json is %v", fi.Mode())
	}
	wantSkills(t, filepath.Join(s.Home, ".claude", "skills"))

	// No model anywhere: the CLI's default; the adapter's default model
	// when the stage names none.
	s.Session.Stage.Model = ""
	cmd, _ = Claude{}.Prepare(s)
	if slices.Contains(cmd.Args, "--model") || cmd.Path != "claude" {
		t.Errorf("args %q, path %q", cmd.Args, cmd.Path)
	}
	cmd, _ = Claude{Model: "claude-opus-4-1"}.Prepare(s)
	if i := slices.Index(cmd.Args, "--model"); i < 0 || cmd.Args[i+1] != "claude-opus-4-1" {
		t.Errorf("args %q", cmd.Args)
	}
}

// wantSkills checks the skills folder: exactly the stage's skills, each
// a SKILL.md with front matter and the content without its own.
func wantSkills(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"house-style", "testing"}) {
		t.Errorf("skills %q", names)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "house-style", "SKILL.md"))
	if want := "---\nname: house-style\ndescription: \"How code is written\"\n---\nTabs."; string(b) != want {
		t.Errorf("SKILL.md %q, want %q", b, want)
	}
}

// The opencode command and environment: its configuration inline (the
// model, the provider with its URL and key and the prices, Ballet's MCP
// server with the run token, permissions, no snapshots), the XDG folders
// in the per-run home, the OPENCODE_DISABLE_* switches, the skills in its
// skill folder.
func TestOpenCodePrepare(t *testing.T) {
	s := spec(t)
	o := OpenCode{Command: "/opt/opencode", Provider: ProviderOpenAI, Prices: Prices{3, 15, 0.3, 3.75}}
	cmd, err := o.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"run", "--format", "json", "--model", "ballet-openai/claude-sonnet-4-5", "--title", "ACME-1 implement"}; !slices.Equal(cmd.Args[:7], want) || len(cmd.Args) != 8 {
		t.Errorf("args %q", cmd.Args)
	}
	env := envMap(cmd.Env)
	var config map[string]any
	if err := json.Unmarshal([]byte(env["OPENCODE_CONFIG_CONTENT"]), &config); err != nil {
		t.Fatal(err)
	}
	delete(env, "OPENCODE_CONFIG_CONTENT")
	want := map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": s.Home, "TMPDIR": filepath.Join(s.Home, "tmp"), "LANG": "C.UTF-8",
		"ANTHROPIC_API_KEY": "sk-1", "ANTHROPIC_BASE_URL": "http://model:9/", "OPENAI_API_KEY": "sk-2", "OPENAI_BASE_URL": "http://oai:9/v1",
		"HTTPS_PROXY":     "http://proxy:3128",
		"XDG_CONFIG_HOME": filepath.Join(s.Home, ".config"), "XDG_DATA_HOME": filepath.Join(s.Home, ".local", "share"),
		"XDG_CACHE_HOME": filepath.Join(s.Home, ".cache"), "XDG_STATE_HOME": filepath.Join(s.Home, ".local", "state"),
		"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
		"OPENCODE_DISABLE_PROJECT_CONFIG": "1",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("environment\n%v\nwant\n%v", env, want)
	}
	b, _ := json.Marshal(config)
	for _, part := range []string{
		`"model":"ballet-openai/claude-sonnet-4-5"`, `"small_model":"ballet-openai/claude-sonnet-4-5"`,
		`"mcp":{"ballet":{"enabled":true,"headers":{"Authorization":"Bearer ballet_run_secret"},"type":"remote","url":"http://127.0.0.1:8080/api/v1/mcp"}}`,
		`"permission":{"bash":"allow","edit":"allow","external_directory":"deny","webfetch":"deny"}`,
		`"snapshot":false`, `"autoupdate":false`, `"share":"disabled"`,
		`"options":{"apiKey":"sk-2","baseURL":"http://oai:9/v1"}`, `"npm":"@ai-sdk/openai-compatible"`,
		`"cost":{"cache_read":0.3,"cache_write":3.75,"input":3,"output":15}`,
	} {
		if !strings.Contains(string(b), part) {
			t.Errorf("the configuration lacks %s:\n%s", part, b)
		}
	}
	wantSkills(t, filepath.Join(s.Home, ".config", "opencode", "skill"))

	// The built-in anthropic provider: the base URL from the environment
	// with /v1, no model list unless prices are set; a model naming its
	// provider is taken as it is.
	cmd, err = OpenCode{}.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	c := envMap(cmd.Env)["OPENCODE_CONFIG_CONTENT"]
	if !strings.Contains(c, `"provider":{"anthropic":{"options":{"apiKey":"sk-1","baseURL":"http://model:9/v1"}}}`) ||
		!strings.Contains(c, `"model":"anthropic/claude-sonnet-4-5"`) {
		t.Errorf("configuration %s", c)
	}
	// With prices set, the built-in anthropic provider gets the model
	// with them: opencode then tells the session's cost at those prices.
	cmd, err = OpenCode{Prices: Prices{3, 15, 0.3, 3.75}}.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	if c := envMap(cmd.Env)["OPENCODE_CONFIG_CONTENT"]; !strings.Contains(c, `"models":{"claude-sonnet-4-5":{"cost":{"cache_read":0.3,"cache_write":3.75,"input":3,"output":15}`) {
		t.Errorf("the anthropic provider lacks the model with its prices: %s", c)
	}
	s.Session.Stage.Model = "openrouter/some-model"
	cmd, _ = OpenCode{}.Prepare(s)
	if c := envMap(cmd.Env)["OPENCODE_CONFIG_CONTENT"]; !strings.Contains(c, `"model":"openrouter/some-model"`) || strings.Contains(c, `"provider"`) {
		t.Errorf("configuration %s", c)
	}
	s.Session.Stage.Model = ""
	if _, err := (OpenCode{}).Prepare(s); err == nil || !strings.Contains(err.Error(), "[adapters.opencode] model") {
		t.Errorf("no model: %v", err)
	}
}

// A stage with skills [a] gets a only; a skill name that is no folder
// name is refused.
func TestSkillsAreTheStagesOnly(t *testing.T) {
	s := spec(t)
	s.Session.Skills = s.Session.Skills[1:]
	if _, err := (Claude{}).Prepare(s); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Home, ".claude", "skills"))
	if len(entries) != 1 || entries[0].Name() != "testing" {
		t.Errorf("skills %v", entries)
	}
	s = spec(t)
	s.Session.Skills = []runproto.SessionSkill{{Name: "../escape", Content: "x"}}
	if _, err := (Claude{}).Prepare(s); err == nil || !strings.Contains(err.Error(), "skill name") {
		t.Errorf("a bad skill name: %v", err)
	}
}

// Bad specs are refused before anything is written.
func TestPrepareRefuses(t *testing.T) {
	for name, change := range map[string]func(*Spec){
		"no token":     func(s *Spec) { s.RunToken = "" },
		"token spaces": func(s *Spec) { s.RunToken = "a b" },
		"no home":      func(s *Spec) { s.Home = "" },
		"mcp url":      func(s *Spec) { s.Session.MCP.URL = "file:///etc/passwd" },
	} {
		s := spec(t)
		change(&s)
		if _, err := (Claude{}).Prepare(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The prompt holds the ticket, the acceptance criteria, the stage's
// instructions, the previous report, the answered questions and how to
// report; a restored checkpoint is announced with what came of it.
func TestPrompt(t *testing.T) {
	s := spec(t)
	p, err := Prompt(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ticket ACME-1: Add a health endpoint", `stage "Implement", iteration 2 of at most 3`, "## The ticket (task)\n\nAdd GET /health.",
		"### Acceptance criteria\n\nGET /health answers 200", "## This stage's instructions\n\nImplement it.",
		"## The previous stage's report (review, outcome failed)\n\nThe handler lacks a test.",
		"## Answered questions\n\nQ: Which port?\nA: 8080", "branch ballet/ACME-1", "submit_report", "ask_question", "get_ticket",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "checkpoint") {
		t.Errorf("a prompt without a checkpoint mentions one:\n%s", p)
	}
	s.Checkpoint = &Checkpoint{Merged: true, Conflicts: []string{"a.go", "b.go"}}
	p, _ = Prompt(s)
	for _, want := range []string{"## You are continuing from a checkpoint", "merged onto the branch's new head",
		"conflict markers to resolve first: a.go, b.go."} {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, p)
		}
	}
	// Nothing optional: no empty sections.
	s = Spec{Session: runproto.Session{Ticket: runproto.SessionTicket{Key: "ACME-2", Title: "T"}, Stage: runproto.SessionStage{ID: "review"}}}
	p, _ = Prompt(s)
	for _, not := range []string{"previous stage", "Answered", "checkpoint", "iteration", "knowledge for this stage"} {
		if strings.Contains(p, not) {
			t.Errorf("the prompt mentions %q:\n%s", not, p)
		}
	}
	if !strings.Contains(p, `stage "review"`) {
		t.Errorf("the stage's id is not its name:\n%s", p)
	}
}

// The entries a stage names are in the prompt, each whole or marked as
// cut, after the previous stage's report.
func TestPromptCarriesKnowledge(t *testing.T) {
	s := Spec{Session: runproto.Session{Ticket: runproto.SessionTicket{Key: "ACME-2", Title: "T"}, Stage: runproto.SessionStage{ID: "review"},
		PreviousReport: &runproto.SessionReport{Stage: "implement", Outcome: "done", Report: "did it"},
		Knowledge: []runproto.SessionEntry{
			{Space: "default", Slug: "conventions/go", Title: "Go conventions", Version: 3, Body: "Wrap every error."},
			{Space: "ops", Slug: "deploy", Title: "Deploy", Version: 1, Body: "Deploy on", Cut: true},
		}}}
	p, err := Prompt(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "## The team's knowledge for this stage\n\n### Go conventions (default: conventions/go, version 3)\n\nWrap every error.\n\n" +
		"### Deploy (ops: deploy, version 1)\n\nDeploy on\n\n(cut here: read the whole entry with read_entry)\n"
	if !strings.Contains(p, want) || strings.Index(p, "previous stage's report") > strings.Index(p, "team's knowledge") {
		t.Errorf("the prompt's knowledge:\n%s", p)
	}
}

// A prompt too long for one argument goes into a file of the home, which
// the argument names.
func TestLongPromptGoesIntoAFile(t *testing.T) {
	s := spec(t)
	s.Session.Ticket.Description = strings.Repeat("x", 200<<10)
	cmd, err := Claude{}.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.Home, "ballet-task.md")
	if len(cmd.Args[1]) > maxArgPrompt || !strings.Contains(cmd.Args[1], file) {
		t.Errorf("the prompt argument (%d bytes): %.300s", len(cmd.Args[1]), cmd.Args[1])
	}
	b, err := os.ReadFile(file)
	if p, _ := Prompt(s); err != nil || string(b) != p {
		t.Errorf("the file does not hold the prompt: %v", err)
	}
}

// The docs show the prompt template as it is.
func TestPromptTemplateIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "runners.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "```text\n"+PromptTemplate+"```\n") {
		t.Error("docs/runners.md does not show PromptTemplate (in a ```text block) as it is in the code")
	}
}
