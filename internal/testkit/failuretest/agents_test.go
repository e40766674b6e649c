package failuretest

import (
	"encoding/json"
	"testing"
)

// TestFollowSeesEveryFinish: the harness waits for the agent runner to be
// idle before it calls the run settled, so each way a session's finish
// ends must count as finished — a run Core gave up meanwhile too ("Core no
// longer takes this run's finish"), or the suite waits for it until its
// deadline and reports lost tickets although none is lost.
func TestFollowSeesEveryFinish(t *testing.T) {
	lines := []struct{ msg, finish string }{
		{"run finished", "taken"},
		{"Core no longer takes this run's finish (it gave the run up meanwhile)", "gone"},
		{"Core refused the run's finish", "refused"},
		{"Core did not take the run's finish in time; it fails the run once its grace has passed", "timed_out"},
	}
	for _, l := range lines {
		a := &agentRunner{sessions: map[string]*agentSession{}, starts: 1}
		logLine := func(v map[string]any) string {
			b, _ := json.Marshal(v)
			return "21:04:03.000 " + string(b)
		}
		a.follow(1, logLine(map[string]any{"msg": "session leased", "run": "r1", "ticket": "AGT-1", "stage": "code"}))
		a.follow(1, logLine(map[string]any{"msg": "session started", "run": "r1"}))
		if !a.busy() {
			t.Fatalf("%s: a started session is not busy", l.finish)
		}
		a.follow(1, logLine(map[string]any{"msg": l.msg, "run": "r1", "finish": l.finish}))
		if a.busy() {
			t.Errorf("after %q the harness still waits for the session: %v", l.msg, a.unfinished())
		}
	}
}
