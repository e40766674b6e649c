package failuretest

import (
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// The faults the harness causes while it drives: Core killed at each
// pipeline step (fault points armed through BALLET_FAULT, see
// internal/fault), at the Gitea client's points when the tickets get
// there, and at random; the test runner killed mid-run as the tickets
// progress; the rqlite leader killed once. (The real runner's and its
// agent CLIs' kills are in driveAgents.)

// schedule is the kill schedule of a run while drive runs.
type schedule struct {
	end           time.Time // the kill phase ends
	plan          []string  // the fault points to arm, in turn (faultPlan)
	next          int       // the next point of plan
	nextRandom    time.Time // when Core is killed at random, once the plan is armed
	runnerAt      []float64 // the done shares at which the test runner is still to be killed
	runnerRestart time.Time // when the killed test runner starts again (zero: it is not down)
	leader        *rqlitetest.Node
	leaderAt      float64   // the done share at which the rqlite leader is killed
	leaderRestart time.Time // when the killed leader starts again (zero: it is not down)
	forgeLast     bool      // the point armed last is the Gitea client's
	// settled: the tickets settled once and the phases were ended; no
	// phase is extended after that.
	settled bool
}

// minFaultKills is how many kills at fault points a run needs to be
// trusted (checkEnoughHappened).
const minFaultKills = 10

// killingAt says whether the kill phase goes on at now. On a loaded machine
// the Gitea client's points (each armed up to forgeFaultWait) can take most
// of the phase: while fewer than minFaultKills kills at fault points
// happened, it goes on for up to three more KillPhases, until the tickets
// settle.
func (s *suite) killingAt(now time.Time) bool {
	k := &s.sched
	return now.Before(k.end) ||
		!k.settled && s.sum.FaultKills < minFaultKills && now.Before(k.end.Add(3*s.o.KillPhase))
}

// forgingAt says whether the Gitea client's points are armed at now: until
// forgeUntil, and while one of them never fired, for up to two more
// KillPhases, until the tickets settle (the Gitea tickets' CI rounds can
// outlast the phase on a loaded machine).
func (s *suite) forgingAt(now time.Time) bool {
	if s.gitea == nil {
		return false
	}
	return now.Before(s.forgeUntil) ||
		!s.sched.settled && s.giteaPointMissing() && now.Before(s.forgeUntil.Add(2*s.o.KillPhase))
}

func (s *suite) newSchedule(start time.Time) schedule {
	// The runner dies mid-run as the tickets progress, and so does the
	// rqlite leader (once).
	return schedule{end: start.Add(s.o.KillPhase), plan: s.faultPlan(), runnerAt: []float64{0.1, 0.35, 0.6}, leaderAt: 0.3}
}

// faultPlan lists the fault points to arm, each at its k-th hit: two
// rounds over every commit point the scenario passes and the point right
// after a merge by Ballet, the first early (k = 1…4), the second later
// (k = 3…8).
func (s *suite) faultPlan() []string {
	var points []string
	for _, e := range []string{evFlowStarted, evTicketStateChanged, evFlowStageStarted, evRunCreated, evRunStarted, evRunReported,
		evRunFinished, evFlowStageFinished, evFlowWaiting, evFlowDone} {
		points = append(points, commitPoint+e)
	}
	points = append(points, gitforge.FaultMerged)
	var plan []string
	for round := range 2 {
		for _, p := range points {
			plan = append(plan, fmt.Sprintf("%s:%d", p, 1+2*round+s.rng.IntN(4+round)))
		}
	}
	return plan
}

// restart starts Core again with the next fault point armed: the Gitea
// client's next point that is ready, else (in the kill phase) the plan's
// next; once the plan is armed, it picks when the next random kill comes.
func (s *suite) restart(reason string) {
	k := &s.sched
	f := ""
	now := time.Now()
	// The Gitea client's points and the plan's take turns: armed for up
	// to forgeFaultWait each, the forge's alone would fill the kill phase.
	commitNext := s.killingAt(now) && k.next < len(k.plan)
	if s.forgingAt(now) && !(k.forgeLast && commitNext) {
		f = s.nextForgePoint()
	}
	if f == "" && commitNext {
		f, k.next = k.plan[k.next], k.next+1
	}
	k.forgeLast = isForgePoint(f)
	s.approvedArm = 0
	s.logf("core: %s; restart with BALLET_FAULT=%q", reason, f)
	if err := s.core.start(f); err != nil {
		s.t.Fatal(err)
	}
	if f == "" && k.next >= len(k.plan) {
		k.nextRandom = time.Now().Add(time.Duration(1000+s.rng.IntN(2500)) * time.Millisecond)
	}
}

// tendCore restarts Core when it died (at its fault point, or by itself),
// kills it when its armed point did not fire in time, at random, or to arm
// a point of the Gitea client; it reports whether it did any of that.
func (s *suite) tendCore(now time.Time, killing, forging bool) bool {
	t := s.t
	k := &s.sched
	switch {
	case s.core.dead():
		f := s.core.armed()
		if sigkill, how := s.core.killed(); !sigkill {
			// Core stopped by itself: a supervisor (systemd) would
			// start it again, so the harness does, a few times.
			s.sum.CoreExits++
			last := lastLine(tailFile(s.core.logPath, 2000))
			s.exits = append(s.exits, fmt.Sprintf("%s %s: %s", time.Now().Format("15:04:05.000"), how, last))
			if !strings.Contains(last, "start core") || s.sum.CoreExits > 20 {
				t.Fatalf("core exited by itself (%s), not at a fault point:\n%s", how, tailFile(s.core.logPath, 6000))
			}
			time.Sleep(500 * time.Millisecond)
			s.logf("core: exited by itself at start (%s): %s; start again with BALLET_FAULT=%q", how, last, f)
			if err := s.core.start(f); err != nil {
				t.Fatal(err)
			}
			return true
		}
		if f == "" {
			t.Fatalf("core died of SIGKILL without an armed fault point:\n%s", tailFile(s.core.logPath, 6000))
		}
		s.sum.FaultKills++
		s.sum.Fired = append(s.sum.Fired, strings.TrimPrefix(f, commitPoint))
		if isForgePoint(f) {
			s.sum.ForgeKills++
			s.forgeFired[pointOf(f)]++
		}
		s.markKill()
		s.restart("died at fault point " + f)
		return true
	case s.core.armed() != "" && !isForgePoint(s.core.armed()) && (!killing || s.core.since() > s.o.FaultWait),
		isForgePoint(s.core.armed()) && (!forging || s.core.since() > forgeFaultWait):
		f := s.core.armed()
		s.sum.NotFired = append(s.sum.NotFired, strings.TrimPrefix(f, commitPoint))
		if isForgePoint(f) && s.forgeFired[pointOf(f)] == 0 && s.forgeRetries < maxForgeRetries {
			// A point of the Gitea client that never fired gets
			// another turn, after the others.
			s.forgeRetries++
			s.forgePlan = append(s.forgePlan, f)
		}
		s.killCore()
		why := fmt.Sprintf("fault point %s did not fire within %s: killed", f, s.o.FaultWait)
		switch {
		case isForgePoint(f) && forging:
			why = fmt.Sprintf("fault point %s did not fire within %s: killed", f, forgeFaultWait)
		case isForgePoint(f) || !killing:
			why = fmt.Sprintf("fault point %s did not fire before its phase ended: killed", f)
		}
		s.restart(why)
		return true
	case killing && s.core.armed() == "" && k.next >= len(k.plan) && now.After(k.nextRandom):
		s.killCore()
		s.restart("random SIGKILL")
		return true
	case forging && s.core.armed() == "" && s.forgeReadyAny():
		s.killCore()
		s.restart("killed to arm a point of the Gitea client")
		return true
	}
	return false
}

// killCore kills Core with SIGKILL (the harness's kill, not a fault
// point's).
func (s *suite) killCore() {
	if err := s.core.kill(); err != nil {
		s.t.Fatal(err)
	}
	s.sum.RandomKills++
	s.markKill()
}

// markKill remembers the tickets active at a Core kill, to count the ones
// that resumed to done.
func (s *suite) markKill() {
	for k, f := range s.flows {
		if f.Status == "running" || f.Status == "waiting" {
			s.hit[k] = true
		}
	}
}

// tendRunner starts the killed test runner again when its time has come,
// and kills it mid-run (runs in flight) when the tickets have progressed
// to the next share of the schedule.
func (s *suite) tendRunner(now time.Time, killing bool) {
	k := &s.sched
	if s.runner.dead() {
		if k.runnerRestart.IsZero() {
			s.t.Fatalf("the runner exited by itself:\n%s", tailFile(s.runner.logPath, 4000))
		}
		if now.After(k.runnerRestart) {
			s.logf("runner: restart")
			if err := s.runner.start(); err != nil {
				s.t.Fatal(err)
			}
			k.runnerRestart = time.Time{}
		}
		return
	}
	if n := s.runner.inflightRuns(); killing && len(k.runnerAt) > 0 && s.doneShare() >= k.runnerAt[0] && n > 0 {
		if err := s.runner.kill(); err != nil {
			s.t.Fatal(err)
		}
		kills, _ := s.runner.record()
		s.logf("runner: SIGKILL with %d runs in flight: %v", n, kills[len(kills)-1].Runs)
		s.sum.RunnerKills++
		k.runnerAt = k.runnerAt[1:]
		k.runnerRestart = now.Add(time.Duration(300+s.rng.IntN(1500)) * time.Millisecond)
	}
}

// tendLeader kills the rqlite cluster's leader once, when the tickets are
// under way (or half the kill phase has passed), and restarts it 3 s
// later.
func (s *suite) tendLeader(now time.Time, killing bool, start time.Time) {
	k := &s.sched
	switch {
	case k.leader == nil && killing && (s.doneShare() >= k.leaderAt || now.Sub(start) > s.o.KillPhase/2):
		k.leader = s.cluster.Leader(s.t)
		s.logf("rqlite: SIGKILL the leader %s", k.leader.ID)
		s.cluster.Kill(s.t, k.leader)
		s.sum.LeaderKills++
		s.leaders = append(s.leaders, outage{What: "rqlite leader", From: time.Now()})
		k.leaderRestart = now.Add(3 * time.Second)
	case k.leader != nil && !k.leaderRestart.IsZero() && now.After(k.leaderRestart):
		s.logf("rqlite: restart %s", k.leader.ID)
		s.cluster.Restart(s.t, k.leader)
		s.leaders[len(s.leaders)-1].To = time.Now()
		k.leaderRestart = time.Time{}
	}
}
