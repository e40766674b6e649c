package flow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/pipeline"
)

// TestAcceptsEveryPair spells out the machine: every (state, input) pair,
// the illegal ones included.
func TestAcceptsEveryPair(t *testing.T) {
	legal := map[string]bool{
		"running/:enter": true, "running/run:run_finished": true,
		"waiting/approval:approve": true, "waiting/approval:reject": true,
		"waiting/answer:answered":    true,
		"running/checks:merge_state": true, "waiting/review:merge_state": true, "waiting/merge:merge_state": true,
		"waiting/budget:release": true, "waiting/pause:release": true,
		"waiting/provider:limit_passed": true,
	}
	for _, s := range States {
		if Active(s.Status) {
			legal[s.Status+"/"+s.Waiting+":"+InStop] = true
		}
	}
	n := 0
	for _, s := range States {
		for _, in := range Inputs {
			key := s.Status + "/" + s.Waiting + ":" + in
			if got := Accepts(s, in); got != legal[key] {
				t.Errorf("Accepts(%s) = %v, want %v", key, got, legal[key])
			}
			n++
		}
	}
	if n != len(States)*len(Inputs) || n != 117 {
		t.Fatalf("%d pairs", n)
	}
	if Accepts(State{"running", "run"}, "bogus") {
		t.Fatal("an unknown input was accepted")
	}
}

func TestEntry(t *testing.T) {
	for kind, want := range map[string]State{
		pipeline.KindAgent:    {StatusRunning, WaitRun},
		pipeline.KindHuman:    {StatusWaiting, WaitApproval},
		pipeline.KindPlatform: {StatusRunning, WaitChecks},
	} {
		if got := Entry(kind); got != want {
			t.Errorf("Entry(%s) = %v, want %v", kind, got, want)
		}
	}
	if MergeWait(WaitChecks) != (State{StatusRunning, WaitChecks}) || MergeWait(WaitReview) != (State{StatusWaiting, WaitReview}) ||
		MergeWait(WaitMerge) != (State{StatusWaiting, WaitMerge}) {
		t.Fatal("checks occupy a slot (running); review and merge wait for a human")
	}
}

func TestAdvanceOnTheTemplate(t *testing.T) {
	def := pipeline.Template() // implement → review → verify → integrate, max 3
	cases := []struct {
		stage     string
		iteration int
		outcome   string
		want      string
	}{
		{"implement", 1, "done", "next review 1"},
		{"implement", 1, "failed", "question"},
		{"implement", 1, "blocked", "question"},
		{"review", 1, "done", "next verify 1"},
		{"review", 1, "failed", "next implement 2"},
		{"review", 2, "failed", "next implement 3"},
		{"review", 3, "failed", "question"}, // would be iteration 4 of 3
		{"verify", 1, "failed", "next implement 2"},
		{"verify", 1, "done", "next integrate 1"},
		{"integrate", 1, "done", "done"},
		{"integrate", 2, "failed", "next implement 3"},
		{"integrate", 3, "failed", "question"},
		{"integrate", 1, "blocked", "question"},
		// A forward move keeps the iteration it is in: it neither starts a
		// new one nor resets it to the first.
		{"implement", 2, "done", "next review 2"},
		{"implement", 3, "done", "next review 3"},
		{"review", 3, "done", "next verify 3"},
		{"verify", 2, "done", "next integrate 2"},
		{"integrate", 3, "done", "done"}, // the last iteration may still finish
		{"implement", 3, "blocked", "question"},
	}
	for _, c := range cases {
		m, err := Advance(def, c.stage, c.iteration, c.outcome)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got := m.Kind
		if m.Kind == MoveNext {
			got = fmt.Sprintf("next %s %d", m.Stage, m.Iteration)
		}
		if got != c.want || m.Reason == "" {
			t.Errorf("%s/%d %s → %s (%q), want %s", c.stage, c.iteration, c.outcome, got, m.Reason, c.want)
		}
	}
}

// TestAdvanceIterationLimit walks a loop up to max_iterations: every
// iteration up to the limit runs, the one beyond it asks a question whose
// reason names both numbers; a default limit (0) is 3.
func TestAdvanceIterationLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 2, 5} {
		def := pipeline.Definition{MaxIterations: limit, Stages: []pipeline.Stage{
			{ID: "work", Kind: pipeline.KindAgent},
			{ID: "check", Kind: pipeline.KindAgent, Next: pipeline.Next{Failed: "work"}},
		}}
		max := def.MaxIter()
		if limit == 0 && max != 3 {
			t.Fatalf("default limit %d, want 3", max)
		}
		for it := 1; it < max; it++ {
			m, err := Advance(def, "check", it, "failed")
			if err != nil || m.Kind != MoveNext || m.Stage != "work" || m.Iteration != it+1 {
				t.Fatalf("limit %d: check failed in iteration %d → %+v %v, want work in iteration %d", max, it, m, err, it+1)
			}
		}
		m, err := Advance(def, "check", max, "failed")
		want := fmt.Sprintf("would start iteration %d of at most %d", max+1, max)
		if err != nil || m.Kind != MoveQuestion || !strings.Contains(m.Reason, want) || m.Stage != "" || m.Iteration != 0 {
			t.Fatalf("limit %d: check failed in the last iteration → %+v %v, want a question saying %q", max, m, err, want)
		}
	}
}

// TestAdvanceReasons: the reason says which stage ended how.
func TestAdvanceReasons(t *testing.T) {
	def := pipeline.Template()
	for _, c := range []struct{ stage, outcome, want string }{
		{"implement", "done", "stage implement ended done"},
		{"implement", "blocked", "stage implement ended blocked"},
		{"integrate", "done", "stage integrate ended done"},
	} {
		if m, _ := Advance(def, c.stage, 1, c.outcome); m.Reason != c.want {
			t.Errorf("%s %s: reason %q, want %q", c.stage, c.outcome, m.Reason, c.want)
		}
	}
	def.Stages[0].Next.Failed = pipeline.TargetFailed
	if m, _ := Advance(def, "implement", 1, "failed"); m.Reason != "stage implement ended failed, which fails the pipeline" {
		t.Errorf("$failed: reason %q", m.Reason)
	}
}

func TestAdvanceTargets(t *testing.T) {
	def := pipeline.Definition{MaxIterations: 1, Stages: []pipeline.Stage{
		{ID: "a", Kind: pipeline.KindAgent, Next: pipeline.Next{Failed: pipeline.TargetFailed, Blocked: "a"}},
		{ID: "b", Kind: pipeline.KindHuman, Next: pipeline.Next{Failed: "a"}},
	}}
	for _, c := range []struct{ stage, outcome, want string }{
		{"a", "done", "next"}, {"a", "failed", "failed"}, {"a", "blocked", "question"}, // a → a is iteration 2 of 1
		{"b", "done", "done"}, {"b", "failed", "question"}, {"b", "blocked", "question"},
	} {
		m, err := Advance(def, c.stage, 1, c.outcome)
		if err != nil || m.Kind != c.want {
			t.Errorf("%s %s → %+v %v, want %s", c.stage, c.outcome, m, err, c.want)
		}
	}
	// Going back to the same stage is a new iteration too.
	def.MaxIterations = 2
	if m, err := Advance(def, "a", 1, "blocked"); err != nil || m.Kind != MoveNext || m.Stage != "a" || m.Iteration != 2 {
		t.Errorf("a blocked → a with a limit of 2: %+v %v, want a in iteration 2", m, err)
	}
	if _, err := Advance(def, "nope", 1, "done"); err == nil {
		t.Error("an unknown stage was accepted")
	}
	if _, err := Advance(def, "a", 1, "maybe"); err == nil {
		t.Error("an unknown outcome was accepted")
	}
}
