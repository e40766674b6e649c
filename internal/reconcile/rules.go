package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// The queries that find what is wrong. Each reads the active flows once
// (flows_status), with indexed lookups per flow (primary keys,
// questions_item); none runs per flow from Go. Which job a flow waits for,
// and its dedupe key, is the flow engine's to say (flow.ExpectedStep,
// flow.StopArgs, flow.ReleaseArgs): the queries return the candidates, and
// which of their keys no pending job holds is then read in one query
// (job.Free).

// stoppedSQL (rule 1): active flows whose ticket left in_progress and
// waiting_for_answer, with the ticket (a flow.stop job a person's pause or
// cancel queued, while still pending, stops the flow itself).
const stoppedSQL = `SELECT f.id, i.id FROM flows f JOIN items i ON i.id = f.item_id
WHERE f.status IN ('running', 'waiting') AND i.state NOT IN ('in_progress', 'waiting_for_answer')`

// stalledSQL (rule 2): runs that a flow waits for, still queued or
// running, and without a tracked change (runs.updated_at: created, leased,
// reported, asked; heartbeats do not count) since before the cutoff. The
// cutoff uses the shortest possible timeout; each stage's own timeout is
// applied in Go.
const stalledSQL = `SELECT f.id, f.stage, r.id, r.updated_at FROM flows f JOIN runs r ON r.id = f.run_id
WHERE f.status = 'running' AND f.waiting = 'run' AND r.status IN ('queued', 'running') AND r.updated_at < ?`

// stepsSQL (rule 3): active flows whose awaited step may be due: those
// in a state in which they wait for a step job (stepsArgs: what they wait
// for then), except one waiting for a run that is not final yet, or for an
// answer while a blocking question of its ticket is open. It reads what the
// awaited step's dedupe key is made of (flows_reconcile covers it).
var stepsSQL = `SELECT f.id, f.item_id, f.step, f.status, COALESCE(f.waiting, '') FROM flows f
WHERE f.status IN ('running', 'waiting') AND COALESCE(f.waiting, '') IN (?` + strings.Repeat(", ?", len(stepsArgs)-1) + `)
  AND (f.waiting IS NOT 'run' OR EXISTS (SELECT 1 FROM runs r WHERE r.id = f.run_id AND r.status IN ` + run.FinalSQL + `))
  AND (f.waiting IS NOT 'answer' OR NOT EXISTS (SELECT 1 FROM questions q WHERE q.item_id = f.item_id AND q.blocking = 1 AND q.answer IS NULL))`

// stepsArgs are what an active flow waits for in the states in which it
// waits for a step job (flow.ExpectedStep): stepsSQL's arguments.
var stepsArgs = func() []any {
	var out []any
	for _, st := range flow.States {
		if _, ok := flow.ExpectedStep(flow.Flow{Status: st.Status, Waiting: st.Waiting}); ok && !slices.Contains(out, any(st.Waiting)) {
			out = append(out, st.Waiting)
		}
	}
	return out
}()

// orphansSQL (rule 4): queued or running runs (whose cancellation was not
// requested yet) that their flow does not wait for.
const orphansSQL = `SELECT r.id FROM runs r LEFT JOIN flows f ON f.id = r.flow_id
WHERE r.status IN ('queued', 'running') AND r.cancel_requested = 0
  AND NOT (f.status IS 'running' AND f.waiting IS 'run' AND f.run_id IS r.id)`

// releaseSQL (rule 5): flows waiting for budget, and flows waiting for a
// pause that has ended (unless their release job is pending: checked in
// Go), with their project.
const releaseSQL = `SELECT f.id, f.waiting, f.project_id FROM flows f WHERE f.status = 'waiting' AND f.waiting = 'budget'
UNION ALL
SELECT f.id, f.waiting, f.project_id FROM flows f JOIN projects p ON p.id = f.project_id
WHERE f.status = 'waiting' AND f.waiting = 'pause' AND p.paused = 0 AND (SELECT paused FROM platform WHERE id = 1) = 0`

// minTimeout is the shortest timeout a stage can have (timeout_minutes ≥ 1).
const minTimeout = time.Minute

// ids reads the first column of a query.
func (r *Reconciler) ids(ctx context.Context, what, q string, args ...any) ([]string, error) {
	rows, err := r.store.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", what, err)
	}
	out := make([]string, rows.Len())
	for i := range out {
		if err := rows.Scan(i, &out[i]); err != nil {
			return nil, fmt.Errorf("find %s: %w", what, err)
		}
	}
	return out, nil
}

// do runs a read-decide-write of a repair; it reports whether it wrote.
func (r *Reconciler) do(ctx context.Context, decide func(ctx context.Context) (*transition.Transition, error)) (bool, error) {
	t, err := r.flows.Applier.Do(ctx, decide)
	return t != nil, err
}

// load reads an active flow and its ticket (ok=false: gone or finished).
func (r *Reconciler) load(ctx context.Context, flowID string) (flow.Flow, tracker.Item, bool, error) {
	f, err := r.flows.Get(ctx, flowID)
	if apperr.Code(err) == apperr.NotFound {
		return f, tracker.Item{}, false, nil
	}
	if err != nil || !flow.Active(f.Status) {
		return f, tracker.Item{}, false, err
	}
	it, err := r.flows.Tracker.FindItem(ctx, f.ItemID)
	return f, it, err == nil, err
}

// attended reports whether a ticket's state lets its flow go on (else rule
// 1 stops the flow).
func attended(it tracker.Item) bool {
	return it.State == tracker.StateInProgress || it.State == tracker.StateWaitingForAnswer
}

// pending reports whether a job with the dedupe key is pending or running.
func (r *Reconciler) pending(ctx context.Context, key string) (bool, error) {
	free, err := r.free(ctx, key)
	return !free[key], err
}

// free returns the keys, of those given, that no pending or running job
// holds (job.Free).
func (r *Reconciler) free(ctx context.Context, keys ...string) (map[string]bool, error) {
	list, err := job.Free(ctx, r.store, keys...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list))
	for _, k := range list {
		out[k] = true
	}
	return out, nil
}

// Rule 1.
func (r *Reconciler) stopFlows(ctx context.Context, rep *Report) error {
	rows, err := r.store.Query(ctx, stoppedSQL)
	if err != nil {
		return fmt.Errorf("find flows of paused or cancelled tickets: %w", err)
	}
	flowIDs, stops := make([]string, rows.Len()), make([]string, rows.Len())
	for i := range flowIDs {
		var itemID string
		if err := rows.Scan(i, &flowIDs[i], &itemID); err != nil {
			return fmt.Errorf("find flows of paused or cancelled tickets: %w", err)
		}
		stops[i] = flow.StopArgs{ItemID: itemID}.DedupeKey()
	}
	free, err := r.free(ctx, stops...)
	if err != nil {
		return err
	}
	var errs []error
	for i, id := range flowIDs {
		if !free[stops[i]] {
			continue // the flow.stop job stops it
		}
		var key, state string
		ok, err := r.do(ctx, func(ctx context.Context) (*transition.Transition, error) {
			f, it, ok, err := r.load(ctx, id)
			if err != nil || !ok || attended(it) {
				return nil, err
			}
			if busy, err := r.pending(ctx, flow.StopArgs{ItemID: it.ID}.DedupeKey()); err != nil || busy {
				return nil, err
			}
			key, state = it.Key, it.State
			return r.stopped(ctx, f, it, r.now())
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("stop flow %s: %w", id, err))
		}
		if ok {
			r.repaired(rep, RuleStopped, "stopped the flow of a ticket that is no longer in progress", "flow", id, "ticket", key, "state", state)
		}
	}
	return errors.Join(errs...)
}

// Rule 2.
func (r *Reconciler) flagStalled(ctx context.Context, rep *Report) error {
	now := r.now()
	rows, err := r.store.Query(ctx, stalledSQL, now.Add(-minTimeout-r.cfg.Slack).UnixMilli())
	if err != nil {
		return fmt.Errorf("find stalled runs: %w", err)
	}
	type cand struct {
		flowID, stage, runID string
		updated              time.Time
	}
	cands := make([]cand, rows.Len())
	for i := range cands {
		var updated int64
		if err := rows.Scan(i, &cands[i].flowID, &cands[i].stage, &cands[i].runID, &updated); err != nil {
			return fmt.Errorf("find stalled runs: %w", err)
		}
		cands[i].updated = time.UnixMilli(updated).UTC()
	}
	flowIDs := make([]string, len(cands))
	for i, c := range cands {
		flowIDs[i] = c.flowID
	}
	defs, err := r.definitions(ctx, flowIDs)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cands {
		stage, _ := defs[c.flowID].Stage(c.stage)
		if !c.updated.Add(stage.Timeout() + r.cfg.Slack).Before(now) {
			continue
		}
		var key, reason string
		ok, err := r.do(ctx, func(ctx context.Context) (*transition.Transition, error) {
			f, it, ok, err := r.load(ctx, c.flowID)
			if err != nil || !ok || !attended(it) || f.State() != (flow.State{Status: flow.StatusRunning, Waiting: flow.WaitRun}) || f.RunID != c.runID {
				return nil, err
			}
			rn, err := r.runs.Get(ctx, c.runID)
			if err != nil || rn.Final() {
				return nil, err
			}
			now := r.now()
			stage, _ := f.Definition.Stage(f.Stage)
			if !rn.UpdatedAt.Add(stage.Timeout() + r.cfg.Slack).Before(now) {
				return nil, nil // it made progress meanwhile
			}
			key = it.Key
			reason = fmt.Sprintf("the session of stage %s made no progress for %s (the stage's timeout is %s, plus %s slack)",
				f.Stage, now.Sub(rn.UpdatedAt).Truncate(time.Second), stage.Timeout(), r.cfg.Slack)
			t, err := r.flag(f, it, now, reason)
			if err != nil {
				return nil, err
			}
			if err := r.cancelRun(ctx, t, f, "the session made no progress within the stage's timeout", now); err != nil {
				return nil, err
			}
			return t, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("flag stalled flow %s: %w", c.flowID, err))
		}
		if ok {
			r.repaired(rep, RuleStalled, "cancelled a stalled run and flagged its flow", "flow", c.flowID, "ticket", key, "run", c.runID, "reason", reason)
		}
	}
	return errors.Join(errs...)
}

// definitions returns the pinned definitions of flows, read once per flow
// (they never change) and kept while the flow has a stalled-run candidate.
func (r *Reconciler) definitions(ctx context.Context, flowIDs []string) (map[string]pipeline.Definition, error) {
	keep := make(map[string]pipeline.Definition, len(flowIDs))
	var missing []string
	for _, id := range flowIDs {
		if d, ok := r.defs[id]; ok {
			keep[id] = d
		} else {
			missing = append(missing, id)
		}
	}
	read, err := r.flows.Definitions(ctx, missing)
	if err != nil {
		return nil, err
	}
	maps.Copy(keep, read)
	r.defs = keep
	return keep, nil
}

// Rule 3.
func (r *Reconciler) repairSteps(ctx context.Context, rep *Report) error {
	rows, err := r.store.Query(ctx, stepsSQL, stepsArgs...)
	if err != nil {
		return fmt.Errorf("find lost steps: %w", err)
	}
	flowIDs, keys := make([]string, 0, rows.Len()), make([]string, 0, rows.Len())
	for i := range rows.Len() {
		// What the awaited step's key is made of (stepsSQL).
		var f flow.Flow
		if err := rows.Scan(i, &f.ID, &f.ItemID, &f.Step, &f.Status, &f.Waiting); err != nil {
			return fmt.Errorf("find lost steps: %w", err)
		}
		if aw, ok := flow.ExpectedStep(f); ok {
			flowIDs, keys = append(flowIDs, f.ID), append(keys, aw.Args.DedupeKey())
		}
	}
	free, err := r.free(ctx, keys...)
	if err != nil {
		return err
	}
	var errs []error
	for i, id := range flowIDs {
		if !free[keys[i]] {
			continue // its job is pending or running
		}
		if err := r.repairStep(ctx, rep, id); err != nil {
			errs = append(errs, fmt.Errorf("repair the step of flow %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// awaited returns the step job flow f waits for when it is due (ok=false:
// f waits for a person, a pause or budget, for a run that is still going,
// or for an open question).
func (r *Reconciler) awaited(ctx context.Context, f flow.Flow) (flow.Awaited, bool, error) {
	aw, ok := flow.ExpectedStep(f)
	switch {
	case !ok:
		return aw, false, nil
	case f.Waiting == flow.WaitRun:
		rn, err := r.runs.Get(ctx, f.RunID)
		if err != nil || !rn.Final() {
			return aw, false, err
		}
	case f.Waiting == flow.WaitAnswer:
		open, err := r.flows.Tracker.OpenBlockingQuestions(ctx, f.ItemID)
		if err != nil || open > 0 {
			return aw, false, err
		}
	}
	return aw, true, nil
}

// repairStep re-reads the flow and its awaited step's newest job: a dead
// job flags the flow; no job (or a done one, while the flow still waits)
// means the step was lost, and its job is queued again.
func (r *Reconciler) repairStep(ctx context.Context, rep *Report, flowID string) error {
	var requeue *store.Statement
	var st flow.Awaited
	var key, reason string
	flagged, err := r.do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		requeue = nil
		f, it, ok, err := r.load(ctx, flowID)
		if err != nil || !ok || !attended(it) {
			return nil, err
		}
		key = it.Key
		st, ok, err = r.awaited(ctx, f)
		if err != nil || !ok {
			return nil, err
		}
		last, found, err := job.Last(ctx, r.store, st.Args.DedupeKey())
		if err != nil {
			return nil, err
		}
		if found && (last.Status == job.StatusPending || last.Status == job.StatusRunning) {
			return nil, nil // not lost
		}
		now := r.now()
		// The resume key is per ticket: only a job queued since the flow
		// began waiting is this wait's.
		if found && last.Status == job.StatusDead && (st.Args.Kind() != flow.JobResume || !last.CreatedAt.Before(f.UpdatedAt)) {
			reason = fmt.Sprintf("%s failed for good", st.What)
			if e := strings.TrimSpace(last.LastError); e != "" {
				if len(e) > 300 {
					e = e[:300] + "…"
				}
				reason += ": " + e
			}
			if last.Failures > 1 {
				reason += fmt.Sprintf(" (%d failures in a row)", last.Failures)
			}
			return r.flag(f, it, now, reason)
		}
		if m, ok := st.Args.(flow.MergeArgs); ok && found {
			// Keep when the stage was entered: it paces the checks.
			var p flow.MergeArgs
			if json.Unmarshal(last.Payload, &p) == nil && p.EnteredAt > 0 {
				m.EnteredAt = p.EnteredAt
				st.Args = m
			}
		}
		// Queued again only while the flow is at the version read: a flow
		// that moved on meanwhile, or a job queued meanwhile under the key,
		// makes it a no-op.
		spec := job.New(st.Args)
		spec.MaxAttempts = r.cfg.MaxAttempts // as the applier gives every job ([jobs] max_attempts)
		stmt, err := spec.InsertWhile(transition.NewID(), now, flow.Unchanged(f))
		if err != nil {
			return nil, err
		}
		requeue = &stmt
		return nil, nil
	})
	if err != nil {
		return err
	}
	if flagged {
		r.repaired(rep, RuleDead, "flagged a flow whose step failed for good", "flow", flowID, "ticket", key, "reason", reason)
		return nil
	}
	if requeue == nil {
		return nil
	}
	res, err := r.store.Exec(ctx, *requeue)
	if err != nil {
		return fmt.Errorf("queue %s again: %w", st.Args.Kind(), err)
	}
	if len(res) == 1 && res[0].RowsAffected == 1 {
		if r.cfg.WakeJobs != nil {
			r.cfg.WakeJobs()
		}
		r.repaired(rep, RuleRequeued, "queued a lost step again", "flow", flowID, "ticket", key, "job", st.Args.Kind(), "dedupe_key", st.Args.DedupeKey())
	}
	return nil
}

// Rule 4.
func (r *Reconciler) cancelOrphans(ctx context.Context, rep *Report) error {
	ids, err := r.ids(ctx, "runs no flow waits for", orphansSQL)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		var key, status string
		ok, err := r.do(ctx, func(ctx context.Context) (*transition.Transition, error) {
			rn, err := r.runs.Get(ctx, id)
			if err != nil || rn.Final() {
				return nil, err
			}
			f, err := r.flows.Get(ctx, rn.FlowID)
			if err != nil && apperr.Code(err) != apperr.NotFound {
				return nil, err
			}
			if err == nil && f.State() == (flow.State{Status: flow.StatusRunning, Waiting: flow.WaitRun}) && f.RunID == rn.ID {
				return nil, nil // its flow waits for it
			}
			cancel, ok := r.runs.Cancel(rn, "no flow waits for this run any more", r.now())
			if !ok {
				return nil, nil
			}
			key, status = rn.Item, rn.Status
			return &cancel, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cancel run %s: %w", id, err))
		}
		if ok {
			r.repaired(rep, RuleOrphaned, "cancelled a run no flow waits for", "run", id, "ticket", key, "status", status)
		}
	}
	return errors.Join(errs...)
}

// Rule 5.
func (r *Reconciler) release(ctx context.Context, rep *Report) error {
	if r.cfg.Release == nil {
		return nil
	}
	rows, err := r.store.Query(ctx, releaseSQL)
	if err != nil {
		return fmt.Errorf("find waiting flows: %w", err)
	}
	type cand struct{ id, waiting, projectID string }
	cands := make([]cand, rows.Len())
	keys := []string{flow.ReleaseArgs{}.DedupeKey()} // the platform's release: every project's
	for i := range cands {
		c := &cands[i]
		if err := rows.Scan(i, &c.id, &c.waiting, &c.projectID); err != nil {
			return fmt.Errorf("find waiting flows: %w", err)
		}
		keys = append(keys, flow.ReleaseArgs{ProjectID: c.projectID}.DedupeKey())
	}
	var free map[string]bool
	if len(cands) > 0 {
		if free, err = r.free(ctx, keys...); err != nil {
			return err
		}
	}
	var errs []error
	for i, c := range cands {
		id, waiting := c.id, c.waiting
		if waiting == flow.WaitPause && (!free[keys[0]] || !free[keys[i+1]]) {
			continue // a release job is pending: it releases the flow
		}
		if waiting == flow.WaitBudget && r.cfg.BudgetOK != nil {
			f, err := r.flows.Get(ctx, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ok, err := r.cfg.BudgetOK(ctx, f)
			if err != nil {
				errs = append(errs, fmt.Errorf("budget of flow %s: %w", id, err))
			}
			if !ok {
				continue
			}
		}
		released, err := r.cfg.Release(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("release flow %s: %w", id, err))
		}
		if released {
			r.repaired(rep, RuleReleased, "released a flow waiting for "+waiting, "flow", id)
		}
	}
	return errors.Join(errs...)
}

// attentionReasons say in a log line what each attention means.
var attentionReasons = map[string]string{
	flow.AttentionNoRunner: "no runner has leased its agent run within [runs] unclaimed_after: is a runner up for this adapter?",
}

// noteAttention logs each flow that has come to need attention, once per
// flow, attention and run (again after a restart or a change of leader),
// and records flow.runner_missing for a flow no runner takes the run of,
// once per run (a guarded write: not again after a restart, nor by
// another instance).
func (r *Reconciler) noteAttention(ctx context.Context, _ *Report) error {
	fs, err := r.flows.NeedingAttention(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(fs))
	var errs []error
	for _, f := range fs {
		key := f.ID + " " + f.Attention + " " + f.RunID
		if r.noted[key] {
			seen[key] = true
			continue
		}
		it, err := r.flows.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			errs = append(errs, fmt.Errorf("flow %s needs attention: %w", f.ID, err)) // noted at the next pass
			continue
		}
		if f.Attention == flow.AttentionNoRunner {
			// Recorded once per queued run (flow.runner_missing: the
			// notifier tells the project's admins); a failed write is
			// tried again at the next pass.
			if _, err := r.flows.NoteRunnerMissing(ctx, f, it.Key); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		seen[key] = true
		r.log.Warn("flow needs attention: "+attentionReasons[f.Attention], "attention", f.Attention, "flow", f.ID, "ticket", it.Key,
			"stage", f.Stage, "run", f.RunID)
	}
	r.noted = seen
	return errors.Join(errs...)
}
