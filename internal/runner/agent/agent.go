// Package agent drives the agent CLIs, claude-code and opencode, exactly as
// docs/agents.md says: from a leased session it builds the command line,
// a clean environment (a per-run HOME and config folders; the model
// credentials each CLI reads, taken from the runner's own environment, plus
// [runner] pass_env; nothing else), the MCP configuration that points the
// CLI at Core's endpoint with the run token, only Ballet's tools plus the
// CLI's own editing and shell tools, the stage's model, the stage's skills
// laid out where the CLI looks for them, and the prompt (PromptTemplate).
// It reads the CLI's NDJSON output back (Output): usage and cost, the final
// line, the report the agent made, and the CLI's own account of a
// failure.
//
// The package starts nothing: the runner runs the Command (internal/runner/proc),
// in the sandbox (internal/runner/sandbox).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/procgroup"
	"github.com/ballet/ballet/internal/runproto"
)

// Spec is what one session is made of.
type Spec struct {
	Session  runproto.Session
	RunToken string // authenticates the session at Core's MCP endpoint
	// Workspace is the session's working folder; Home an empty folder of
	// the run that becomes its HOME (the adapter writes its configuration
	// there).
	Workspace, Home string
	// Checkpoint, when set, is the earlier session's work that was put
	// back: the prompt says so.
	Checkpoint *Checkpoint
	// Environ is the runner's environment (os.Environ()): the model
	// credentials and PATH are taken from it, nothing else.
	Environ []string
	// PassEnv names more variables of Environ to pass on ([runner] pass_env).
	PassEnv []string
	// Meter, when set, puts a meter in front of the model API at upstream
	// and returns the URL the CLI is to use instead (internal/runner/meter):
	// the adapters whose CLI tells its usage late use it for the model
	// APIs whose URL they configure.
	Meter func(upstream string) (string, error)
}

// anthropicAPI is the Anthropic API's URL, opencode's default for its
// anthropic provider; anthropicBase is claude-code's (its paths start
// with /v1).
const (
	anthropicAPI  = "https://api.anthropic.com/v1"
	anthropicBase = "https://api.anthropic.com"
)

// claudeMaxRetries is the CLAUDE_CODE_MAX_RETRIES a session gets unless
// pass_env passes the runner's own.
const claudeMaxRetries = "2"

// Checkpoint describes restored work, for the prompt.
type Checkpoint struct {
	Merged    bool     // merged onto a branch that moved since
	Conflicts []string // files with conflict markers
	Kept      string   // could not be put back: kept under this ref
}

// Command is the command of a session.
type Command struct {
	Path string
	Args []string
	Env  []string
	// SessionID is the CLI's own session id when the runner chooses it
	// (claude-code's --session-id), "" otherwise.
	SessionID string
	// Model is the model the CLI was told to use ("" for its own
	// default): the session's Output prices with it what the CLI did not.
	Model string
}

// maxArgPrompt bounds a prompt given on the command line (Linux refuses
// one argument of 128 KiB or more); a longer one goes into a file in the
// run's home, which the short prompt names.
const maxArgPrompt = 100 << 10

// Claude is the claude-code adapter.
type Claude struct {
	Command string // the executable; "claude" when empty
	Model   string // when the stage names none; "": the CLI's own default
}

// The built-in tools a claude-code session has: editing, shell and skills.
// Everything else it offers (web fetch and search, sub-agents…) is gone.
const claudeTools = "Bash,Edit,Write,Read,Glob,Grep,Skill"

// Name is the adapter's name.
func (Claude) Name() string { return runproto.ClaudeCode }

// Executable is the command to run.
func (c Claude) Executable() string { return or(c.Command, "claude") }

// Prepare writes the session's configuration into s.Home and returns its
// command.
func (c Claude) Prepare(s Spec) (Command, error) {
	if err := s.check(); err != nil {
		return Command{}, err
	}
	config := filepath.Join(s.Home, ".claude")
	if err := writeSkills(filepath.Join(config, "skills"), s.Session.Skills); err != nil {
		return Command{}, err
	}
	mcpConfig := filepath.Join(s.Home, "mcp.json")
	if err := writeJSON(mcpConfig, map[string]any{"mcpServers": map[string]any{"ballet": map[string]any{
		"type": "http", "url": s.Session.MCP.URL, "headers": map[string]string{"Authorization": "Bearer " + s.RunToken},
	}}}); err != nil {
		return Command{}, err
	}
	prompt, err := s.prompt()
	if err != nil {
		return Command{}, err
	}
	env, err := s.baseEnv([]string{"ANTHROPIC_"})
	if err != nil {
		return Command{}, err
	}
	env.set("CLAUDE_CONFIG_DIR", config)
	for _, k := range []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING"} {
		env.set(k, "1")
	}
	// claude-code retries a refused request itself, 10 times over minutes
	// by default: a provider's limit would hold the session that long
	// before Ballet heard of it. A few quick retries ride out a moment's
	// refusal; a lasting limit reaches the runner at once ([runner]
	// pass_env may name the variable to choose otherwise).
	env.setDefault("CLAUDE_CODE_MAX_RETRIES", claudeMaxRetries)
	if s.Meter != nil {
		// Through the session's meter, which keeps the headers of the
		// model API's refusals: claude-code prints no reset time.
		u, err := s.Meter(or(envURL(s.Environ, "ANTHROPIC_BASE_URL", ""), anthropicBase))
		if err != nil {
			return Command{}, fmt.Errorf("agent: the model API's meter: %w", err)
		}
		env.set("ANTHROPIC_BASE_URL", u)
	}
	id := uuid.NewString()
	// --include-partial-messages: the model's stream events, the only
	// lines that tell an answer's output tokens before the result line (a
	// session stopped earlier has none).
	args := []string{"-p", prompt, "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	model := or(s.Session.Stage.Model, c.Model)
	if model != "" {
		args = append(args, "--model", model)
	}
	args = append(args, "--session-id", id, "--no-session-persistence",
		"--mcp-config", mcpConfig, "--strict-mcp-config",
		"--permission-mode", "acceptEdits",
		"--tools", claudeTools, "--allowedTools", "mcp__ballet,"+claudeTools)
	return Command{Path: c.Executable(), Args: args, Env: env.list(), SessionID: id, Model: model}, nil
}

// Output reads the output of a claude-code session told to use model
// (Command.Model).
func (Claude) Output(model string) Output {
	return &claudeOutput{pending: map[string]Report{}, turns: map[string]runproto.Usage{}, model: model}
}

// OpenCode is the opencode adapter.
type OpenCode struct {
	Command string // the executable; "opencode" when empty
	// Model is used when the stage names none: a model of Provider, or
	// "provider/model".
	Model string
	// Provider is "anthropic" (opencode's own provider: ANTHROPIC_API_KEY,
	// ANTHROPIC_BASE_URL) or "openai" (an OpenAI-compatible API:
	// OPENAI_API_KEY, OPENAI_BASE_URL).
	Provider string
	// BaseURL overrides the API's URL taken from the environment.
	BaseURL string
	// Prices, when set, are the model's list prices (dollars per million
	// tokens) opencode computes the cost with; otherwise its own.
	Prices Prices
}

// The providers of the opencode adapter.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
)

// openAIProvider is the id of the OpenAI-compatible provider Ballet
// declares for opencode.
const openAIProvider = "ballet-openai"

// Name is the adapter's name.
func (OpenCode) Name() string { return runproto.OpenCode }

// Executable is the command to run.
func (o OpenCode) Executable() string { return or(o.Command, "opencode") }

// Prepare writes the session's skills into s.Home and returns its command;
// the configuration travels in OPENCODE_CONFIG_CONTENT.
func (o OpenCode) Prepare(s Spec) (Command, error) {
	if err := s.check(); err != nil {
		return Command{}, err
	}
	xdgConfig := filepath.Join(s.Home, ".config")
	if err := writeSkills(filepath.Join(xdgConfig, "opencode", "skill"), s.Session.Skills); err != nil {
		return Command{}, err
	}
	env, err := s.baseEnv([]string{"ANTHROPIC_", "OPENAI_"})
	if err != nil {
		return Command{}, err
	}
	model := or(s.Session.Stage.Model, o.Model)
	if model == "" {
		return Command{}, errors.New("agent: opencode needs a model: the stage names none and [adapters.opencode] model is empty")
	}
	provider, name, _ := strings.Cut(model, "/")
	if name == "" {
		provider, name = or(o.Provider, ProviderAnthropic), model
	}
	// metered is the URL opencode is to reach the model API at upstream
	// with: through the session's meter, since opencode tells a step's
	// tokens only after its tool calls ran (a session stopped in its first
	// command would otherwise count nothing the model served).
	metered := func(upstream string) (string, error) {
		if s.Meter == nil {
			return upstream, nil
		}
		u, err := s.Meter(upstream)
		if err != nil {
			return "", fmt.Errorf("agent: the model API's meter: %w", err)
		}
		return u, nil
	}
	var providers map[string]any
	switch provider {
	case ProviderAnthropic:
		opts := map[string]any{}
		u := or(o.BaseURL, envURL(s.Environ, "ANTHROPIC_BASE_URL", "/v1"))
		if s.Meter != nil && u == "" {
			u = anthropicAPI
		}
		if u != "" {
			if opts["baseURL"], err = metered(u); err != nil {
				return Command{}, err
			}
		}
		if k := lookup(s.Environ, "ANTHROPIC_API_KEY"); k != "" {
			opts["apiKey"] = k
		}
		p := map[string]any{"options": opts}
		if o.Prices.set() {
			p["models"] = o.models(name)
		}
		providers = map[string]any{ProviderAnthropic: p}
	case ProviderOpenAI, openAIProvider:
		provider = openAIProvider
		u := or(o.BaseURL, envURL(s.Environ, "OPENAI_BASE_URL", ""))
		if u == "" {
			return Command{}, errors.New("agent: opencode with the openai provider needs an API URL: [adapters.opencode] base_url or OPENAI_BASE_URL")
		}
		if u, err = metered(u); err != nil {
			return Command{}, err
		}
		opts := map[string]any{"baseURL": u}
		if k := lookup(s.Environ, "OPENAI_API_KEY"); k != "" {
			opts["apiKey"] = k
		}
		providers = map[string]any{openAIProvider: map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "OpenAI-compatible",
			"options": opts, "models": o.models(name)}}
	default:
		// Another of opencode's own providers, named in the stage's model:
		// its credentials come through [runner] pass_env.
	}
	full := provider + "/" + name
	config := map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"model":       full,
		"small_model": full,
		"mcp": map[string]any{"ballet": map[string]any{"type": "remote", "url": s.Session.MCP.URL, "enabled": true,
			"headers": map[string]string{"Authorization": "Bearer " + s.RunToken}}},
		"permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "deny"},
		"autoupdate": false,
		"share":      "disabled",
		"snapshot":   false, // its own undo history: the runner commits the workspace itself
	}
	if providers != nil {
		config["provider"] = providers
	}
	b, err := json.Marshal(config)
	if err != nil {
		return Command{}, fmt.Errorf("agent: %w", err)
	}
	env.set("XDG_CONFIG_HOME", xdgConfig)
	env.set("XDG_DATA_HOME", filepath.Join(s.Home, ".local", "share"))
	env.set("XDG_CACHE_HOME", filepath.Join(s.Home, ".cache"))
	env.set("XDG_STATE_HOME", filepath.Join(s.Home, ".local", "state"))
	env.set("OPENCODE_CONFIG_CONTENT", string(b))
	for _, k := range []string{"OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_LSP_DOWNLOAD",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_SHARE", "OPENCODE_DISABLE_CLAUDE_CODE", "OPENCODE_DISABLE_PROJECT_CONFIG"} {
		env.set(k, "1")
	}
	prompt, err := s.prompt()
	if err != nil {
		return Command{}, err
	}
	// --title: the session's title is given, so opencode asks the model
	// for none (one request less per session, and one its output would
	// not count).
	title := strings.TrimSpace(s.Session.Ticket.Key + " " + s.Session.Stage.ID)
	return Command{Path: o.Executable(), Args: []string{"run", "--format", "json", "--model", full, "--title", or(title, "Ballet"), prompt},
		Env: env.list(), Model: full}, nil
}

func (o OpenCode) models(name string) map[string]any {
	m := map[string]any{"name": name, "limit": map[string]int{"context": 200000, "output": 32000}}
	if o.Prices.set() {
		m["cost"] = map[string]float64{"input": o.Prices.Input, "output": o.Prices.Output,
			"cache_read": o.Prices.CacheRead, "cache_write": o.Prices.CacheWrite}
	}
	return map[string]any{name: m}
}

// Output reads the output of an opencode session told to use model
// (Command.Model).
func (o OpenCode) Output(model string) Output {
	return &opencodeOutput{model: model, prices: o.Prices}
}

// check refuses a spec the adapters cannot build a session from.
func (s Spec) check() error {
	switch {
	case s.Home == "" || s.Workspace == "":
		return errors.New("agent: the session has no home or workspace folder")
	case s.RunToken == "":
		return errors.New("agent: the session has no run token")
	case !strings.HasPrefix(s.Session.MCP.URL, "http://") && !strings.HasPrefix(s.Session.MCP.URL, "https://"):
		return fmt.Errorf("agent: the lease's mcp.url %q is not an http(s) URL", s.Session.MCP.URL)
	case strings.ContainsAny(s.RunToken, "\r\n\x00 "):
		return errors.New("agent: the run token holds spaces or control characters")
	}
	return nil
}

// prompt is the prompt for the command line: the whole prompt, or when it
// is too long for one argument, a short one that names the file in the
// home holding it.
func (s Spec) prompt() (string, error) {
	p, err := Prompt(s)
	if err != nil {
		return "", fmt.Errorf("agent: the prompt: %w", err)
	}
	if len(p) <= maxArgPrompt {
		return p, nil
	}
	file := filepath.Join(s.Home, "ballet-task.md")
	if err := os.WriteFile(file, []byte(p), 0o600); err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	return fmt.Sprintf("You are a coding agent working for Ballet on ticket %s. Your task is too long for this message: "+
		"it is in the file %s. Read that whole file first, then do what it says.", s.Session.Ticket.Key, file), nil
}

// baseEnv is what every session's environment holds: PATH, the per-run
// HOME and TMPDIR, LANG, the runner's variables that start with one of
// prefixes (the model credentials each CLI reads) and those of PassEnv.
func (s Spec) baseEnv(prefixes []string) (*envList, error) {
	tmp := filepath.Join(s.Home, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	e := &envList{}
	for _, kv := range s.Environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || forbidden(k) {
			continue
		}
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) || slices.Contains(s.PassEnv, k) {
			e.set(k, v)
		}
	}
	e.set("PATH", or(lookup(s.Environ, "PATH"), "/usr/local/bin:/usr/bin:/bin"))
	e.set("HOME", s.Home)
	e.set("TMPDIR", tmp)
	e.set("LANG", or(lookup(s.Environ, "LANG"), "C.UTF-8"))
	return e, nil
}

// forbidden: variables a session never inherits, whatever pass_env says —
// claude-code's own markers, which make a CLI believe it runs inside
// another.
func forbidden(k string) bool { return strings.HasPrefix(k, "CLAUDECODE") }

// envList is an environment with one value per name, in order of first
// setting.
type envList struct {
	keys []string
	vals map[string]string
}

func (e *envList) set(k, v string) {
	if e.vals == nil {
		e.vals = map[string]string{}
	}
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

// setDefault sets k unless it is set already.
func (e *envList) setDefault(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.set(k, v)
	}
}

func (e *envList) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

func lookup(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val // the last one counts, as for os/exec
		}
	}
	return v
}

// envURL is the URL in environment variable key, with suffix added when it
// does not end in it already ("" when unset).
func envURL(environ []string, key, suffix string) string {
	u := strings.TrimRight(lookup(environ, key), "/")
	if u == "" || suffix == "" || strings.HasSuffix(u, suffix) {
		return u
	}
	return u + suffix
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// skillNameRE is what a skill's name may be (a folder name): Core's rule.
var skillNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// writeSkills writes each skill as dir/<name>/SKILL.md, front matter first.
func writeSkills(dir string, skills []runproto.SessionSkill) error {
	for _, sk := range skills {
		if !skillNameRE.MatchString(sk.Name) {
			return fmt.Errorf("agent: the skill name %q is not [a-z0-9][a-z0-9_-]{0,63}", sk.Name)
		}
		if err := os.MkdirAll(filepath.Join(dir, sk.Name), 0o700); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, sk.Name, "SKILL.md"), []byte(skillFile(sk)), 0o600); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	return nil
}

// skillFile is a SKILL.md: front matter with the name and description (a
// JSON string is a YAML scalar), then the content without a front matter
// of its own.
func skillFile(sk runproto.SessionSkill) string {
	desc, _ := json.Marshal(strings.Join(strings.Fields(or(sk.Description, sk.Name)), " "))
	content := sk.Content
	if rest, ok := strings.CutPrefix(content, "---\n"); ok {
		if _, after, found := strings.Cut(rest, "\n---\n"); found {
			content = after
		}
	}
	return "---\nname: " + sk.Name + "\ndescription: " + string(desc) + "\n---\n" + content
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// Version runs `command --version` in a clean environment and returns the
// version it prints (its first word).
func Version(ctx context.Context, command string) (string, error) {
	path, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	home, err := os.MkdirTemp("", "ballet-version-")
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "XDG_DATA_HOME=" + home,
		"XDG_CACHE_HOME=" + home, "XDG_STATE_HOME=" + home, "TMPDIR=" + home}
	cmd.Dir = home
	cmd.WaitDelay = time.Second
	procgroup.Own(cmd, syscall.SIGKILL) // a CLI that hangs at --version is killed with what it started
	procgroup.KillOnCancel(cmd)
	out, err := cmd.Output() // stdin is /dev/null: an open one hangs opencode
	if err != nil {
		return "", fmt.Errorf("agent: %s --version: %w", command, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("agent: %s --version printed nothing", command)
	}
	v := f[0]
	if len(v) > 100 {
		v = v[:100]
	}
	return v, nil
}
