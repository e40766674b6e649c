package pipeline

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// stagesYAML is a valid pipeline of n agent stages (done → the next).
func stagesYAML(n int) string {
	var b strings.Builder
	b.WriteString("stages:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: s%d, kind: agent}\n", i)
	}
	return b.String()
}

// TestParseLimits: what makes no sense in a pipeline is refused with one
// problem naming the limit, before it is read.
func TestParseLimits(t *testing.T) {
	skills := func(n int) string {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("skill%d", i)
		}
		return "stages:\n  - id: a\n    kind: agent\n    skills: [" + strings.Join(names, ", ") + "]\n"
	}
	knowledge := func(n int) string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("k%d", i))
		}
		return "stages:\n  - id: a\n    kind: agent\n    knowledge: [" + strings.Join(names, ", ") + "]\n"
	}
	scalars := "stages: [" + strings.TrimSuffix(strings.Repeat("1,", 400_000), ",") + "]\n"
	rows := []struct {
		name, yaml string
		want       []string
	}{
		{"MaxStages stages", stagesYAML(MaxStages), nil},
		{"one stage too many", stagesYAML(MaxStages + 1), []string{"too_many_stages@stages"}},
		{"a list of 400,000 scalars", scalars, []string{"too_many_stages@stages"}},
		{"MaxSkills skills", skills(MaxSkills), nil},
		{"one skill too many", skills(MaxSkills + 1), []string{"too_many_skills@stages[0].skills"}},
		{"MaxKnowledge entries", knowledge(MaxKnowledge), nil},
		{"one knowledge entry too many", knowledge(MaxKnowledge + 1), []string{"too_many_knowledge@stages[0].knowledge"}},
		{"knowledge entry at its limit", "stages:\n  - {id: a, kind: agent, knowledge: [" + strings.Repeat("k", MaxKnowledgeLength) + "]}\n", nil},
		{"knowledge entry too long", "stages:\n  - {id: a, kind: agent, knowledge: [" + strings.Repeat("k", MaxKnowledgeLength+1) + "]}\n", []string{"text_too_long@stages[0].knowledge[0]"}},
		{"knowledge written as a string", "stages:\n  - {id: a, kind: agent, knowledge: conventions/go}\n", []string{"invalid_type@stages[0].knowledge"}},
		{"name at its limit", "stages:\n  - {id: a, kind: agent, name: " + strings.Repeat("é", MaxNameLength) + "}\n", nil},
		{"name too long", "stages:\n  - {id: a, kind: agent, name: " + strings.Repeat("n", MaxNameLength+1) + "}\n", []string{"text_too_long@stages[0].name"}},
		{"model too long", "stages:\n  - {id: a, kind: agent, model: " + strings.Repeat("m", MaxModelLength+1) + "}\n", []string{"text_too_long@stages[0].model"}},
		{"skill too long", "stages:\n  - {id: a, kind: agent, skills: [" + strings.Repeat("s", MaxSkillLength+1) + "]}\n", []string{"text_too_long@stages[0].skills[0]"}},
		{"instructions too long", "stages:\n  - id: a\n    kind: agent\n    instructions: " + strings.Repeat("i", MaxInstructionsBytes+1) + "\n", []string{"text_too_long@stages[0].instructions"}},
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
				t.Fatalf("got %v, want %v", got, want)
			}
			for _, p := range ps {
				if p.Line == 0 || p.Column == 0 {
					t.Errorf("not located: %+v", p)
				}
				if len(p.Message) > 300 {
					t.Errorf("message of %d bytes repeats the value: %.100s…", len(p.Message), p.Message)
				}
			}
		})
	}
	_, ps := Parse([]byte(stagesYAML(MaxStages + 1)))
	if !strings.Contains(ps[0].Message, fmt.Sprint(MaxStages+1)) || !strings.Contains(ps[0].Message, fmt.Sprintf("at most %d", MaxStages)) || ps[0].Line != 2 || ps[0].Column != 3 {
		t.Errorf("too many stages: %s", ps[0])
	}

	// The same from JSON and for a definition built in Go.
	js := `{"stages":[` + strings.TrimSuffix(strings.Repeat("1,", 400_000), ",") + `]}`
	if _, ps := DecodeJSON([]byte(js)); !reflect.DeepEqual(summary(ps), []string{"too_many_stages@stages"}) || ps[0].Line != 1 || ps[0].Column != 11 {
		t.Errorf("JSON: %v", ps)
	}
	d := Definition{Stages: make([]Stage, MaxStages+1)}
	if got := summary(Validate(d)); !reflect.DeepEqual(got, []string{"too_many_stages@stages"}) {
		t.Errorf("Validate: %v", got)
	}
	d = Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Skills: make([]string, MaxSkills+1)}}}
	if got := summary(Validate(d)); !reflect.DeepEqual(got, []string{"too_many_skills@stages[0].skills"}) {
		t.Errorf("Validate: %v", got)
	}
}

// TestLongValuesAreCutInMessages: a message names a long value, it does not
// repeat it (one stage's problems would otherwise repeat its id each time).
func TestLongValuesAreCutInMessages(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	key := long[:1000] // YAML allows implicit keys of up to 1024 characters
	src := "stages:\n  - id: " + long + "\n    kind: " + long + "\n    adapter: " + long + "\n    next: {done: " + long + ", " + key + ": 1}\n    " + key + ": 1\n" +
		"  - {id: " + long + ", kind: agent, skills: [" + long + ", " + long + "]}\n"
	_, ps := Parse([]byte(src))
	if len(ps) < 5 {
		t.Fatalf("problems %v", summary(ps))
	}
	for _, p := range ps {
		if len(p.Message) > 300 {
			t.Errorf("%s: message of %d bytes", p.Code, len(p.Message))
		}
	}
	if got := cut(strings.Repeat("é", 30)); got != strings.Repeat("é", 18)+"..." {
		t.Errorf("cut splits a character: %q", got)
	}
}

// TestProblemsLimited: at most MaxProblems problems, the first in order,
// then one counting the rest.
func TestProblemsLimited(t *testing.T) {
	const n = 250
	var b strings.Builder
	b.WriteString("stages:\n  - {id: a, kind: agent}\n")
	var keys []string
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "k%d: 1\n", i)
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	sort.Strings(keys) // unknown keys order by name
	_, ps := Parse([]byte(b.String()))
	if len(ps) != MaxProblems+1 {
		t.Fatalf("%d problems", len(ps))
	}
	for i, p := range ps[:MaxProblems] {
		if p.Code != CodeUnknownField || p.Path != keys[i] {
			t.Fatalf("problem %d is %s@%s, want unknown_field@%s", i, p.Code, p.Path, keys[i])
		}
	}
	last := ps[MaxProblems]
	if last.Code != CodeTooManyProblems || last.Path != "" || !strings.HasPrefix(last.Message, fmt.Sprintf("and %d more problems", n-MaxProblems)) {
		t.Fatalf("last problem %+v", last)
	}

	// Validate too, and in the same order as when everything is sorted.
	d := Definition{}
	for i := range MaxStages {
		d.Stages = append(d.Stages, Stage{ID: fmt.Sprintf("s%d", i), Kind: "robot", Next: Next{Done: "nowhere"}})
	}
	all := validate(d)
	sortProblems(all)
	got := Validate(d)
	if len(all) != 2*MaxStages || !reflect.DeepEqual(got[:MaxProblems], all[:MaxProblems]) || got[MaxProblems].Message != "and 100 more problems: only the first 100 are reported; fix these first" {
		t.Fatalf("Validate: %d problems, %v", len(got), got[MaxProblems])
	}
}

// TestJSONPositionsLookAtEachByteOnce counts the bytes the position lookup
// looks at: the input's size, not once per value (which took time quadratic
// in the size: 3.5 s for 64 KiB of [1,1,…]).
func TestJSONPositionsLookAtEachByteOnce(t *testing.T) {
	for _, sep := range []string{",", ",\n", " ,\r\n  "} {
		data := []byte(`{"stages":[` + "\n" + strings.TrimSuffix(strings.Repeat("1"+sep, 50_000), sep) + "\n]}")
		j := newJSONReader(data)
		root, err := j.value(0)
		if err != nil {
			t.Fatal(err)
		}
		if j.pos.scanned > len(data) {
			t.Errorf("sep %q: %d bytes looked at for %d of input", sep, j.pos.scanned, len(data))
		}
		// Every position is the one lineCol computes from its offset.
		items := root.Content[1].Content
		if len(items) != 50_000 {
			t.Fatalf("%d items", len(items))
		}
		off := 0
		for i, n := range items {
			off += bytes.IndexByte(data[off:], '1')
			if i%997 == 0 || i == len(items)-1 {
				if line, col := lineCol(data, off); n.Line != line || n.Column != col {
					t.Fatalf("sep %q: item %d at %d:%d, want %d:%d", sep, i, n.Line, n.Column, line, col)
				}
			}
			off++
		}
	}
}

// unreadSkills is MaxStages stages of MaxSkills skills each written as a
// list: every skill is unread, and each is empty to Validate.
func unreadSkills() []byte {
	var b strings.Builder
	b.WriteString("stages:\n")
	for i := range MaxStages {
		fmt.Fprintf(&b, "  - {id: s%d, kind: agent, skills: [%s]}\n", i, strings.TrimSuffix(strings.Repeat("[],", MaxSkills), ","))
	}
	return []byte(b.String())
}

// TestUnreadMatchedByLookup: whether Validate's problem follows from a value
// that could not be read is looked up by path and parents (≤ 5 lookups a
// problem), not by comparing with every unread path (10,000 × 10,000 here).
func TestUnreadMatchedByLookup(t *testing.T) {
	data := unreadSkills()
	root, syntax := parseYAML(data)
	if syntax != nil {
		t.Fatal(syntax)
	}
	r := newReader(false, len(data))
	d, ps := r.decode(root)
	n := len(validate(d))
	if n < MaxStages*MaxSkills || r.lookups > 5*n {
		t.Errorf("%d lookups for %d problems of Validate", r.lookups, n)
	}
	if len(ps) != MaxProblems+1 || ps[0].Code != CodeInvalidType || ps[0].Path != "stages[0].skills[0]" || ps[0].Line != 2 {
		t.Errorf("problems %v", ps[:3])
	}
	for _, p := range ps {
		if p.Code == CodeInvalidSkill {
			t.Fatalf("%s follows from the skill that could not be read", p)
		}
	}
}

func BenchmarkParseUnreadSkills(b *testing.B) {
	data := unreadSkills()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Parse(data)
	}
}
