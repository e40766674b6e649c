//go:build linux

package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// Core down while a session runs — restarting behind a proxy (503) or
// not answering at all — disturbs nothing: the session goes on, and its
// runner tries its heartbeats, log, usage and finish again with a bounded
// backoff until Core is back. A call Core applied whose answer was lost
// is sent again and changes nothing more.

// requestsTo counts the runner's calls to the run route kind ("finish",
// "log", "heartbeat", "usage") of run, and how many Core answered 2xx.
func requestsTo(w *loopWorld, run *fcRun, kind string) (all, ok int) {
	for _, r := range w.core.allRequests() {
		if r.Path == "/api/v1/runs/"+run.ID+"/"+kind {
			all++
			if r.Status >= 200 && r.Status < 300 {
				ok++
			}
		}
	}
	return all, ok
}

func TestCoreDownWhileASessionRuns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		down int
	}{{"503", 503}, {"unreachable", unreachable}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newLoopWorld(t)
			gate := filepath.Join(w.root, "go")
			run := w.enqueueDone()
			// The session reports, then works until the test lets it end.
			w.start(w.scripted(say(initLine, reportCall, reportTaken) +
				"while [ ! -e " + gate + " ]; do sleep 0.02; done\n" + say(resultLine)))
			w.core.wait("the report's lines in the log", func() bool { return strings.Contains(string(run.Log), "toolu_1\",\"content\"") })
			w.core.setDown(c.down)
			// Five minutes of heartbeats into an outage: the session goes on.
			for range 30 {
				w.clk.Advance(10 * time.Second)
				time.Sleep(5 * time.Millisecond)
			}
			if got := w.core.snapshot(run); len(got.Finishes) != 0 || got.Status != "running" {
				t.Fatalf("the session ended during Core's outage: %+v", got.Finishes)
			}
			if strings.Contains(w.logs.String(), "no longer this runner's") {
				t.Fatal("the runner gave the session up during Core's outage")
			}
			// It ends while Core is still down: its log's end is tried
			// again and again, the finish waits for it (a finished run's
			// log takes nothing more).
			logsBefore, _ := requestsTo(w, run, "log")
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			w.advanceUntil(t, "log tries", func() bool { n, _ := requestsTo(w, run, "log"); return n > logsBefore })
			before, _ := requestsTo(w, run, "log")
			for range 300 { // five more minutes of outage, a second at a time
				w.clk.Advance(time.Second)
				time.Sleep(2 * time.Millisecond)
			}
			tries, _ := requestsTo(w, run, "log")
			tries -= before
			// Backoff from 1 s doubling to 30 s: about 13 tries in 5 min,
			// not 300 (one a second), and not none.
			if tries < 5 || tries > 20 {
				t.Errorf("%d log tries in 5 min of outage, want a bounded backoff (5 … 20)", tries)
			}
			if n, _ := requestsTo(w, run, "finish"); n != 0 {
				t.Errorf("%d finishes before the log's end reached Core", n)
			}
			// Core is back, but the first log chunk and the first finish
			// it applies lose their answers: both are sent again.
			w.core.update(func() { w.core.loseAnswers["log"], w.core.loseAnswers["finish"] = 1, 1 })
			w.core.setDown(0)
			w.advanceUntil(t, "a finish Core answered", func() bool { _, ok := requestsTo(w, run, "finish"); return ok >= 1 })
			w.advanceUntil(t, "the session over", func() bool { return w.core.snapshot(run).Over })
			got := w.core.snapshot(run)
			if len(got.Finishes) != 2 || got.Status != runproto.StatusSucceeded {
				t.Fatalf("run %s, finishes %+v: want the finish applied, its answer lost, sent again", got.Status, got.Finishes)
			}
			if f := got.Finishes[1]; f.ExitStatus != 0 || f.Error != "" || f.Interrupted != "" || f.Usage == nil || *f.Usage != resultUsage {
				t.Errorf("finish %+v", f)
			}
			// The log holds each line once, the repeated chunk not twice.
			for _, line := range []string{initLine, reportTaken, `"type":"result"`} {
				if n := strings.Count(string(got.Log), line); n != 1 {
					t.Errorf("the log holds %q %d times, want once:\n%s", line, n, got.Log)
				}
			}
		})
	}
}

// A run Core has ended (here: given up while its runner was silent)
// answers the run's heartbeat 409 "…, not running": the runner stops the
// session and its heartbeats at the first one, instead of logging the
// 409 every 10 s.
func TestHeartbeatOfAnEndedRunStops(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.start(w.options())
	run := w.running()
	w.core.giveUp(run)
	w.clk.Advance(10 * time.Second)
	got := w.core.finished(run)
	if f := got.Finishes[0]; !strings.Contains(f.Error, "the run has ended in Core") {
		t.Errorf("finish %+v", f)
	}
	for range 6 {
		w.clk.Advance(10 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if all, _ := requestsTo(w, run, "heartbeat"); all != 1 {
		t.Errorf("%d run heartbeats, want one (answered 409, then none)", all)
	}
	if n := strings.Count(w.logs.String(), "run heartbeat failed"); n != 0 {
		t.Errorf("the 409 logged %d times as a failure", n)
	}
}
