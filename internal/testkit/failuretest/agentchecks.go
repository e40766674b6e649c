package failuretest

import (
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/runner/proc"
)

// agentChecks are the invariants of the agent tickets that the real
// runner's log and the process table tell.
var agentChecks = []check{
	{name: "agent-run-leased-once", run: checkLeasedOnce,
		guards: "the real runner leases no run twice"},
	{name: "agent-sessions-in-turn", run: checkSessionsInTurn,
		guards: "two sessions of one ticket never run at once (a killed runner's death ends its sessions)"},
	{name: "checkpoint-restored", run: checkCheckpoints,
		guards: "the next session of a stage whose session was killed mid-work after a checkpoint begins from that checkpoint"},
	{name: "no-orphan-agent-process", run: checkOrphans,
		guards: "no agent process outlives its runner's death, nor is left once the runner has stopped"},
}

// checkAgents checks what the real runner's log and the process table say
// about the agent tickets (agentChecks), and counts their sessions and
// the orphans: agent processes alive after their runner's death, found by
// a start's sweep, or alive now that the runner has stopped.
func (s *suite) checkAgents(sn snapshot) []string {
	sessions, _, _, _, swept := s.agents.snapshot()
	for _, ss := range sessions {
		if ss.Restored {
			s.sum.CheckpointsRestored++
		}
		if !ss.Started.IsZero() {
			s.sum.AgentSessions++
		}
	}
	keyOf := map[string]string{}
	for _, it := range sn.items {
		keyOf[it.ID] = it.Key
	}
	for _, r := range sn.runs {
		if projectOf(keyOf[r.ItemID]) != Agents {
			continue
		}
		for _, p := range proc.Find(r.ID) {
			s.orphans = append(s.orphans, fmt.Sprintf("run %s of %s (%s): pid %d (group %d) alive after the runner stopped",
				r.ID, keyOf[r.ItemID], r.Stage, p.PID, p.PGID))
		}
	}
	for _, id := range swept {
		s.orphans = append(s.orphans, fmt.Sprintf("session %s: the runner's start-up sweep killed what it left", id))
	}
	s.sum.Orphans = len(s.orphans)
	return s.runChecks(agentChecks, &endState{sn: sn})
}

func checkLeasedOnce(s *suite, _ *endState, r *report) {
	_, _, _, twice, _ := s.agents.snapshot()
	for _, run := range twice {
		r.dup("run %s was leased twice by the real runner", run)
	}
}

func checkSessionsInTurn(s *suite, _ *endState, r *report) {
	sessions, kills, _, _, _ := s.agents.snapshot()
	// Every start of the runner but the last ended with a kill.
	killedAt := map[int]time.Time{}
	for i, k := range kills {
		killedAt[i+1] = k.At
	}
	ends := map[string]time.Time{} // ticket → when its last session's CLI ended
	last := map[string]string{}    // ticket → its last session's run
	for _, ss := range sessions {
		if ss.Started.IsZero() {
			continue
		}
		if end, ok := ends[ss.Ticket]; ok && ss.Started.Before(end) {
			r.dup("%s: the session of run %s started while that of run %s still ran", ss.Ticket, ss.Run, last[ss.Ticket])
		}
		end := ss.Ended
		if end.IsZero() {
			end = killedAt[ss.Start] // its runner died with it
		}
		ends[ss.Ticket], last[ss.Ticket] = end, ss.Run
	}
}

func checkCheckpoints(s *suite, st *endState, r *report) {
	sessions, _, _, _, _ := s.agents.snapshot()
	status := map[string]string{}
	for _, x := range st.sn.runs {
		status[x.ID] = x.Status
	}
	for i, ss := range sessions {
		if ss.Killed == "" || ss.Checkpoints == 0 || status[ss.Run] == "succeeded" {
			continue
		}
		for _, next := range sessions[i+1:] {
			if next.Ticket != ss.Ticket || next.Stage != ss.Stage || next.Started.IsZero() {
				continue
			}
			if !next.Restored {
				r.bad("CHECKPOINT: %s %s: the session of run %s was killed mid-work (its %s) after %d checkpoints, but the stage's next session "+
					"(run %s) did not begin from the checkpoint", ss.Ticket, ss.Stage, ss.Run, ss.Killed, ss.Checkpoints, next.Run)
			}
			break
		}
	}
}

func checkOrphans(s *suite, _ *endState, r *report) {
	for _, o := range s.orphans {
		r.bad("ORPHAN agent process: %s", o)
	}
}
