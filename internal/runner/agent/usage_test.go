package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/runproto"
)

// sonnet is claude-sonnet-4-5's list prices, the ones the recorded
// sessions were priced at by the CLIs themselves.
var sonnet = Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}

// sampleLines reads a recorded sample's lines.
func sampleLines(t testing.TB, sample string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", sample))
	if err != nil {
		t.Fatal(err)
	}
	var ls [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			ls = append(ls, l)
		}
	}
	return ls
}

// feed gives out the lines and returns its result.
func feed(out Output, lines [][]byte) Result {
	for _, l := range lines {
		out.Line(l, false)
	}
	return out.Result()
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The price table prices tokens as the CLIs do: every recorded session's
// cost, claude-code's total and each of opencode's steps, is its usage at
// the list prices of its model.
func TestListPricesAreTheCLIs(t *testing.T) {
	if p, ok := ListPrices("claude-sonnet-4-5"); !ok || p != sonnet {
		t.Fatalf("ListPrices(claude-sonnet-4-5) = %+v, %v", p, ok)
	}
	samples, _ := filepath.Glob("testdata/*.ndjson")
	checked := 0
	for _, f := range samples {
		for _, l := range sampleLines(t, filepath.Base(f)) {
			var c claudeLine
			var o opencodeLine
			switch {
			case json.Unmarshal(l, &c) == nil && c.Type == "result" && c.TotalCostUSD > 0:
				if got := sonnet.Cost(c.Usage.usage()); !near(got, c.TotalCostUSD) {
					t.Errorf("%s: result usage %+v at list prices costs %v, the CLI said %v", f, c.Usage, got, c.TotalCostUSD)
				}
				checked++
			case json.Unmarshal(l, &o) == nil && o.Type == "step_finish":
				tk := o.Part.Tokens
				u := runproto.Usage{InputTokens: tk.Input, OutputTokens: tk.Output + tk.Reasoning, CacheReadTokens: tk.Cache.Read, CacheWriteTokens: tk.Cache.Write}
				if got := sonnet.Cost(u); !near(got, o.Part.Cost) {
					t.Errorf("%s: step usage %+v at list prices costs %v, the CLI said %v", f, u, got, o.Part.Cost)
				}
				checked++
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d priced lines in the samples", checked)
	}
}

// Each family is priced as its own; a model of no known family is priced
// at the dearest, so that an unpriced session never goes free.
func TestListPricesByFamily(t *testing.T) {
	for _, c := range []struct {
		model string
		input float64
		known bool
	}{
		{"claude-sonnet-4-5", 3, true},
		{"anthropic/claude-sonnet-4-5-20250929", 3, true},
		{"claude-opus-4-1-20250805", 15, true},
		{"claude-opus-4-20250514", 15, true},
		{"claude-opus-4@20250514", 15, true},
		{"claude-3-opus-20240229", 15, true},
		{"claude-opus-4-5", 5, true},
		{"Claude-Haiku-4-5", 1, true},
		{"claude-3-5-haiku-latest", 0.8, true},
		{"claude-3-haiku-20240307", 0.25, true},
		{"", 15, false},
		{"gpt-5", 15, false},
	} {
		p, ok := ListPrices(c.model)
		if p.Input != c.input || ok != c.known || p.Output != 5*p.Input || !near(p.CacheRead, p.Input/10) && !strings.Contains(c.model, "3-haiku") {
			t.Errorf("ListPrices(%q) = %+v, %v; want input $%v, known %v", c.model, p, ok, c.input, c.known)
		}
	}
	u := runproto.Usage{InputTokens: 1_000_000, OutputTokens: 2_000_000, CacheReadTokens: 3_000_000, CacheWriteTokens: 4_000_000}
	if got := (Prices{Input: 1, Output: 10, CacheRead: 100, CacheWrite: 1000}).Cost(u); got != 4321 {
		t.Errorf("Cost = %v, want 1 + 20 + 300 + 4000 = 4321", got)
	}
}

// A claude-code session killed at any point of a recorded stream counts
// the input and cache tokens of every model answer it printed, each answer
// once however many lines (content blocks) it took, priced at its model's
// list prices; cut right before its result line, that is the result's
// tokens but the output. With the result line, the usage is the result's
// total, not a sum with the answers'.
func TestClaudeKilledStreams(t *testing.T) {
	for _, c := range []struct {
		sample string
		cut    int // lines kept
		want   runproto.Usage
	}{
		{"claude-done.ndjson", 1, runproto.Usage{}},
		{"claude-done.ndjson", 2, runproto.Usage{InputTokens: 2590, CacheWriteTokens: 7029}},
		{"claude-done.ndjson", 3, runproto.Usage{InputTokens: 2590, CacheWriteTokens: 7029}}, // the same answer's second block
		{"claude-done.ndjson", 5, runproto.Usage{InputTokens: 2590 + 2760, CacheWriteTokens: 7029, CacheReadTokens: 7029}},
		{"claude-done.ndjson", 7, runproto.Usage{InputTokens: 8215, CacheWriteTokens: 7029, CacheReadTokens: 14058}},
		{"claude-done.ndjson", 8, runproto.Usage{InputTokens: 8215, OutputTokens: 56, CacheWriteTokens: 7029, CacheReadTokens: 14058, CostUSD: 0.05606115}},
		{"claude-answered.ndjson", 4, runproto.Usage{InputTokens: 5318, CacheWriteTokens: 7029, CacheReadTokens: 7029}},
		{"claude-answered.ndjson", 5, runproto.Usage{InputTokens: 5318, OutputTokens: 16, CacheWriteTokens: 7029, CacheReadTokens: 7029, CostUSD: 0.04466145}},
	} {
		lines := sampleLines(t, c.sample)
		got := feed(Claude{}.Output(""), lines[:c.cut])
		want := c.want
		if want.CostUSD == 0 {
			want.CostUSD = sonnet.Cost(want)
		}
		if !sameUsage(got.Usage, want) {
			t.Errorf("%s cut after %d lines: usage %+v, want %+v", c.sample, c.cut, got.Usage, want)
		}
		if got.Final != (c.cut == len(lines)) {
			t.Errorf("%s cut after %d lines: final %v", c.sample, c.cut, got.Final)
		}
	}
	// The model comes from the init line; without one, from what the
	// session was told; without either, the dearest prices.
	lines := sampleLines(t, "claude-cancelled.ndjson")
	for _, c := range []struct {
		told  string
		lines [][]byte
		price Prices
	}{
		{"claude-haiku-4-5", lines, sonnet},
		{"claude-haiku-4-5", lines[1:], Prices{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}},
		{"", lines[1:], dearest},
	} {
		u := feed(Claude{}.Output(c.told), c.lines).Usage
		if want := c.price.Cost(runproto.Usage{InputTokens: 2589, CacheWriteTokens: 7029}); !near(u.CostUSD, want) || want == 0 {
			t.Errorf("told %q, %d lines: cost %v, want %v", c.told, len(c.lines), u.CostUSD, want)
		}
	}
}

// With --include-partial-messages a claude-code session stopped at any
// point counts every token of each answer the model finished streaming —
// the output tokens too, which its message_delta event tells before the
// answer's tool calls run — and the input and cache tokens of one it was
// streaming; cut right before the result line, that is the result's total.
// Its stream events stay out of the log.
func TestClaudeStoppedStreamsCountOutputTokens(t *testing.T) {
	lines := sampleLines(t, "claude-partial-done.ndjson")
	total := runproto.Usage{InputTokens: 2261, OutputTokens: 68, CacheWriteTokens: 6948, CacheReadTokens: 13896}
	for _, c := range []struct {
		cut  int
		want runproto.Usage
	}{
		{2, runproto.Usage{}},
		{3, runproto.Usage{InputTokens: 650, CacheWriteTokens: 6948}},                   // the first answer's message_start
		{7, runproto.Usage{InputTokens: 650, CacheWriteTokens: 6948}},                   // its assistant line and block end
		{8, runproto.Usage{InputTokens: 650, OutputTokens: 26, CacheWriteTokens: 6948}}, // its message_delta
		{18, runproto.Usage{InputTokens: 650 + 754, OutputTokens: 52, CacheWriteTokens: 6948, CacheReadTokens: 6948}},
		{len(lines) - 1, total},
	} {
		out := Claude{}.Output("claude-sonnet-4-5")
		got := feed(out, lines[:c.cut])
		want := c.want
		want.CostUSD = sonnet.Cost(want)
		if !sameUsage(got.Usage, want) || got.Final {
			t.Errorf("cut after %d lines: usage %+v (final %v), want %+v", c.cut, got.Usage, got.Final, want)
		}
	}
	// The whole stream: the result's total, as the CLI priced it, equal to
	// the sum of the stream events.
	got := feed(Claude{}.Output(""), lines)
	want := total
	want.CostUSD = 0.038026800000000006
	if !sameUsage(got.Usage, want) || !near(sonnet.Cost(total), want.CostUSD) {
		t.Errorf("whole stream: usage %+v, want %+v", got.Usage, want)
	}
	for i, l := range lines {
		ev := Claude{}.Output("").Line(l, false)
		if quiet := bytes.Contains(l, []byte(`"type":"stream_event"`)); ev.Quiet != quiet {
			t.Errorf("line %d: quiet %v, want %v: %.80s", i, ev.Quiet, quiet, l)
		}
	}

	// Killed (SIGKILL) in its first answer's command: the answer's input,
	// cache and output tokens, at list prices.
	killed := feed(Claude{}.Output(""), sampleLines(t, "claude-partial-killed.ndjson")).Usage
	want = runproto.Usage{InputTokens: 651, OutputTokens: 26, CacheWriteTokens: 6948}
	want.CostUSD = sonnet.Cost(want)
	if !sameUsage(killed, want) {
		t.Errorf("killed: usage %+v, want %+v", killed, want)
	}

	// Running totals told twice or out of order count once, the largest:
	// a message_delta that also repeats the input tokens, a late assistant
	// line with fewer.
	out := Claude{}.Output("claude-sonnet-4-5")
	for _, l := range []string{
		`{"type":"stream_event","api_message_id":"m1","event":{"type":"message_start","message":{"id":"m1","usage":{"input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}}`,
		`{"type":"stream_event","api_message_id":"m1","event":{"type":"message_delta","usage":{"input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":40}}}`,
		`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":0}}}`,
		`{"type":"stream_event","api_message_id":"m1","event":{"type":"message_delta","usage":{"output_tokens":30}}}`,
		`{"type":"stream_event","api_message_id":"m2","event":{"type":"message_start","message":{"id":"m2","usage":{"input_tokens":10,"cache_creation_input_tokens":500}}}}`,
		`{"type":"stream_event","api_message_id":"m2","event":{"type":"message_delta","usage":{"output_tokens":7}}}`,
	} {
		out.Line([]byte(l), false)
	}
	want = runproto.Usage{InputTokens: 110, OutputTokens: 47, CacheReadTokens: 1000, CacheWriteTokens: 500}
	want.CostUSD = sonnet.Cost(want)
	if got := out.Result().Usage; !sameUsage(got, want) {
		t.Errorf("running totals: usage %+v, want %+v", got, want)
	}
}

// A result line repeated (a CLI that printed its summary twice) counts
// once: the usage is the last total. A result that told tokens but no cost
// is priced.
func TestClaudeResultIsTheLastTotal(t *testing.T) {
	lines := sampleLines(t, "claude-done.ndjson")
	out := Claude{}.Output("")
	got := feed(out, append(lines, lines[len(lines)-1]))
	want := runproto.Usage{InputTokens: 8215, OutputTokens: 56, CacheWriteTokens: 7029, CacheReadTokens: 14058, CostUSD: 0.05606115}
	if !sameUsage(got.Usage, want) {
		t.Errorf("usage %+v, want %+v", got.Usage, want)
	}
	free := Claude{}.Output("claude-opus-4-5")
	free.Line([]byte(`{"type":"result","subtype":"success","usage":{"input_tokens":1000000,"output_tokens":1000000,"cache_read_input_tokens":1000000,"cache_creation_input_tokens":1000000},"total_cost_usd":0}`), false)
	if u := free.Result().Usage; !near(u.CostUSD, 5+25+0.5+6.25) {
		t.Errorf("a result without cost: %+v, want it priced at claude-opus-4-5's list prices ($36.75)", u)
	}
}

// opencode: usage is the sum of the steps that finished (a killed session
// loses the step under way, whose tokens nobody told), each at the cost
// opencode told; a step it told no cost for is priced at the configured
// prices, else at the list prices of a Claude model, else (a model of no
// known family, declared without prices) free.
func TestOpenCodeKilledStreams(t *testing.T) {
	lines := sampleLines(t, "opencode-done.ndjson")
	step1 := runproto.Usage{InputTokens: 2737, OutputTokens: 42, CostUSD: 0.008841}
	step2 := runproto.Usage{InputTokens: 488, OutputTokens: 12, CacheReadTokens: 2356, CostUSD: 0.0023508}
	sum := func(us ...runproto.Usage) runproto.Usage {
		var s runproto.Usage
		for _, u := range us {
			s.InputTokens += u.InputTokens
			s.OutputTokens += u.OutputTokens
			s.CacheReadTokens += u.CacheReadTokens
			s.CacheWriteTokens += u.CacheWriteTokens
			s.CostUSD += u.CostUSD
		}
		return s
	}
	for _, c := range []struct {
		cut  int
		want runproto.Usage
	}{
		{3, runproto.Usage{}},
		{4, step1},
		{6, step1},
		{7, sum(step1, step2)},
		{10, runproto.Usage{InputTokens: 3783, OutputTokens: 56, CacheReadTokens: 4712, CostUSD: 0.0136026}},
	} {
		if got := feed(OpenCode{}.Output("anthropic/claude-sonnet-4-5"), lines[:c.cut]).Usage; !sameUsage(got, c.want) {
			t.Errorf("cut after %d lines: usage %+v, want %+v", c.cut, got, c.want)
		}
	}

	// The same steps without opencode's cost figures.
	var unpriced [][]byte
	for _, l := range lines {
		unpriced = append(unpriced, bytes.Replace(l, []byte(`"cost":`), []byte(`"cost":0,"was":`), 1))
	}
	tokens := runproto.Usage{InputTokens: 3783, OutputTokens: 56, CacheReadTokens: 4712}
	mine := Prices{Input: 1, Output: 2, CacheRead: 0.5, CacheWrite: 4}
	for _, c := range []struct {
		ad    OpenCode
		model string
		want  float64
	}{
		{OpenCode{}, "anthropic/claude-sonnet-4-5", sonnet.Cost(tokens)},
		{OpenCode{Prices: mine}, "anthropic/claude-sonnet-4-5", mine.Cost(tokens)},
		{OpenCode{Prices: mine}, "ballet-openai/local-llm", mine.Cost(tokens)},
		{OpenCode{}, "ballet-openai/local-llm", 0},
	} {
		got := feed(c.ad.Output(c.model), unpriced).Usage
		if !near(got.CostUSD, c.want) || got.InputTokens != tokens.InputTokens {
			t.Errorf("%s with prices %+v: usage %+v, want cost %v", c.model, c.ad.Prices, got, c.want)
		}
	}
}

// The command names the model the session was told to use, for Output.
func TestCommandNamesTheModel(t *testing.T) {
	for _, c := range []struct {
		ad    interface{ Prepare(Spec) (Command, error) }
		stage string
		want  string
	}{
		{Claude{}, "", ""},
		{Claude{Model: "claude-haiku-4-5"}, "", "claude-haiku-4-5"},
		{Claude{Model: "claude-haiku-4-5"}, "claude-opus-4-5", "claude-opus-4-5"},
		{OpenCode{Model: "claude-sonnet-4-5"}, "", "anthropic/claude-sonnet-4-5"},
		{OpenCode{Model: "claude-sonnet-4-5"}, "anthropic/claude-opus-4-5", "anthropic/claude-opus-4-5"},
	} {
		s := spec(t)
		s.Session.Stage.Model = c.stage
		cmd, err := c.ad.Prepare(s)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Model != c.want {
			t.Errorf("%T stage model %q: command's model %q, want %q", c.ad, c.stage, cmd.Model, c.want)
		}
	}
}

// opencode stopped in a step's tool calls told nothing of the step; the
// meter counted what the model served: the usage is never less than that,
// the tokens opencode did not tell priced at the configured prices (or the
// list prices), the steps it told at its own figures. What it told in full
// stays as it is.
func TestOpenCodeUsageIsWhatTheModelServed(t *testing.T) {
	lines := sampleLines(t, "opencode-done.ndjson")
	step1 := runproto.Usage{InputTokens: 2737, OutputTokens: 42, CostUSD: 0.008841}
	step2 := runproto.Usage{InputTokens: 488, OutputTokens: 12, CacheReadTokens: 2356}
	mine := Prices{Input: 1, Output: 2, CacheRead: 0.5, CacheWrite: 4}
	for _, c := range []struct {
		name   string
		ad     OpenCode
		cut    int
		served runproto.Usage
		want   runproto.Usage
	}{
		{"first step cut", OpenCode{}, 3, step1, runproto.Usage{InputTokens: 2737, OutputTokens: 42, CostUSD: sonnet.Cost(step1)}},
		{"first step cut, priced", OpenCode{Prices: mine}, 3, step1, runproto.Usage{InputTokens: 2737, OutputTokens: 42, CostUSD: mine.Cost(step1)}},
		{"nothing served", OpenCode{}, 3, runproto.Usage{}, runproto.Usage{}},
		{"second step cut", OpenCode{}, 6, runproto.Usage{InputTokens: 2737 + 488, OutputTokens: 54, CacheReadTokens: 2356},
			runproto.Usage{InputTokens: 3225, OutputTokens: 54, CacheReadTokens: 2356, CostUSD: step1.CostUSD + sonnet.Cost(step2)}},
		{"told in full", OpenCode{}, 7, runproto.Usage{InputTokens: 3225, OutputTokens: 54, CacheReadTokens: 2356},
			runproto.Usage{InputTokens: 3225, OutputTokens: 54, CacheReadTokens: 2356, CostUSD: 0.008841 + 0.0023508}},
		{"a meter that missed a step", OpenCode{}, 7, step1,
			runproto.Usage{InputTokens: 3225, OutputTokens: 54, CacheReadTokens: 2356, CostUSD: 0.008841 + 0.0023508}},
	} {
		out := c.ad.Output("anthropic/claude-sonnet-4-5")
		for _, l := range lines[:c.cut] {
			out.Line(l, false)
		}
		out.Served(c.served)
		if got := out.Result().Usage; !sameUsage(got, c.want) {
			t.Errorf("%s: usage %+v, want %+v", c.name, got, c.want)
		}
	}
}

// opencode reaches the model API through the session's meter when there
// is one: the anthropic provider (its URL, or Anthropic's own when none is
// set) and the OpenAI-compatible one; a meter that cannot start fails the
// session's preparation.
func TestOpenCodeGoesThroughTheMeter(t *testing.T) {
	for _, c := range []struct {
		ad       OpenCode
		environ  []string
		upstream string
		provider string
	}{
		{OpenCode{Model: "claude-sonnet-4-5"}, nil, "https://api.anthropic.com/v1", "anthropic"},
		{OpenCode{Model: "claude-sonnet-4-5"}, []string{"ANTHROPIC_BASE_URL=http://model:9"}, "http://model:9/v1", "anthropic"},
		{OpenCode{Model: "m", Provider: ProviderOpenAI, BaseURL: "http://oai:9/v1"}, nil, "http://oai:9/v1", openAIProvider},
	} {
		s := spec(t)
		s.Session.Stage.Model = ""
		s.Environ = c.environ
		var asked []string
		s.Meter = func(up string) (string, error) { asked = append(asked, up); return "http://127.0.0.1:1/v1", nil }
		cmd, err := c.ad.Prepare(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(asked) != 1 || asked[0] != c.upstream {
			t.Errorf("%+v: metered %q, want %q", c.ad, asked, c.upstream)
		}
		var config struct {
			Provider map[string]struct {
				Options map[string]any `json:"options"`
			} `json:"provider"`
		}
		if err := json.Unmarshal([]byte(envMap(cmd.Env)["OPENCODE_CONFIG_CONTENT"]), &config); err != nil {
			t.Fatal(err)
		}
		if got := config.Provider[c.provider].Options["baseURL"]; got != "http://127.0.0.1:1/v1" {
			t.Errorf("%+v: baseURL %v, want the meter's", c.ad, got)
		}
		s.Meter = func(string) (string, error) { return "", errors.New("no port") }
		if _, err := c.ad.Prepare(s); err == nil || !strings.Contains(err.Error(), "no port") {
			t.Errorf("%+v: a meter that failed: %v", c.ad, err)
		}
	}
}
