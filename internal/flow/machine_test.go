package flow

import (
	"fmt"
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
	if n != len(States)*len(Inputs) || n != 96 {
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
		{"integrate", 1, "blocked", "question"},
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
	if _, err := Advance(def, "nope", 1, "done"); err == nil {
		t.Error("an unknown stage was accepted")
	}
	if _, err := Advance(def, "a", 1, "maybe"); err == nil {
		t.Error("an unknown outcome was accepted")
	}
}
