package flow_test

import (
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
)

// The interruptions in a row of a stage are counted from the newest run,
// up to the first that was not interrupted, or was another stage's or
// iteration's.
func TestInterruptionStreak(t *testing.T) {
	in := func(stage string, it int) run.Run {
		return run.Run{Status: run.StatusInterrupted, Stage: stage, Iteration: it}
	}
	failed := run.Run{Status: run.StatusFailed, Stage: "implement", Iteration: 1}
	limit := run.Run{Status: run.StatusInterrupted, Reason: run.ReasonProviderLimit, Stage: "implement", Iteration: 1}
	for _, c := range []struct {
		name   string
		latest []run.Run
		want   int
	}{
		{"none", nil, 0},
		{"one", []run.Run{in("implement", 1)}, 1},
		{"three in a row", []run.Run{in("implement", 1), in("implement", 1), in("implement", 1)}, 3},
		{"up to a failure", []run.Run{in("implement", 1), in("implement", 1), failed, in("implement", 1)}, 2},
		{"up to another stage", []run.Run{in("implement", 1), in("review", 1), in("implement", 1)}, 1},
		{"up to another iteration", []run.Run{in("implement", 2), in("implement", 1)}, 1},
		{"newest not interrupted", []run.Run{failed, in("implement", 1)}, 0},
		{"provider limits neither count nor break it", []run.Run{limit, in("implement", 1), limit, limit, in("implement", 1), failed}, 2},
		{"only provider limits", []run.Run{limit, limit, limit, limit, limit}, 0},
	} {
		if got := flow.InterruptionStreak(c.latest, "implement", iterationOf(c.latest)); got != c.want {
			t.Errorf("%s: streak %d, want %d", c.name, got, c.want)
		}
	}
}

// A stage runs again by itself up to max interruptions in a row; the next
// asks; after an answer it gets max more.
func TestRunsAgain(t *testing.T) {
	for _, c := range []struct {
		streak, max int
		want        bool
	}{
		{1, 3, true}, {2, 3, true}, {3, 3, true}, {4, 3, false},
		{5, 3, true}, {7, 3, true}, {8, 3, false},
		{1, 1, true}, {2, 1, false}, {3, 1, true},
	} {
		if got := flow.RunsAgain(c.streak, c.max); got != c.want {
			t.Errorf("RunsAgain(%d, %d) = %v, want %v", c.streak, c.max, got, c.want)
		}
	}
}

// iterationOf is the iteration of the newest run (1 when none).
func iterationOf(latest []run.Run) int {
	if len(latest) == 0 {
		return 1
	}
	return latest[0].Iteration
}
