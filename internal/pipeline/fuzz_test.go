package pipeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func checkProblems(t *testing.T, ps []Problem) {
	t.Helper()
	for _, p := range ps {
		if p.Code == "" || p.Message == "" {
			t.Fatalf("incomplete problem %+v", p)
		}
	}
	if len(ps) > MaxProblems && (len(ps) != MaxProblems+1 || ps[MaxProblems].Code != CodeTooManyProblems) {
		t.Fatalf("%d problems, more than %d and the one counting the rest", len(ps), MaxProblems)
	}
	if len(ps) > MaxProblems {
		ps = ps[:MaxProblems]
	}
	sorted := slices.Clone(ps)
	sortProblems(sorted)
	if !reflect.DeepEqual(sorted, ps) {
		t.Fatalf("problems not sorted: %v", ps)
	}
}

// checkClean: a definition read without problems validates clean, resolves
// every target and survives Render → Parse unchanged.
func checkClean(t *testing.T, d Definition) {
	t.Helper()
	if ps := Validate(d); len(ps) > 0 {
		t.Fatalf("read without problems, but Validate says %v", ps)
	}
	for _, s := range d.Stages {
		for _, o := range Outcomes() {
			target, err := d.Target(s.ID, o)
			if err != nil || (!IsSpecialTarget(target) && d.Index(target) < 0) {
				t.Fatalf("Target(%s, %s) = %q, %v", s.ID, o, target, err)
			}
		}
	}
	out, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	back, ps := Parse(out)
	if len(ps) > 0 || !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip: %v\n%s\n got %#v\nwant %#v", ps, out, back, d)
	}
	again, _ := Render(back)
	if !bytes.Equal(again, out) {
		t.Fatalf("render not stable:\n%s\n%s", out, again)
	}
}

func addSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	tpl, _ := Render(Template())
	f.Add(tpl)
	js, _ := json.Marshal(Template())
	f.Add(js)
	f.Add([]byte(""))
	f.Add([]byte("stages:\n  - {id: a, kind: agent, next: {done: a}}\n"))
	f.Add([]byte("a: &a {<<: *a}\n"))
	f.Add([]byte("stages: [{id: a, kind: agent, <<: [{name: x}, {model: y}]}]"))
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, ps := Parse(data)
		checkProblems(t, ps)
		if len(ps) == 0 {
			checkClean(t, d)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"stages":[{"id":"a","kind":"agent","id":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, ps := DecodeJSON(data)
		checkProblems(t, ps)
		if len(ps) == 0 {
			checkClean(t, d)
			js, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			back, ps := DecodeJSON(js)
			if len(ps) > 0 || !reflect.DeepEqual(back, d) {
				t.Fatalf("JSON round trip: %v\n%s", ps, js)
			}
		}
	})
}

// FuzzValidate builds a definition from the inputs: one stage per line of
// spec, fields separated by "|": id|kind|name|adapter|model|skills
// (comma-separated)|instructions|action|timeout_minutes|done|failed|blocked.
func FuzzValidate(f *testing.F) {
	f.Add(3, "implement|agent|Implement|||go,docs|Do it.||30|review|$question|\nreview|human||||||||$done|implement|\n")
	f.Add(0, "a|platform||||||merge||$done||")
	f.Add(25, "A|robot|||||||-1|nowhere|$x|\nA|agent|||||||||||")
	f.Add(0, "")
	f.Add(-1, "a|agent||x|m|,,|i|merge|99999|a|a|a\nb|human|n|claude-code|m|s|i|merge|5|$done||")
	f.Fuzz(func(t *testing.T, maxIter int, spec string) {
		d := Definition{MaxIterations: maxIter}
		if spec != "" {
			for _, line := range strings.Split(spec, "\n") {
				v := strings.Split(line, "|")
				for len(v) < 13 {
					v = append(v, "")
				}
				s := Stage{ID: v[0], Kind: v[1], Name: v[2], Adapter: v[3], Model: v[4], Instructions: v[6], Action: v[7],
					Next: Next{Done: v[9], Failed: v[10], Blocked: v[11]}}
				if v[5] != "" {
					s.Skills = strings.Split(v[5], ",")
				}
				if v[12] != "" {
					s.Knowledge = strings.Split(v[12], ",")
				}
				s.TimeoutMinutes, _ = strconv.Atoi(v[8])
				d.Stages = append(d.Stages, s)
			}
		}
		ps := Validate(d)
		checkProblems(t, ps)
		for _, p := range ps {
			if p.Path == "" && p.Code != CodeTooManyProblems {
				t.Fatalf("problem without a path: %+v", p)
			}
		}
		if !reflect.DeepEqual(Validate(d), ps) {
			t.Fatal("Validate is not deterministic")
		}
		if len(ps) == 0 {
			checkClean(t, d)
		}
		// Any definition without invalid UTF-8 renders and reads back.
		if out, err := Render(d); err == nil {
			back, _ := Parse(out)
			if !reflect.DeepEqual(back, d) {
				t.Fatalf("round trip of a definition being edited\n%s\n got %#v\nwant %#v", out, back, d)
			}
		}
	})
}
