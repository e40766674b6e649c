package fakemodel

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Turn is the model's answer to one request: text and tool calls, or a
// failure.
type Turn struct {
	Text  string
	Calls []Call
	// Fail answers with an API error instead.
	Fail *Failure
	// Hang never answers: before any byte (HangAtStart) or after the
	// stream's first event and some text (HangMidStream). The request is
	// released when the client goes away or the server closes.
	Hang Hang
}

// Failure is an API error answer.
type Failure struct {
	Status  int    // HTTP status (500, 529, 400 …)
	Type    string // the error's type: api_error, overloaded_error, invalid_request_error …
	Message string
	// RetryAfterMs, if > 0, is sent as the retry-after-ms header: the
	// clients' retries (both honour it) then come quickly.
	RetryAfterMs int
	// InStream sends the error as an event after the stream started
	// (Anthropic: event error; OpenAI: a chunk with an error), with
	// status 200.
	InStream bool
	// Code is the OpenAI error's code (rate_limit_exceeded,
	// insufficient_quota …); the Anthropic API has none.
	Code string
	// Headers are more response headers: retry-after, the rate limits'
	// reset times.
	Headers map[string]string
}

// Hang says where a turn hangs.
type Hang int

// Where a turn hangs.
const (
	NoHang Hang = iota
	HangAtStart
	HangMidStream
)

// Scenario plays a session: from the conversation so far it decides the
// model's next turn. Scenarios are stateless; everything they need is in
// the conversation (Step, Results, Prompt) and the marker's parameters.
type Scenario struct {
	Name string
	// Doc says in one line what the model does.
	Doc string
	// Next returns the next turn.
	Next func(c *Conversation) (Turn, error)
}

// DefaultScenario is played when a request has no marker: the model
// writes a file and reports the stage done, so a newcomer's ticket goes
// through every agent stage.
const DefaultScenario = "report-done"

// Marker returns the text that selects scenario name (with optional
// key=value parameters) when it appears in a session's prompt.
func Marker(name string, params ...string) string {
	if len(params) == 0 {
		return "[[ballet-scenario:" + name + "]]"
	}
	return "[[ballet-scenario:" + name + " " + strings.Join(params, " ") + "]]"
}

// step is one turn of a scripted scenario.
type step func(c *Conversation) (Turn, error)

// script plays steps in order, one per turn; after the last it ends with
// a short text.
func script(steps ...step) func(c *Conversation) (Turn, error) {
	return func(c *Conversation) (Turn, error) {
		if i := c.Step(); i < len(steps) {
			return steps[i](c)
		}
		return Turn{Text: "Finished."}, nil
	}
}

func say(text string) step {
	return func(*Conversation) (Turn, error) { return Turn{Text: text}, nil }
}

// report calls submit_report with outcome and a summary.
func report(outcome, summary string) step {
	return func(c *Conversation) (Turn, error) {
		return callMCP(c, "submit_report", map[string]any{"outcome": outcome, "summary": summary})
	}
}

func callMCP(c *Conversation, tool string, input any) (Turn, error) {
	call, err := c.MCP(tool, input)
	if err != nil {
		return Turn{}, err
	}
	return Turn{Calls: []Call{call}}, nil
}

// ticketRE finds the ticket a Ballet session works on in its prompt
// (runner/agent's PromptTemplate opens with it).
var ticketRE = regexp.MustCompile(`working for Ballet on ticket ([A-Z][A-Z0-9_]*-[0-9]+):`)

// writeFile writes the marker's file (default hello.txt) with its content.
// Played without a marker (the default scenario) in a Ballet session, it
// writes hello-<KEY>.txt saying the ticket's key instead: each ticket then
// adds something of its own to its branch (the same hello.txt again would
// leave the second ticket's branch with nothing to review or merge), and
// two tickets' branches do not clash on one file.
func writeFile(c *Conversation) (Turn, error) {
	file, content := "hello.txt", "hello from the fake model"
	if name, _ := c.marker(); name == "" {
		if m := ticketRE.FindStringSubmatch(c.Prompt()); m != nil {
			file, content = "hello-"+m[1]+".txt", "hello from the fake model for "+m[1]
		}
	}
	call, err := c.Write(c.Param("file", file), c.Param("content", content)+"\n")
	if err != nil {
		return Turn{}, err
	}
	return Turn{Text: "I will write the file.", Calls: []Call{call}}, nil
}

// Scenarios returns every scenario by name.
func Scenarios() map[string]Scenario {
	list := []Scenario{
		{Name: "report-done", Doc: "writes hello.txt (file=, content=; played without a marker on a Ballet ticket: hello-<KEY>.txt), reports done, ends",
			Next: script(writeFile, report("done", "Wrote the file."), say("Done."))},
		{Name: "report-failed", Doc: "reports failed, ends",
			Next: script(report("failed", "The tests do not pass and I cannot fix them."), say("I could not do it."))},
		{Name: "report-blocked", Doc: "reports blocked, ends",
			Next: script(report("blocked", "The acceptance criteria contradict each other."), say("I am blocked."))},
		{Name: "ask", Doc: "asks a blocking question (question=) and ends; once the prompt holds the answer (answer=), reports done quoting it",
			Next: ask},
		{Name: "read-ticket", Doc: "calls get_ticket, reports done with what it got as the summary",
			Next: readTicket},
		{Name: "search-knowledge", Doc: "calls search_knowledge (query=, _ for spaces), reports done with what it got as the summary",
			Next: searchKnowledge},
		{Name: "use-skill", Doc: "loads the skill name= with the client's skill tool, reports done with what came back as the summary",
			Next: useSkill},
		{Name: "no-report", Doc: "writes hello.txt and ends without a report",
			Next: script(writeFile, say("All done, no report."))},
		{Name: "api-error", Doc: "answers every request with an API error (status=500, type=api_error, retry_after_ms=10, in=stream for an error event)",
			Next: apiError},
		{Name: "rate-limit", Doc: "refuses as the provider's limit would (kind=rate: 429, kind=overloaded: 529, kind=quota: out of credit), with retry-after: retry_after= seconds and the rate limits' reset headers reset= seconds from now when given; from the session's step from= (0) on, while requests= answers or for= (a duration) since the first refusal have not passed (neither: always); otherwise plays then= (default report-done); one limit per marker, shared by every session that carries it",
			Next: rateLimit},
		{Name: "hang", Doc: "never answers (at=mid for after the stream's first text)",
			Next: hang},
		{Name: "huge-line", Doc: "reports done, then answers with a text of size= bytes (default 20000000) on one line",
			Next: hugeLine},
		{Name: "run-script", Doc: "runs `sh FILE` (file=, default probe.sh) in the workspace with the shell tool, then reports done with its output as the summary",
			Next: runScript},
		{Name: "slow-work", Doc: "runs steps= (default 5) shell calls of sleep= seconds (default 1), each appending to file= (default work.txt) then sleeping, then reports done",
			Next: slowWork},
	}
	out := make(map[string]Scenario, len(list))
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

// ScenarioNames returns the scenarios' names, sorted.
func ScenarioNames() []string {
	var names []string
	for n := range Scenarios() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func ask(c *Conversation) (Turn, error) {
	answer := c.Param("answer", "")
	if answer != "" && strings.Contains(c.Prompt(), answer) {
		return script(report("done", "Done as answered: "+answer), say("Done."))(c)
	}
	q := strings.ReplaceAll(c.Param("question", "Which colour should the button be?"), "_", " ")
	return script(func(c *Conversation) (Turn, error) {
		return callMCP(c, "ask_question", map[string]any{"question": q, "blocking": true})
	}, say("I asked a question and wait for the answer."))(c)
}

func readTicket(c *Conversation) (Turn, error) {
	return reportResult(c, "get_ticket", map[string]any{})
}

func searchKnowledge(c *Conversation) (Turn, error) {
	return reportResult(c, "search_knowledge", map[string]any{"query": strings.ReplaceAll(c.Param("query", "conventions"), "_", " ")})
}

// reportResult calls an MCP tool and reports done with what came back as
// the summary.
func reportResult(c *Conversation, tool string, input map[string]any) (Turn, error) {
	return script(
		func(c *Conversation) (Turn, error) { return callMCP(c, tool, input) },
		func(c *Conversation) (Turn, error) {
			rs := c.Results()
			if len(rs) == 0 {
				return Turn{}, fmt.Errorf("%s: no result came back", tool)
			}
			return callMCP(c, "submit_report", map[string]any{"outcome": "done", "summary": rs[len(rs)-1].Content})
		},
		say("Done."),
	)(c)
}

func useSkill(c *Conversation) (Turn, error) {
	return script(
		func(c *Conversation) (Turn, error) {
			call, err := c.Skill(c.Param("name", ""))
			if err != nil {
				return Turn{}, err
			}
			return Turn{Calls: []Call{call}}, nil
		},
		func(c *Conversation) (Turn, error) {
			// The skill's text comes back as the tool's result or as a
			// message after it, depending on the client.
			var got []string
			after := false
			for _, m := range c.Messages {
				for _, r := range m.Results {
					after = after || r.Tool == c.skillTool()
					if after {
						got = append(got, r.Content)
					}
				}
				if after && m.Role == "user" && m.Text != "" {
					got = append(got, m.Text)
				}
			}
			summary := strings.Join(got, "\n")
			if len(summary) > 4000 {
				summary = summary[:4000]
			}
			return callMCP(c, "submit_report", map[string]any{"outcome": "done", "summary": summary})
		},
		say("Done."),
	)(c)
}

func apiError(c *Conversation) (Turn, error) {
	status, err := intParam(c, "status", 500)
	if err != nil {
		return Turn{}, err
	}
	retry, err := intParam(c, "retry_after_ms", 10)
	if err != nil {
		return Turn{}, err
	}
	typ := c.Param("type", "api_error")
	return Turn{Fail: &Failure{
		Status:       status,
		Type:         typ,
		Message:      "fake model: scripted " + typ,
		RetryAfterMs: retry,
		InStream:     c.Param("in", "") == "stream",
	}}, nil
}

func hang(c *Conversation) (Turn, error) {
	if c.Param("at", "") == "mid" {
		return Turn{Hang: HangMidStream}, nil
	}
	return Turn{Hang: HangAtStart}, nil
}

func hugeLine(c *Conversation) (Turn, error) {
	size, err := intParam(c, "size", 20_000_000)
	if err != nil {
		return Turn{}, err
	}
	return script(
		report("done", "Reported before a huge answer."),
		func(*Conversation) (Turn, error) { return Turn{Text: strings.Repeat("x", size)}, nil },
	)(c)
}

func runScript(c *Conversation) (Turn, error) {
	return script(
		func(c *Conversation) (Turn, error) {
			call, err := c.Shell("sh "+c.Param("file", "probe.sh"), "Run the script")
			if err != nil {
				return Turn{}, err
			}
			return Turn{Calls: []Call{call}}, nil
		},
		func(c *Conversation) (Turn, error) {
			rs := c.Results()
			if len(rs) == 0 {
				return Turn{}, fmt.Errorf("run-script: no result came back")
			}
			out := rs[len(rs)-1].Content
			if len(out) > 4000 {
				out = out[:4000]
			}
			return callMCP(c, "submit_report", map[string]any{"outcome": "done", "summary": out})
		},
		say("Done."),
	)(c)
}

func slowWork(c *Conversation) (Turn, error) {
	steps, err := intParam(c, "steps", 5)
	if err != nil {
		return Turn{}, err
	}
	secs, err := intParam(c, "sleep", 1)
	if err != nil {
		return Turn{}, err
	}
	i := c.Step()
	switch {
	case i < steps:
		// The change first, so the workspace moves while the step runs; a
		// leading long sleep is refused by claude-code's Bash tool.
		call, err := c.Shell(fmt.Sprintf("echo step %d >> %s && sleep %d", i+1, c.Param("file", "work.txt"), secs),
			fmt.Sprintf("Work step %d of %d", i+1, steps))
		if err != nil {
			return Turn{}, err
		}
		return Turn{Calls: []Call{call}}, nil
	case i == steps:
		return report("done", fmt.Sprintf("Did %d steps of work.", steps))(c)
	}
	return Turn{Text: "Done."}, nil
}

func intParam(c *Conversation, key string, def int) (int, error) {
	v := c.Param(key, "")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("marker parameter %s=%q is not a whole number ≥ 0", key, v)
	}
	return n, nil
}
