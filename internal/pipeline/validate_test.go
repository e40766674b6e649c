package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

// summary renders problems as "code@path" for compact expectations.
func summary(ps []Problem) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Code+"@"+p.Path)
	}
	return out
}

// TestParseRules has one row per rule of the specification (and of Parse):
// the YAML and the problems expected, as code@path, in order.
func TestParseRules(t *testing.T) {
	const (
		agent = "  - {id: a, kind: agent}\n"
		human = "  - {id: h, kind: human}\n"
	)
	rows := []struct {
		name, yaml string
		want       []string
	}{
		// Valid definitions.
		{"minimal", "stages:\n" + agent, nil},
		{"template-like", "max_iterations: 3\nstages:\n  - id: implement\n    kind: agent\n    name: Implement\n    adapter: opencode\n    model: sonnet\n    skills: [go, docs]\n    instructions: Do it.\n    timeout_minutes: 30\n    next: {done: review, failed: $question, blocked: $question}\n  - id: review\n    kind: human\n    next: {done: merge, failed: implement}\n  - id: merge\n    kind: platform\n    action: merge\n    next: {done: $done, failed: $failed, blocked: $question}\n", nil},
		{"claude-code explicit", "stages:\n  - {id: a, kind: agent, adapter: claude-code}\n", nil},
		{"self loop and $failed", "stages:\n  - {id: a, kind: agent, next: {failed: a, blocked: $failed}}\n", nil},
		{"max_iterations 1", "max_iterations: 1\nstages:\n" + agent, nil},
		{"max_iterations 20", "max_iterations: 20\nstages:\n" + agent, nil},
		{"timeout 0 is the default", "stages:\n  - {id: a, kind: agent, timeout_minutes: 0}\n", nil},
		{"nulls are not written", "max_iterations: ~\nstages:\n  - id: a\n    kind: agent\n    name:\n    model: null\n    skills:\n    next:\n", nil},
		{"empty strings are not written", "stages:\n  - {id: a, kind: agent, adapter: '', next: {done: ''}}\n", nil},
		{"aliases", "stages:\n  - {id: a, kind: &k agent, instructions: &i Shared.}\n  - {id: b, kind: *k, instructions: *i}\n", nil},
		{"merge keys", "stages:\n  - &a {id: a, kind: agent, instructions: Shared.}\n  - <<: *a\n    id: b\n", nil},
		{"one character id, 32 character id", "stages:\n  - {id: a, kind: agent}\n  - {id: " + "b" + strings.Repeat("x", 31) + ", kind: agent}\n", nil},
		{"ids with digits, _ and -", "stages:\n  - {id: a1_b-c, kind: agent}\n", nil},

		// max_iterations.
		{"max_iterations 0", "max_iterations: 0\nstages:\n" + agent, []string{"max_iterations_range@max_iterations"}},
		{"max_iterations 21", "max_iterations: 21\nstages:\n" + agent, []string{"max_iterations_range@max_iterations"}},
		{"max_iterations negative", "max_iterations: -1\nstages:\n" + agent, []string{"max_iterations_range@max_iterations"}},
		{"max_iterations huge", "max_iterations: 99999999999999999999\nstages:\n" + agent, []string{"max_iterations_range@max_iterations"}},
		{"max_iterations string", "max_iterations: \"3\"\nstages:\n" + agent, []string{"invalid_type@max_iterations"}},
		{"max_iterations float", "max_iterations: 2.5\nstages:\n" + agent, []string{"invalid_type@max_iterations"}},

		// Empty pipelines.
		{"empty document", "", []string{"empty_pipeline@stages"}},
		{"only a comment", "# nothing yet\n", []string{"empty_pipeline@stages"}},
		{"no stages key", "max_iterations: 3\n", []string{"empty_pipeline@stages"}},
		{"empty stages", "stages: []\n", []string{"empty_pipeline@stages"}},
		{"null stages", "stages:\n", []string{"empty_pipeline@stages"}},

		// Ids.
		{"missing id", "stages:\n  - {kind: agent}\n", []string{"missing_field@stages[0].id"}},
		{"uppercase id", "stages:\n  - {id: Implement, kind: agent}\n", []string{"invalid_id@stages[0].id"}},
		{"id starting with a digit", "stages:\n  - {id: 1st, kind: agent}\n", []string{"invalid_id@stages[0].id"}},
		{"id too long", "stages:\n  - {id: a" + strings.Repeat("x", 32) + ", kind: agent}\n", []string{"invalid_id@stages[0].id"}},
		{"id with a space", "stages:\n  - {id: 'a b', kind: agent}\n", []string{"invalid_id@stages[0].id"}},
		{"duplicate id", "stages:\n" + agent + agent, []string{"duplicate_id@stages[1].id"}},

		// Kinds, adapters, actions.
		{"missing kind", "stages:\n  - {id: a}\n", []string{"missing_field@stages[0].kind"}},
		{"unknown kind", "stages:\n  - {id: a, kind: robot}\n", []string{"unknown_kind@stages[0].kind"}},
		{"unknown adapter", "stages:\n  - {id: a, kind: agent, adapter: codex}\n", []string{"unknown_adapter@stages[0].adapter"}},
		{"unknown action", "stages:\n  - {id: a, kind: platform, action: deploy}\n", []string{"unknown_action@stages[0].action"}},
		{"platform without action", "stages:\n  - {id: a, kind: platform}\n", []string{"missing_field@stages[0].action"}},

		// Fields that do not belong to the kind.
		{"action on agent", "stages:\n  - {id: a, kind: agent, action: merge}\n", []string{"field_not_allowed@stages[0].action"}},
		{"agent fields on human", "stages:\n  - id: h\n    kind: human\n    adapter: opencode\n    model: m\n    skills: [s]\n    instructions: x\n    timeout_minutes: 5\n    action: merge\n",
			[]string{"field_not_allowed@stages[0].adapter", "field_not_allowed@stages[0].model", "field_not_allowed@stages[0].skills", "field_not_allowed@stages[0].instructions", "field_not_allowed@stages[0].action", "field_not_allowed@stages[0].timeout_minutes"}},
		{"agent fields on platform", "stages:\n  - id: p\n    kind: platform\n    action: merge\n    adapter: claude-code\n    model: m\n    skills: [s]\n    instructions: x\n    timeout_minutes: 5\n",
			[]string{"field_not_allowed@stages[0].adapter", "field_not_allowed@stages[0].model", "field_not_allowed@stages[0].skills", "field_not_allowed@stages[0].instructions", "field_not_allowed@stages[0].timeout_minutes"}},

		// Timeouts and skills.
		{"negative timeout", "stages:\n  - {id: a, kind: agent, timeout_minutes: -5}\n", []string{"invalid_timeout@stages[0].timeout_minutes"}},
		{"timeout above a week", "stages:\n  - {id: a, kind: agent, timeout_minutes: 10081}\n", []string{"invalid_timeout@stages[0].timeout_minutes"}},
		{"timeout huge", "stages:\n  - {id: a, kind: agent, timeout_minutes: 1e3}\n", []string{"invalid_type@stages[0].timeout_minutes"}},
		{"empty skill", "stages:\n  - {id: a, kind: agent, skills: [go, '']}\n", []string{"invalid_skill@stages[0].skills[1]"}},
		{"duplicate skill", "stages:\n  - {id: a, kind: agent, skills: [go, docs, go]}\n", []string{"duplicate_skill@stages[0].skills[2]"}},

		// Targets and the graph.
		{"unknown stage target", "stages:\n  - {id: a, kind: agent, next: {done: b}}\n", []string{"unknown_target@stages[0].next.done"}},
		{"unknown special target", "stages:\n  - {id: a, kind: agent, next: {failed: $retry}}\n", []string{"unknown_target@stages[0].next.failed"}},
		{"unknown target is not also unreachable", "stages:\n  - {id: a, kind: agent, next: {done: c}}\n  - {id: b, kind: agent}\n", []string{"unknown_target@stages[0].next.done"}},
		{"unreachable stage", "stages:\n  - {id: a, kind: agent, next: {done: $done}}\n  - {id: b, kind: agent}\n", []string{"unreachable_stage@stages[1]"}},
		{"reachable only through failed", "stages:\n  - {id: a, kind: agent, next: {done: $done, failed: b}}\n  - {id: b, kind: agent, next: {done: a}}\n", nil},
		{"reachable only through blocked", "stages:\n  - {id: a, kind: agent, next: {done: $done, blocked: b}}\n  - {id: b, kind: agent}\n", nil},
		{"no path to done", "stages:\n  - {id: a, kind: agent, next: {done: a}}\n", []string{"no_path_to_done@stages"}},
		{"only $failed", "stages:\n  - {id: a, kind: agent, next: {done: $failed}}\n", []string{"no_path_to_done@stages"}},
		{"a trap stage", "stages:\n  - {id: a, kind: agent, next: {failed: trap}}\n  - {id: b, kind: agent, next: {done: $done}}\n  - {id: trap, kind: agent, next: {done: trap, failed: $failed}}\n",
			[]string{"no_path_to_done@stages[2]"}},
		{"unreachable and a trap", "stages:\n  - {id: a, kind: agent, next: {done: $done, failed: trap}}\n  - {id: b, kind: agent}\n  - {id: trap, kind: agent, next: {done: trap}}\n",
			[]string{"unreachable_stage@stages[1]", "no_path_to_done@stages[2]"}},

		// Reading: unknown fields, types, syntax.
		{"unknown top-level field", "max_iteration: 3\nstages:\n" + agent, []string{"unknown_field@max_iteration"}},
		{"unknown stage field", "stages:\n  - {id: a, kind: agent, adaptor: opencode}\n", []string{"unknown_field@stages[0].adaptor"}},
		{"unknown outcome", "stages:\n  - {id: a, kind: agent, next: {success: $done}}\n", []string{"unknown_field@stages[0].next.success"}},
		{"odd unknown key", "stages:\n  - {id: a, kind: agent, 'x.y': 1}\n", []string{`unknown_field@stages[0]["x.y"]`}},
		{"duplicate key", "stages:\n  - {id: a, kind: agent, kind: human}\n", []string{"duplicate_field@stages[0].kind"}},
		{"root is a list", "- id: a\n", []string{"invalid_type@"}},
		{"root is a string", "hello\n", []string{"invalid_type@"}},
		{"stages is a mapping", "stages: {id: a}\n", []string{"invalid_type@stages"}},
		{"stage is a string", "stages:\n  - implement\n" + agent, []string{"invalid_type@stages[0]"}},
		{"id is a number", "stages:\n  - {id: 1, kind: agent}\n", []string{"invalid_type@stages[0].id"}},
		{"kind is a list", "stages:\n  - {id: a, kind: [agent]}\n", []string{"invalid_type@stages[0].kind"}},
		{"name is a boolean", "stages:\n  - {id: a, kind: agent, name: true}\n", []string{"invalid_type@stages[0].name"}},
		{"skills is a string", "stages:\n  - {id: a, kind: agent, skills: go}\n", []string{"invalid_type@stages[0].skills"}},
		{"skill is a mapping", "stages:\n  - {id: a, kind: agent, skills: [{go: 1}]}\n", []string{"invalid_type@stages[0].skills[0]"}},
		{"next is a list", "stages:\n  - {id: a, kind: agent, next: [review]}\n", []string{"invalid_type@stages[0].next"}},
		{"target is a number", "stages:\n  - {id: a, kind: agent, next: {done: 1}}\n", []string{"invalid_type@stages[0].next.done"}},
		{"non-string key", "stages:\n  - {id: a, kind: agent, [x]: 1}\n", []string{"invalid_type@stages[0]"}},
		{"bad merge", "stages:\n  - {id: a, kind: agent, <<: 1}\n", []string{"invalid_type@stages[0]"}},
		{"custom tag", "stages:\n  - {id: !thing a, kind: agent}\n", []string{"invalid_type@stages[0].id"}},
		{"yaml syntax", "stages:\n  - {id: a, kind: agent\n", []string{"yaml_syntax@"}},
		{"tab indentation", "stages:\n\t- id: a\n", []string{"yaml_syntax@"}},
		{"two documents", "stages: []\n---\nstages: []\n", []string{"yaml_syntax@"}},

		// Everything at once, in path order.
		{"all at once", "max_iterations: 50\nbogus: 1\nstages:\n  - {id: A, kind: agent, next: {done: nowhere}}\n  - {id: b, kind: human, model: x}\n  - {id: b, kind: platform}\n",
			// Unknown keys come after the known ones of their mapping.
			[]string{"max_iterations_range@max_iterations", "invalid_id@stages[0].id", "unknown_target@stages[0].next.done", "field_not_allowed@stages[1].model", "duplicate_id@stages[2].id", "missing_field@stages[2].action", "unknown_field@bogus"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			_, ps := Parse([]byte(row.yaml))
			got := summary(ps)
			want := row.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("problems\n got %q\nwant %q\n%s", got, want, ps)
			}
			for _, p := range ps {
				if p.Message == "" || p.Code == "" {
					t.Errorf("incomplete problem %+v", p)
				}
				if p.Code != CodeYAMLSyntax && p.Line == 0 && row.yaml != "" && !strings.HasPrefix(row.yaml, "#") {
					t.Errorf("problem without a line: %+v", p)
				}
			}
		})
	}
}

// TestValidateDefinitions checks rules that YAML cannot express (invalid
// UTF-8) and that Validate works on a Definition built in code.
func TestValidateDefinitions(t *testing.T) {
	rows := []struct {
		name string
		def  Definition
		want []string
	}{
		{"template", Template(), nil},
		{"zero definition", Definition{}, []string{"empty_pipeline@stages"}},
		{"zero stage", Definition{Stages: []Stage{{}}}, []string{"missing_field@stages[0].id", "missing_field@stages[0].kind"}},
		{"invalid utf-8 id", Definition{Stages: []Stage{{ID: "a\xff", Kind: KindAgent}}}, []string{"invalid_text@stages[0].id"}},
		{"invalid utf-8 instructions", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Instructions: "\xc3"}}}, []string{"invalid_text@stages[0].instructions"}},
		{"invalid utf-8 skill", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Skills: []string{"\xff", "\xfe"}}}}, []string{"invalid_text@stages[0].skills[0]", "invalid_text@stages[0].skills[1]"}},
		{"invalid utf-8 target", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Next: Next{Done: "\xff"}}}}, []string{"invalid_text@stages[0].next.done"}},
		{"control characters", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Name: "x\x1b[2J", Model: "m\x00", Skills: []string{"go\n"},
			Instructions: "ok\x1b]0;pwned\x07"}}}, []string{"invalid_text@stages[0].name", "invalid_text@stages[0].model", "invalid_text@stages[0].skills[0]", "invalid_text@stages[0].instructions"}},
		{"line feeds and tabs in instructions are fine", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Instructions: "one\n\ttwo\n"}}}, nil},
		{"empty skills list is fine", Definition{Stages: []Stage{{ID: "a", Kind: KindHuman, Skills: []string{}}}}, nil},
		{"knowledge", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Knowledge: []string{"conventions/go", "ops:deploy", "adr-0016", "notes/v1.2_x", "a-b:c", "x:y/z"}}}}, nil},
		{"knowledge of a space with an underscore", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Knowledge: []string{"my_space:x", "-a:x", strings.Repeat("s", 41) + ":x"}}}},
			[]string{"invalid_knowledge@stages[0].knowledge[0]", "invalid_knowledge@stages[0].knowledge[1]", "invalid_knowledge@stages[0].knowledge[2]"}},
		{"knowledge that is no slug", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Knowledge: []string{"Conventions", "a//b", "/x", "x/", "x:", ":x"}}}},
			[]string{"invalid_knowledge@stages[0].knowledge[0]", "invalid_knowledge@stages[0].knowledge[1]", "invalid_knowledge@stages[0].knowledge[2]",
				"invalid_knowledge@stages[0].knowledge[3]", "invalid_knowledge@stages[0].knowledge[4]", "invalid_knowledge@stages[0].knowledge[5]"}},
		{"more knowledge that is no slug", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Knowledge: []string{"a:b:c", "", " x", "a b", "-x", "ops-:x"}}}},
			[]string{"invalid_knowledge@stages[0].knowledge[0]", "invalid_knowledge@stages[0].knowledge[1]", "invalid_knowledge@stages[0].knowledge[2]",
				"invalid_knowledge@stages[0].knowledge[3]", "invalid_knowledge@stages[0].knowledge[4]", "invalid_knowledge@stages[0].knowledge[5]"}},
		{"knowledge listed twice", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Knowledge: []string{"go", "ops:go", "go"}}}}, []string{"duplicate_knowledge@stages[0].knowledge[2]"}},
		{"knowledge of a human stage", Definition{Stages: []Stage{{ID: "a", Kind: KindHuman, Knowledge: []string{"go"}}}}, []string{"field_not_allowed@stages[0].knowledge"}},
		{"knowledge with control characters", Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Knowledge: []string{"go\n", "\xff"}}}},
			[]string{"invalid_text@stages[0].knowledge[0]", "invalid_text@stages[0].knowledge[1]"}},
		{"sorted by stage index numerically", Definition{Stages: append(make([]Stage, 0), stagesN(12)...)}, nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			got := summary(Validate(row.def))
			want := row.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("problems\n got %q\nwant %q", got, want)
			}
		})
	}
	// Problems of stages[10] sort after those of stages[2].
	d := Definition{Stages: stagesN(12)}
	d.Stages[10].Kind = "x"
	d.Stages[2].Kind = "y"
	if got := summary(Validate(d)); !reflect.DeepEqual(got, []string{"unknown_kind@stages[2].kind", "unknown_kind@stages[10].kind"}) {
		t.Errorf("order: %q", got)
	}
}

func stagesN(n int) []Stage {
	var out []Stage
	for i := range n {
		out = append(out, Stage{ID: "s" + itoa(i), Kind: KindAgent})
	}
	return out
}

// TestDefaults covers every default of the specification: resolved by the
// accessors, never stored and never rendered.
func TestDefaults(t *testing.T) {
	d, ps := Parse([]byte("stages:\n  - {id: a, kind: agent}\n  - {id: b, kind: human, next: {failed: a}}\n  - {id: c, kind: platform, action: merge}\n"))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if d.MaxIterations != 0 || d.MaxIter() != 3 {
		t.Errorf("max_iterations: stored %d, resolved %d; want 0 and 3", d.MaxIterations, d.MaxIter())
	}
	if d.Stages[0].Adapter != "" || d.Stages[0].AdapterOrDefault() != AdapterClaudeCode {
		t.Errorf("adapter: stored %q, resolved %q", d.Stages[0].Adapter, d.Stages[0].AdapterOrDefault())
	}
	if got := d.Stages[1].AdapterOrDefault(); got != "" {
		t.Errorf("human stage adapter resolves to %q", got)
	}
	if d.Stages[0].Timeout() != DefaultTimeout || (Stage{TimeoutMinutes: 30}).Timeout().Minutes() != 30 || (Stage{TimeoutMinutes: 1 << 30}).Timeout().Minutes() != MaxTimeoutMinutes {
		t.Error("timeout defaults")
	}
	targets := []struct{ stage, outcome, want string }{
		{"a", "done", "b"}, // the next stage
		{"a", "failed", "$question"},
		{"a", "blocked", "$question"},
		{"b", "done", "c"},
		{"b", "failed", "a"}, // written
		{"b", "blocked", "$question"},
		{"c", "done", "$done"}, // after the last stage
		{"c", "failed", "$question"},
	}
	for _, tc := range targets {
		got, err := d.Target(tc.stage, tc.outcome)
		if err != nil || got != tc.want {
			t.Errorf("Target(%s, %s) = %q, %v; want %q", tc.stage, tc.outcome, got, err, tc.want)
		}
	}
	if _, err := d.Target("zzz", "done"); err == nil {
		t.Error("Target of an unknown stage: no error")
	}
	if _, err := d.Target("a", "success"); err == nil {
		t.Error("Target of an unknown outcome: no error")
	}
	if s, ok := d.First(); !ok || s.ID != "a" {
		t.Errorf("First = %v, %v", s, ok)
	}
	if _, ok := (Definition{}).First(); ok {
		t.Error("First of an empty definition")
	}
	if s, ok := d.Stage("c"); !ok || s.Action != ActionMerge {
		t.Errorf("Stage(c) = %v, %v", s, ok)
	}
	if _, ok := d.Stage("x"); ok {
		t.Error("Stage(x) found")
	}
	if d.Index("b") != 1 || d.Index("x") != -1 {
		t.Error("Index")
	}
	// Defaults are not spelled out by Render.
	out, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	want := "stages:\n  - id: a\n    kind: agent\n  - id: b\n    kind: human\n    next: {failed: a}\n  - id: c\n    kind: platform\n    action: merge\n"
	if string(out) != want {
		t.Errorf("render\n%s\nwant\n%s", out, want)
	}
	// …but what the user wrote is kept, even when it equals the default.
	d2, _ := Parse([]byte("max_iterations: 3\nstages:\n  - {id: a, kind: agent, adapter: claude-code, next: {done: $done}}\n"))
	out, _ = Render(d2)
	if want := "max_iterations: 3\nstages:\n  - id: a\n    kind: agent\n    adapter: claude-code\n    next: {done: $done}\n"; string(out) != want {
		t.Errorf("render\n%s\nwant\n%s", out, want)
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"default", "bug", "docs", "a", "chore_2", "hot-fix", "a" + strings.Repeat("b", 31)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "epic", "Bug", "1bug", "bug fix", "a" + strings.Repeat("b", 32), "bug/x", "$done"} {
		if err := ValidName(bad); err == nil {
			t.Errorf("ValidName(%q) = nil", bad)
		}
	}
}

// TestProblemPositions checks that problems point at the value concerned.
func TestProblemPositions(t *testing.T) {
	src := "stages:\n  - id: a\n    kind: agent\n    next: {done: nowhere}\n  - id: b\n    kind: robot\n    colour: red\n"
	_, ps := Parse([]byte(src))
	want := []Problem{
		{Code: CodeUnknownTarget, Path: "stages[0].next.done", Line: 4, Column: 18},
		{Code: CodeUnknownKind, Path: "stages[1].kind", Line: 6, Column: 11},
		{Code: CodeUnknownField, Path: "stages[1].colour", Line: 7, Column: 5},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %v", ps)
	}
	for i, w := range want {
		g := ps[i]
		if g.Code != w.Code || g.Path != w.Path || g.Line != w.Line || g.Column != w.Column {
			t.Errorf("problem %d = %+v; want %+v", i, g, w)
		}
	}
	if s := ps[0].String(); s != `4:18: stages[0].next.done: done of stage "a" leads to "nowhere", which is neither a stage id nor $done, $failed or $question [unknown_target]` {
		t.Errorf("String() = %s", s)
	}
	// A missing field is located at its stage.
	_, ps = Parse([]byte("stages:\n  - id: a\n    name: A\n"))
	if len(ps) != 1 || ps[0].Line != 2 || ps[0].Column != 5 {
		t.Errorf("missing kind located at %v", ps)
	}
}

// TestExcessiveAliasing: anchors referenced over and over (exponentially
// through merge keys, or quadratically through lists) are refused quickly
// instead of being expanded.
func TestExcessiveAliasing(t *testing.T) {
	var b strings.Builder
	b.WriteString("stages:\n  - &a0 {id: a, kind: agent}\n")
	for i := 1; i < 10; i++ {
		b.WriteString("  - &a" + itoa(i) + " {<<: [" + strings.TrimSuffix(strings.Repeat("*a"+itoa(i-1)+",", 10), ",") + "]}\n")
	}
	// Lists repeated through aliases are bounded by MaxStages and MaxSkills
	// now: refused as too long before any stage is read.
	lists := "stages:\n  - &s {id: a, kind: agent, skills: [" + strings.TrimSuffix(strings.Repeat("x,", 5000), ",") + "]}\n" + strings.Repeat("  - *s\n", 5000)
	for name, tc := range map[string]struct {
		src  string
		want []string
	}{
		"merge keys": {b.String(), []string{"excessive_aliasing@"}},
		"lists":      {lists, []string{"too_many_stages@stages"}},
	} {
		_, ps := Parse([]byte(tc.src))
		if got := summary(ps); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q", name, got)
		}
	}
}
