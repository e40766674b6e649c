package failuretest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Driving: the harness polls every ticket's flow and state through the
// API, plays the humans and runs the kill schedule (faults.go) until every
// ticket has settled, or fails at the deadline with the tickets that did
// not (lost tickets).

type flowView struct {
	Ticket    string `json:"ticket"`
	Pipeline  string `json:"pipeline"`
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Status    string `json:"status"`
	Waiting   string `json:"waiting"`
	Run       string `json:"run"`
	Version   int64  `json:"version"`
}

type itemView struct {
	Key       string   `json:"key"`
	Number    int64    `json:"number"`
	Type      string   `json:"type"`
	State     string   `json:"state"`
	Epic      *string  `json:"epic"`
	BlockedBy []string `json:"blocked_by"`
	Version   int64    `json:"version"`
}

// pollEvery is the pace of the harness's loop: each turn reads every
// flow and item of the projects (poll). Faster only costs the CPU the
// processes under test need.
const pollEvery = 250 * time.Millisecond

// poll reads every flow and item state of both projects (ok=false when
// Core was down).
func (s *suite) poll() bool {
	alive := func() bool { return !s.core.dead() }
	flows := map[string]flowView{}
	states := map[string]string{}
	for _, p := range polled {
		if (p == Agents && s.agents == nil) || (p == OnGitea && s.gitea == nil) {
			continue
		}
		status, b, err := s.api.call(alive, 20*time.Second, AdminToken, "GET", "/api/v1/projects/"+p+"/flows?limit=1000", nil)
		if err != nil || status != 200 {
			s.logf("poll flows of %s: %d %v", p, status, err)
			return false
		}
		var fl struct{ Flows []flowView }
		if err := json.Unmarshal(b, &fl); err != nil {
			s.t.Fatalf("flows: %v: %s", err, b)
		}
		for _, f := range fl.Flows {
			if _, ok := flows[f.Ticket]; !ok { // newest first
				flows[f.Ticket] = f
			}
		}
		after := int64(0)
		for {
			status, b, err := s.api.call(alive, 20*time.Second, AdminToken, "GET", fmt.Sprintf("/api/v1/projects/%s/items?limit=200&after=%d", p, after), nil)
			if err != nil || status != 200 {
				s.logf("poll items of %s: %d %v", p, status, err)
				return false
			}
			var page struct {
				Items     []itemView
				NextAfter *int64 `json:"next_after"`
			}
			if err := json.Unmarshal(b, &page); err != nil {
				s.t.Fatalf("items: %v: %s", err, b)
			}
			for _, it := range page.Items {
				states[it.Key] = it.State
			}
			if page.NextAfter == nil {
				break
			}
			after = *page.NextAfter
		}
	}
	s.flows, s.states = flows, states
	return true
}

// escalated reports whether a polled flow was escalated: it waits for an
// answer (a blocking question, flow.stuck) or failed.
func escalated(f flowView) bool {
	return (f.Status == "waiting" && f.Waiting == "answer") || f.Status == "failed"
}

// blockersOpen lists the blockers of a ticket (its own and its epic's)
// that are neither done nor cancelled in states.
func (s *suite) blockersOpen(tk *ticket, states map[string]string) []string {
	var open []string
	check := func(keys []string) {
		for _, k := range keys {
			if st := states[k]; st != "done" && st != "cancelled" {
				open = append(open, k)
			}
		}
	}
	check(tk.BlockedBy)
	if tk.Epic != "" {
		check(s.byKey[tk.Epic].BlockedBy)
	}
	return open
}

// settled says whether every ticket is done, escalated or held behind an
// escalated (or held) blocker, and how many flows are running.
func (s *suite) settled() (bool, int, []string) {
	running := 0
	for _, f := range s.flows {
		if f.Status == "running" {
			running++
		}
	}
	final := map[string]bool{} // done or escalated
	for _, tk := range s.tickets {
		f, ok := s.flows[tk.Key]
		if ok && (f.Status == "done" || (escalated(f) && !s.willAnswer(tk.Key, f))) {
			final[tk.Key] = true
		}
	}
	var open []string
	for _, tk := range s.tickets {
		if final[tk.Key] || s.isHeld(tk, final, map[string]bool{}) {
			continue
		}
		open = append(open, tk.Key)
	}
	busy := s.agents != nil && s.agents.busy()
	return len(open) == 0 && running == 0 && !busy, running, open
}

// willAnswer reports whether the harness is still to answer the question
// a flow waits for: an agent ticket's, fewer than maxAnswers times.
func (s *suite) willAnswer(key string, f flowView) bool {
	return projectOf(key) == Agents && f.Status == "waiting" && f.Waiting == "answer" && s.answered[key] < maxAnswers
}

// isHeld: a ticket without a flow that is blocked by something escalated
// or itself held.
func (s *suite) isHeld(tk *ticket, final map[string]bool, seen map[string]bool) bool {
	if seen[tk.Key] {
		return false
	}
	seen[tk.Key] = true
	if _, started := s.flows[tk.Key]; started {
		return false
	}
	for _, k := range s.blockersOpen(tk, s.states) {
		b := s.byKey[k]
		if final[k] && s.flows[k].Status != "done" {
			return true
		}
		if b.Type != "epic" && s.isHeld(b, final, seen) {
			return true
		}
	}
	return false
}

// doneShare is the share of tickets whose flow is done, as polled.
func (s *suite) doneShare() float64 {
	n := 0
	for _, f := range s.flows {
		if f.Status == "done" {
			n++
		}
	}
	return float64(n) / float64(len(s.tickets))
}

// drive runs the kill schedule and plays the humans until every ticket has
// settled, and fails with the unsettled tickets at the deadline (a hang
// guard).
func (s *suite) drive() {
	t := s.t
	start := time.Now()
	deadline := start.Add(s.o.Deadline)
	s.sched = s.newSchedule(start)
	if s.gitea != nil {
		// The Gitea client's points are armed when the tickets get there,
		// which may take longer than the kill phase.
		s.forgePlan, s.forgeUntil = s.giteaPlan(), start.Add(2*s.o.KillPhase)
	}
	// Arm the first fault point.
	if err := s.core.kill(); err != nil {
		t.Fatal(err)
	}
	s.sum.RandomKills++
	s.restart("killed to arm the first fault point")
	var settledSince time.Time
	for {
		now := time.Now()
		killing, forging := s.killingAt(now), s.forgingAt(now)
		if now.After(deadline) {
			s.failUnsettled()
			return
		}
		if s.tendCore(now, killing, forging) {
			continue
		}
		s.tendRunner(now, killing)
		if s.agents != nil {
			s.driveAgents(now)
		}
		if s.cluster != nil {
			s.tendLeader(now, killing, start)
		}
		if !s.poll() {
			continue
		}
		s.actAsHumans()
		if s.gitea != nil {
			s.playForge(now)
		}
		ok, running, open := s.settled()
		if ok && s.sched.leaderRestart.IsZero() && s.sched.runnerRestart.IsZero() && s.agentRestart.IsZero() {
			if settledSince.IsZero() {
				settledSince = now
				s.logf("settled (kill phase over: %v)", !killing)
			}
			// Settled for a while: what is still under way (a run's
			// finish, a merge check) has had its chance to move a flow,
			// and the checks read the end state from the database.
			if now.Sub(settledSince) > 3*time.Second {
				if s.core.armed() != "" {
					if err := s.core.kill(); err != nil {
						t.Fatal(err)
					}
					s.sum.RandomKills++
					s.sched.end, s.forgeUntil, s.sched.settled = now, now, true
					s.restart("settled: restart without a fault point")
					continue
				}
				s.logf("settled for 3 s: done driving after %s", time.Since(start).Round(time.Millisecond))
				return
			}
		} else {
			if !settledSince.IsZero() {
				s.logf("unsettled again: %d running, open %v", running, open)
			}
			settledSince = time.Time{}
		}
		time.Sleep(pollEvery) // polling real processes
	}
}

// failUnsettled fails the test with the tickets that neither finished nor
// escalated by the deadline: lost tickets.
func (s *suite) failUnsettled() {
	_, running, open := s.settled()
	var b strings.Builder
	for _, k := range open {
		f, ok := s.flows[k]
		tk := s.byKey[k]
		fmt.Fprintf(&b, "\n  %s (%s) ticket %s, blockers open %v, flow %+v (started: %v)", k, tk.Type, s.states[k], s.blockersOpen(tk, s.states), f, ok)
		status, body, err := s.api.call(nil, 10*time.Second, AdminToken, "GET", "/api/v1/items/"+k+"/events?limit=1000", nil)
		if err == nil && status == 200 {
			var page struct {
				Events []struct {
					Seq     int64
					Type    string
					Payload json.RawMessage
				}
			}
			_ = json.Unmarshal(body, &page)
			for _, e := range page.Events {
				fmt.Fprintf(&b, "\n      seq %d %s %s", e.Seq, e.Type, e.Payload)
			}
		}
	}
	var busy []string
	if s.agents != nil {
		busy = s.agents.unfinished()
	}
	s.t.Fatalf("LOST TICKETS: %d tickets neither done nor escalated after %s (%d flows running; agent sessions without a finish: %v):%s",
		len(open), s.o.Deadline, running, busy, b.String())
}
