package runner

import (
	"testing"

	"github.com/ballet/ballet/internal/runproto"
)

// A stage's checkpoint is dropped only after a run that ended its stage
// with an outcome: succeeded, with a report, no blocking question pending.
// Every other ending — failed, cancelled, no report, a question the next
// session must answer, a status that is not final — keeps it.
func TestEndedWithOutcome(t *testing.T) {
	for _, status := range []string{runproto.StatusSucceeded, runproto.StatusFailed, runproto.StatusCancelled, "running", "queued", ""} {
		for _, outcome := range []string{"", "done", "failed", "blocked"} {
			for _, blocking := range []bool{false, true} {
				r := runproto.Run{Status: status, Outcome: outcome, BlockingQuestion: blocking}
				want := status == runproto.StatusSucceeded && outcome != "" && !blocking
				if got := endedWithOutcome(r); got != want {
					t.Errorf("status %q, outcome %q, blocking question %v: endedWithOutcome = %v, want %v", status, outcome, blocking, got, want)
				}
			}
		}
	}
}
