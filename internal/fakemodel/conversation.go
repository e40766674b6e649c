package fakemodel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Conversation is one model request, whichever API it came through: what
// a scenario decides its next turn from.
type Conversation struct {
	// Model is the model the client asked for.
	Model string
	// System is the system prompt's text.
	System string
	// Tools are the tools the request offers, in its order.
	Tools []Tool
	// Messages are the conversation so far, system messages left out.
	Messages []Message
	// Params are the scenario marker's parameters (key=value).
	Params map[string]string

	toolSearch string          // the name of claude-code's deferred-tool loader, "" when absent
	deferred   map[string]bool // tools the client announced in text but has not loaded yet
	referenced map[string]bool // deferred tools loaded by a tool search in the conversation
	text       string          // every text of the request, for finding announced names
	promptSize int             // bytes the prompt's token count starts from (see Usage)
	stream     bool            // the client asked for a streamed answer
	api        string          // the dialect's name: "anthropic" or "openai"
	limits     *limits         // the server's provider limits (the rate-limit scenario)
	now        time.Time       // when the request came
}

// Tool is a tool a request offers.
type Tool struct {
	Name string
	// Props are the names of its input's properties.
	Props map[string]bool
	// Deferred: listed, but not callable until a tool search loads it.
	Deferred bool
}

// Message is one message of the conversation.
type Message struct {
	Role    string // "user" or "assistant" ("tool" results are folded into user messages)
	Text    string
	Calls   []Call   // the tool calls of an assistant message
	Results []Result // the tool results of a user message
}

// Call is a tool call the model makes.
type Call struct {
	ID    string
	Tool  string
	Input json.RawMessage
}

// Result is a tool result the client sent back.
type Result struct {
	CallID  string
	Tool    string // the name of the call it answers, when the conversation has it
	Content string
	IsError bool
}

// markerRE finds a scenario marker: [[ballet-scenario:NAME key=value …]].
var markerRE = regexp.MustCompile(`\[\[ballet-scenario:([a-z0-9-]+)((?:\s+[A-Za-z0-9_-]+=[^\s\]]*)*)\s*\]\]`)

// marker returns the first scenario marker in the user messages: its name
// and parameters ("" when there is none).
func (c *Conversation) marker() (string, map[string]string) {
	for _, m := range c.Messages {
		if m.Role != "user" {
			continue
		}
		if sm := markerRE.FindStringSubmatch(m.Text); sm != nil {
			params := map[string]string{}
			for _, kv := range strings.Fields(sm[2]) {
				k, v, _ := strings.Cut(kv, "=")
				params[k] = v
			}
			return sm[1], params
		}
	}
	return "", map[string]string{}
}

// Prompt returns the text of the user messages that are not tool results,
// scenario markers removed: what the session was asked.
func (c *Conversation) Prompt() string {
	var b strings.Builder
	for _, m := range c.Messages {
		if m.Role == "user" && m.Text != "" {
			b.WriteString(markerRE.ReplaceAllString(m.Text, ""))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Step returns how many turns of the scenario the conversation holds: its
// assistant messages, not counting the ones that only loaded deferred tools.
func (c *Conversation) Step() int {
	n := 0
	for _, m := range c.Messages {
		if m.Role == "assistant" && !c.onlyToolSearch(m) {
			n++
		}
	}
	return n
}

func (c *Conversation) onlyToolSearch(m Message) bool {
	if c.toolSearch == "" || len(m.Calls) == 0 || strings.TrimSpace(m.Text) != "" {
		return false
	}
	for _, call := range m.Calls {
		if call.Tool != c.toolSearch {
			return false
		}
	}
	return true
}

// Results returns every tool result of the conversation, in order.
func (c *Conversation) Results() []Result {
	var out []Result
	for _, m := range c.Messages {
		out = append(out, m.Results...)
	}
	return out
}

// Param returns the marker's parameter key, or def when it is not set.
func (c *Conversation) Param(key, def string) string {
	if v, ok := c.Params[key]; ok && v != "" {
		return v
	}
	return def
}

// workdirRE finds the working directory both CLIs state in their prompts
// (claude-code: "Primary working directory: /…", opencode: "Working
// directory: /…").
var workdirRE = regexp.MustCompile(`(?i)working directory:\s*(/[^\s<]*)`)

// Workdir returns the session's working directory as the client states it,
// or "" when it does not.
func (c *Conversation) Workdir() string {
	if m := workdirRE.FindStringSubmatch(c.System + "\n" + c.text); m != nil {
		return m[1]
	}
	return ""
}

// tool returns the offered tool matching pick, first by name then by its
// input's properties.
func (c *Conversation) tool(pick func(Tool) bool) (Tool, bool) {
	for _, t := range c.Tools {
		if pick(t) {
			return t, true
		}
	}
	return Tool{}, false
}

// Shell returns a call of the client's shell tool (claude-code: Bash,
// opencode: bash) running command.
func (c *Conversation) Shell(command, description string) (Call, error) {
	t, ok := c.tool(func(t Tool) bool {
		n := strings.ToLower(t.Name)
		return (n == "bash" || n == "shell") && t.Props["command"]
	})
	if !ok {
		t, ok = c.tool(func(t Tool) bool { return t.Props["command"] && !t.Deferred })
	}
	if !ok {
		return Call{}, fmt.Errorf("the request offers no shell tool (one with a command property)")
	}
	in := map[string]any{"command": command}
	if t.Props["description"] {
		in["description"] = description
	}
	return newCall(t.Name, in), nil
}

// Write returns a call of the client's file-writing tool (claude-code:
// Write {file_path, content}, opencode: write {filePath, content}) creating
// name, relative to the working directory, with content.
func (c *Conversation) Write(name, content string) (Call, error) {
	pathProps := []string{"file_path", "filePath", "path"}
	t, ok := c.tool(func(t Tool) bool {
		if strings.ToLower(t.Name) != "write" || !t.Props["content"] {
			return false
		}
		for _, p := range pathProps {
			if t.Props[p] {
				return true
			}
		}
		return false
	})
	if !ok {
		return Call{}, fmt.Errorf("the request offers no write tool (named write, with content and a path)")
	}
	path := name
	if wd := c.Workdir(); wd != "" && !strings.HasPrefix(name, "/") {
		path = strings.TrimSuffix(wd, "/") + "/" + name
	}
	in := map[string]any{"content": content}
	for _, p := range pathProps {
		if t.Props[p] {
			in[p] = path
			break
		}
	}
	return newCall(t.Name, in), nil
}

// Skill returns a call of the client's skill tool (claude-code: Skill
// {skill}, opencode: skill {name}) loading the skill named name.
func (c *Conversation) Skill(name string) (Call, error) {
	t, ok := c.tool(func(t Tool) bool { return strings.ToLower(t.Name) == "skill" && (t.Props["skill"] || t.Props["name"]) })
	if !ok {
		return Call{}, fmt.Errorf("the request offers no skill tool")
	}
	if name == "" {
		return Call{}, fmt.Errorf("no skill named: give the marker a name= parameter")
	}
	prop := "name"
	if t.Props["skill"] {
		prop = "skill"
	}
	return newCall(t.Name, map[string]any{prop: name}), nil
}

func (c *Conversation) skillTool() string {
	t, _ := c.tool(func(t Tool) bool { return strings.ToLower(t.Name) == "skill" })
	return t.Name
}

// MCP returns a call of the MCP tool named name (claude-code:
// mcp__<server>__name, opencode: <server>_name), offered or announced as
// deferred.
func (c *Conversation) MCP(name string, input any) (Call, error) {
	if full := c.mcpName(name); full != "" {
		return newCall(full, input), nil
	}
	return Call{}, fmt.Errorf("the request offers no MCP tool named %s", name)
}

func (c *Conversation) mcpName(name string) string {
	matches := func(n string) bool {
		return n == name || strings.HasSuffix(n, "__"+name) || strings.HasSuffix(n, "_"+name)
	}
	for _, t := range c.Tools {
		if matches(t.Name) {
			return t.Name
		}
	}
	for n := range c.deferred {
		if matches(n) {
			return n
		}
	}
	return ""
}

// callable reports whether the model may call the tool named name now; a
// deferred tool first needs a tool search that loads it.
func (c *Conversation) callable(name string) bool {
	for _, t := range c.Tools {
		if t.Name == name {
			return !t.Deferred || c.referenced[name]
		}
	}
	return !c.deferred[name] || c.referenced[name]
}

// deferredRE finds claude-code's announcement of deferred tools: a list of
// names, one per line, after "available via ToolSearch".
var deferredRE = regexp.MustCompile(`(?s)deferred tools are now available via (\w+)[^\n]*\n(.*?)(?:</system-reminder>|\n\n|$)`)

// findDeferred records the tools the request announces as deferred and the
// ones a tool search in the conversation loaded.
func (c *Conversation) findDeferred() {
	c.deferred = map[string]bool{}
	c.referenced = map[string]bool{}
	for _, m := range deferredRE.FindAllStringSubmatch(c.text, -1) {
		if _, ok := c.tool(func(t Tool) bool { return t.Name == m[1] }); !ok {
			continue
		}
		c.toolSearch = m[1]
		for _, line := range strings.Split(m[2], "\n") {
			if n := strings.TrimSpace(line); n != "" && !strings.ContainsAny(n, " \t") {
				c.deferred[n] = true
			}
		}
	}
	for _, m := range c.Messages {
		for _, r := range m.Results {
			if r.Tool != c.toolSearch || c.toolSearch == "" || r.IsError {
				continue
			}
			for n := range c.deferred {
				if strings.Contains(r.Content, n) {
					c.referenced[n] = true
				}
			}
		}
	}
}

// nameResults fills in each result's tool name from the call it answers.
func (c *Conversation) nameResults() {
	names := map[string]string{}
	for _, m := range c.Messages {
		for _, call := range m.Calls {
			names[call.ID] = call.Tool
		}
	}
	for i := range c.Messages {
		for j := range c.Messages[i].Results {
			r := &c.Messages[i].Results[j]
			r.Tool = names[r.CallID]
		}
	}
}

func newCall(tool string, input any) Call {
	b, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: tool input %#v: %v", input, err)) // inputs are built here, from plain maps
	}
	return Call{Tool: tool, Input: b}
}
