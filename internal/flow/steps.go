package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Register installs the flow engine's job handlers.
func (s *Service) Register(o interface {
	Handle(kind string, h job.Handler)
}) {
	o.Handle(JobEnter, s.handleEnter)
	o.Handle(run.JobRunFinished, s.handleRunFinished)
	o.Handle(JobMerge, s.handleMerge)
	o.Handle(JobResume, s.handleResume)
	o.Handle(JobStop, s.handleStop)
	o.Handle(JobTimeout, s.handleTimeout)
	o.Handle(JobRelease, s.handleRelease)
	o.Handle(JobKill, s.handleKill)
}

// TrackerHooks are the tracker hooks through which answers and people's
// pauses reach the flow engine, as jobs in the same batch as their change.
func (s *Service) TrackerHooks() tracker.Hooks {
	return tracker.Hooks{
		StateChanged: func(it tracker.Item, from, to string) []job.Spec {
			if to != "paused" && to != "cancelled" {
				return nil
			}
			return []job.Spec{{Kind: JobStop, Payload: map[string]any{"item_id": it.ID}, DedupeKey: "flow-stop:" + it.ID}}
		},
		LastBlockingAnswered: func(itemID string) []job.Spec {
			return []job.Spec{{Kind: JobResume, Payload: map[string]any{"item_id": itemID}, DedupeKey: "flow-resume:" + itemID}}
		},
	}
}

// step runs one read-decide-write of a flow step. decide returns a nil
// transition (and no error) when there is nothing to do: the step has
// passed, or the flow moved on. An error — a failed read included — fails
// the job, which is retried with backoff.
func (s *Service) step(ctx context.Context, decide func(ctx context.Context) (*transition.Transition, error)) error {
	_, err := s.Applier.Do(ctx, decide)
	return err
}

// load reads the flow and its ticket.
func (s *Service) load(ctx context.Context, flowID string) (Flow, tracker.Item, error) {
	f, err := s.Get(ctx, flowID)
	if err != nil {
		if apperr.Code(err) == apperr.NotFound {
			return f, tracker.Item{}, job.Permanent(err)
		}
		return f, tracker.Item{}, err
	}
	it, err := s.Tracker.FindItem(ctx, f.ItemID)
	return f, it, err
}

// Stopped returns the transition that stops a flow whose ticket a person
// paused or cancelled, cancelling its active run.
func (s *Service) Stopped(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
	next := f
	next.Status, next.Waiting, next.FinishedAt = StatusStopped, WaitNone, &now
	t := &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, "stopped", &FlowStopped{Reason: fmt.Sprintf("the ticket is %s", it.State), TicketState: it.State})},
		Guarded: []store.Statement{update(f, next, now)},
	}
	if err := s.CancelRun(ctx, t, f, "the flow stopped", now); err != nil {
		return nil, err
	}
	return t, nil
}

// CancelRun adds the cancellation of the flow's active run to t (nothing
// when it is final already or its cancellation was requested).
func (s *Service) CancelRun(ctx context.Context, t *transition.Transition, f Flow, reason string, now time.Time) error {
	if f.RunID == "" {
		return nil
	}
	r, err := s.Runs.Get(ctx, f.RunID)
	if err != nil {
		return err
	}
	if r.Status != run.StatusQueued && r.Status != run.StatusRunning {
		return nil
	}
	cancel, _ := run.Cancel(r, reason, now) // empty when its cancellation was requested already
	t.Add(cancel)
	return nil
}

// stepPayload names the flow step a job was queued for.
type stepPayload struct {
	FlowID string `json:"flow_id"`
	Step   int    `json:"step"`
}

// onFlow runs one step of a flow, read-decide-write: it re-reads the flow
// and its ticket; when current says the step has passed, it does nothing
// (so every handler is idempotent); a ticket that a person paused or
// cancelled stops the flow; otherwise decide writes the step.
func (s *Service) onFlow(ctx context.Context, flowID string, current func(Flow) bool,
	decide func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error)) error {
	return s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, it, err := s.load(ctx, flowID)
		if err != nil {
			return nil, err
		}
		if !current(f) {
			return nil, nil
		}
		now := s.now()
		if it.State != "in_progress" {
			return s.Stopped(ctx, f, it, now)
		}
		return decide(ctx, f, it, now)
	})
}

// handleEnter enters the stage of a step: an agent stage creates its run,
// a human stage waits for an approval, a merge stage starts checking the
// pull request.
func (s *Service) handleEnter(ctx context.Context, j *job.Job) error {
	var p stepPayload
	if err := j.Decode(&p); err != nil {
		return err
	}
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InEnter) }
	return s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		stage, ok := f.Definition.Stage(f.Stage)
		if !ok {
			return nil, job.Permanent(fmt.Errorf("flow %s: stage %q is not in its pipeline", f.ID, f.Stage))
		}
		// While the project or platform is paused, a flow waits before
		// entering its next stage.
		if why, err := s.pauseReason(ctx, f.ProjectID); err != nil {
			return nil, err
		} else if why != "" {
			return s.wait(f, WaitPause, why, now), nil
		}
		// An agent stage starts only within budget.
		if stage.Kind == pipeline.KindAgent {
			v, err := s.gate(ctx, f)
			if err != nil {
				return nil, err
			}
			switch v.Kind {
			case budget.TicketSpent:
				q := fmt.Sprintf("%s: %s. Raise the project's ticket budget, then answer to run stage %s.", it.Key, v.Reason, f.Stage)
				return s.waitForAnswer(f, it, now, v.Reason, &q)
			case budget.DaySpent:
				return s.wait(f, WaitBudget, v.Reason, now), nil
			}
		}
		next := f
		st := Entry(stage.Kind)
		next.Status, next.Waiting, next.RunID = st.Status, st.Waiting, ""
		started := &StageStarted{Kind: stage.Kind, Waiting: st.Waiting}
		var parts []transition.Transition // what entering the stage starts
		switch stage.Kind {
		case pipeline.KindAgent:
			r, err := s.newRun(ctx, f, it, stage, now)
			if err != nil {
				return nil, err
			}
			next.RunID = r.ID
			started.Run = r.ID
			parts = append(parts, run.Create(r, System, now), transition.Transition{Jobs: []job.Spec{{Kind: JobTimeout, RunAt: now.Add(stage.Timeout()),
				Payload: map[string]any{"flow_id": f.ID, "step": f.Step}, DedupeKey: fmt.Sprintf("flow:%s:timeout:%d", f.ID, f.Step)}}})
		case pipeline.KindPlatform:
			parts = append(parts, transition.Transition{Jobs: []job.Spec{mergeJob(f, now)}})
		}
		t := &transition.Transition{Events: []event.Event{flowEvent(System, f, "stage_started", started)}}
		return t.Add(parts...).Add(transition.Transition{Guarded: []store.Statement{update(f, next, now)}}), nil
	})
}

// Artifacts are what a run's prompt is built from.
type Artifacts struct {
	Ticket            TicketArtifact     `json:"ticket"`
	Branch            string             `json:"branch"`
	PreviousReport    *ReportArtifact    `json:"previous_report,omitempty"`
	AnsweredQuestions []QuestionArtifact `json:"answered_questions"`
}

// TicketArtifact is the ticket as the agent sees it.
type TicketArtifact struct {
	Key                string `json:"key"`
	Type               string `json:"type"`
	Title              string `json:"title"`
	Description        string `json:"description"`
	AcceptanceCriteria string `json:"acceptance_criteria"`
}

// ReportArtifact is the previous stage's report.
type ReportArtifact struct {
	Stage   string `json:"stage"`
	Outcome string `json:"outcome"`
	Report  string `json:"report"`
}

// QuestionArtifact is an answered question handed over.
type QuestionArtifact struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// Branch is the branch a ticket's work happens on.
func Branch(itemKey string) string { return "ballet/" + itemKey }

func (s *Service) newRun(ctx context.Context, f Flow, it tracker.Item, stage pipeline.Stage, now time.Time) (run.Run, error) {
	a := Artifacts{Ticket: TicketArtifact{Key: it.Key, Type: it.Type, Title: it.Title, Description: it.Description, AcceptanceCriteria: it.AcceptanceCriteria},
		Branch: Branch(it.Key), AnsweredQuestions: []QuestionArtifact{}}
	if f.Outcome != "" || f.Report != "" {
		a.PreviousReport = &ReportArtifact{Stage: f.OutcomeStage, Outcome: f.Outcome, Report: f.Report}
	}
	qs, err := s.Tracker.ListQuestions(ctx, it.ID)
	if err != nil {
		return run.Run{}, err
	}
	for _, q := range qs {
		if q.Answer != nil {
			a.AnsweredQuestions = append(a.AnsweredQuestions, QuestionArtifact{Question: q.Text, Answer: *q.Answer})
		}
	}
	artifacts, _ := json.Marshal(a)
	skills := stage.Skills
	if skills == nil {
		skills = []string{}
	}
	return run.Run{ID: transition.NewID(), OrganizationID: f.OrganizationID, ProjectID: f.ProjectID, ItemID: f.ItemID, FlowID: f.ID,
		Stage: stage.ID, Iteration: f.Iteration, Step: f.Step, Adapter: stage.AdapterOrDefault(), Model: stage.Model,
		Instructions: stage.Instructions, Skills: skills, Artifacts: artifacts, Status: run.StatusQueued,
		CreatedAt: now, UpdatedAt: now, Version: 1}, nil
}

func mergeJob(f Flow, now time.Time) job.Spec {
	return job.Spec{Kind: JobMerge, Payload: map[string]any{"flow_id": f.ID, "step": f.Step, "entered_at": now.UnixMilli()},
		DedupeKey: fmt.Sprintf("flow:%s:merge:%d", f.ID, f.Step)}
}

// handleRunFinished takes the finished run's outcome: the pipeline's next
// target, or — when the run raised a blocking question — a wait for the
// answer without an outcome.
func (s *Service) handleRunFinished(ctx context.Context, j *job.Job) error {
	var p struct {
		FlowID string `json:"flow_id"`
		RunID  string `json:"run_id"`
	}
	if err := j.Decode(&p); err != nil {
		return err
	}
	current := func(f Flow) bool { return f.RunID == p.RunID && Accepts(f.State(), InRunFinished) }
	return s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		t, err := s.runFinished(ctx, f, it, p.RunID, now)
		if t != nil {
			// The run is over: its stage's timeout job has nothing left to do.
			t.Statements = append(t.Statements, store.Stmt(`UPDATE jobs SET status = 'done', finished_at = ?, updated_at = ?
WHERE dedupe_key = ? AND status = 'pending'`, now.UnixMilli(), now.UnixMilli(), fmt.Sprintf("flow:%s:timeout:%d", f.ID, f.Step)))
		}
		return t, err
	})
}

// runFinished decides what a finished run means for its flow.
func (s *Service) runFinished(ctx context.Context, f Flow, it tracker.Item, runID string, now time.Time) (*transition.Transition, error) {
	r, err := s.Runs.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.BlockingQuestion {
		open, err := s.Tracker.OpenBlockingQuestions(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		if open > 0 {
			return s.waitForAnswer(f, it, now, "the session asked a blocking question", nil)
		}
		return s.resume(f, it, now, "the session's blocking question was answered while it ran")
	}
	outcome, report := r.Outcome, r.Report
	if r.Status != run.StatusSucceeded {
		// A stage whose run failed while over budget waits, instead of
		// failing.
		if v, err := s.gate(ctx, f); err != nil {
			return nil, err
		} else if v.Kind != budget.OK {
			return s.wait(f, WaitBudget, "the session failed while over budget: "+v.Reason, now), nil
		}
	}
	switch {
	case r.Status == run.StatusCancelled:
		outcome, report = pipeline.OutcomeFailed, "the session was cancelled"
	case r.Status != run.StatusSucceeded || outcome == "":
		outcome = pipeline.OutcomeFailed
		if report == "" {
			report = "the session failed"
			if r.Error != "" {
				report += ": " + r.Error
			}
		}
	}
	return s.advance(ctx, System, f, it, outcome, report, now)
}

// advance ends the current stage with outcome and moves the flow where the
// pipeline says. The flow's event records actor (the system, or the person
// who decided a human stage); the ticket's moves and questions are the
// system's.
func (s *Service) advance(ctx context.Context, actor event.Actor, f Flow, it tracker.Item, outcome, report string, now time.Time) (*transition.Transition, error) {
	m, err := Advance(f.Definition, f.Stage, f.Iteration, outcome)
	if err != nil {
		return nil, job.Permanent(err)
	}
	next := f
	next.Outcome, next.Report, next.OutcomeStage, next.RunID = outcome, report, f.Stage, ""
	finished := &StageFinished{Outcome: outcome, Report: report, Reason: m.Reason}
	switch m.Kind {
	case MoveNext:
		next.Stage, next.Iteration, next.Step = m.Stage, m.Iteration, f.Step+1
		next.Status, next.Waiting = StatusRunning, WaitNone
		finished.Next, finished.NextIteration = m.Stage, m.Iteration
		return &transition.Transition{
			Events:  []event.Event{flowEvent(actor, f, "stage_finished", finished)},
			Guarded: []store.Statement{update(f, next, now)},
			Jobs:    []job.Spec{enterJob(next)},
		}, nil
	case MoveDone, MoveFailed:
		change, ticketTo := "done", "done"
		next.Status = StatusDone
		if m.Kind == MoveFailed {
			change, ticketTo, next.Status = "failed", "paused", StatusFailed
		}
		next.Waiting, next.FinishedAt = WaitNone, &now
		move, err := tracker.FlowMove(System, it, ticketTo, now)
		if err != nil {
			return nil, err
		}
		t := &transition.Transition{Events: []event.Event{flowEvent(actor, f, change, finished)}, Guarded: []store.Statement{update(f, next, now)}}
		return t.Add(move), nil
	default: // MoveQuestion
		text := fmt.Sprintf("%s: %s. How should %s go on?", it.Key, m.Reason, it.Key)
		if report != "" {
			text += "\n\nThe stage's report:\n" + report
		}
		return s.waitAnswer(actor, next, it, now, "waiting", m.Reason, &text)
	}
}

// waitForAnswer makes the flow wait for an answer (asking question when
// set); the ticket becomes waiting_for_answer.
func (s *Service) waitForAnswer(f Flow, it tracker.Item, now time.Time, reason string, question *string) (*transition.Transition, error) {
	return s.waitAnswer(System, f, it, now, "waiting", reason, question)
}

// Flag records that a flow is stuck (flow.stuck with the reason), raises a
// blocking question on the ticket and makes the flow wait for an answer.
func (s *Service) Flag(f Flow, it tracker.Item, now time.Time, reason string) (*transition.Transition, error) {
	q := fmt.Sprintf("%s is stuck: %s. Answer to run stage %s again (or pause or cancel the ticket).", it.Key, reason, f.Stage)
	return s.waitAnswer(System, f, it, now, "stuck", reason, &q)
}

// waitAnswer makes the flow wait for an answer: its flow.<change> event
// (recording actor), the blocking question when one is asked (by the
// system), and the ticket's move to waiting_for_answer.
func (s *Service) waitAnswer(actor event.Actor, f Flow, it tracker.Item, now time.Time, change, reason string, question *string) (*transition.Transition, error) {
	next := f
	next.Status, next.Waiting, next.RunID = StatusWaiting, WaitAnswer, ""
	waiting := &FlowWaiting{Waiting: WaitAnswer, Reason: reason, Outcome: f.Outcome}
	var parts []transition.Transition
	if question != nil {
		q, ask := tracker.NewQuestion(System, it, *question, true, now)
		waiting.Question = q.ID
		parts = append(parts, ask)
	}
	if it.State != tracker.StateWaitingForAnswer {
		move, err := tracker.FlowMove(System, it, tracker.StateWaitingForAnswer, now)
		if err != nil {
			return nil, err
		}
		parts = append(parts, move)
	}
	t := &transition.Transition{Events: []event.Event{flowEvent(actor, f, change, waiting)}, Guarded: []store.Statement{update(f, next, now)}}
	return t.Add(parts...), nil
}

// resume runs the same stage again in a new session, with the answered
// questions handed over.
func (s *Service) resume(f Flow, it tracker.Item, now time.Time, reason string) (*transition.Transition, error) {
	next := f
	next.Status, next.Waiting, next.RunID, next.Step = StatusRunning, WaitNone, "", f.Step+1
	t := &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, "resumed", &FlowResumed{Reason: reason})},
		Guarded: []store.Statement{update(f, next, now)},
		Jobs:    []job.Spec{enterJob(next)},
	}
	if it.State == tracker.StateWaitingForAnswer {
		move, err := tracker.FlowMove(System, it, tracker.StateInProgress, now)
		if err != nil {
			return nil, err
		}
		t.Add(move)
	}
	return t, nil
}

// handleResume resumes a flow waiting for an answer once no blocking
// question of its ticket is open.
func (s *Service) handleResume(ctx context.Context, j *job.Job) error {
	var p struct {
		ItemID string `json:"item_id"`
	}
	if err := j.Decode(&p); err != nil {
		return err
	}
	return s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, ok, err := s.active(ctx, p.ItemID)
		if err != nil || !ok || !Accepts(f.State(), InAnswered) {
			return nil, err
		}
		it, err := s.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			return nil, err
		}
		open, err := s.Tracker.OpenBlockingQuestions(ctx, it.ID)
		if err != nil || open > 0 {
			return nil, err
		}
		now := s.now()
		if it.State != "waiting_for_answer" && it.State != "in_progress" {
			return s.Stopped(ctx, f, it, now)
		}
		return s.resume(f, it, now, "the last blocking question was answered")
	})
}

// handleStop stops the active flow of a ticket a person paused or
// cancelled, and cancels its run.
func (s *Service) handleStop(ctx context.Context, j *job.Job) error {
	var p struct {
		ItemID string `json:"item_id"`
	}
	if err := j.Decode(&p); err != nil {
		return err
	}
	return s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, ok, err := s.active(ctx, p.ItemID)
		if err != nil || !ok {
			return nil, err
		}
		it, err := s.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			return nil, err
		}
		if it.State != "paused" && it.State != "cancelled" {
			return nil, nil // resumed meanwhile
		}
		return s.Stopped(ctx, f, it, s.now())
	})
}

// Decide approves (done) or rejects (failed) the human stage a flow waits
// on; the comment becomes the stage report.
func (s *Service) Decide(ctx context.Context, actor event.Actor, itemID string, approve bool, comment string) (Flow, error) {
	var out Flow
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, ok, err := s.active(ctx, itemID)
		if err != nil {
			return nil, err
		}
		input, outcome := InApprove, pipeline.OutcomeDone
		if !approve {
			input, outcome = InReject, pipeline.OutcomeFailed
		}
		if !ok || !Accepts(f.State(), input) {
			return nil, apperr.New(apperr.Conflict, "the flow does not wait for an approval")
		}
		it, err := s.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			return nil, err
		}
		if comment == "" {
			comment = "approved by " + actor.Sub
			if !approve {
				comment = "rejected by " + actor.Sub
			}
		}
		// The decision is the human's: the flow's event carries them.
		t, err := s.advance(ctx, actor, f, it, outcome, comment, s.now())
		if err != nil {
			return nil, err
		}
		out = f
		return t, nil
	})
	if err != nil {
		return Flow{}, err
	}
	f, err := s.Get(ctx, out.ID)
	return f, err
}

// mergePoll is how long a merge stage waits between checks: a tenth of the
// time it has waited so far, between 5 s and 5 min.
func mergePoll(waited time.Duration) time.Duration {
	return min(max(waited/10, 5*time.Second), 5*time.Minute)
}

// handleMerge checks the pull request of a merge stage and acts on the
// project's merge policy: wait (for checks, a review or a human merge),
// merge, or end the stage done or failed.
func (s *Service) handleMerge(ctx context.Context, j *job.Job) error {
	var p struct {
		FlowID    string `json:"flow_id"`
		Step      int    `json:"step"`
		EnteredAt int64  `json:"entered_at"`
	}
	if err := j.Decode(&p); err != nil {
		return err
	}
	f, it, err := s.load(ctx, p.FlowID)
	if err != nil {
		return err
	}
	if f.Step != p.Step || !Accepts(f.State(), InMergeState) {
		return nil
	}
	proj, err := s.Tenancy.FindProject(ctx, f.ProjectID)
	if err != nil {
		return err
	}
	why, err := s.pauseReason(ctx, f.ProjectID)
	if err != nil {
		return err
	}
	var d forge.Decision
	var pr *forge.PullRequest
	if proj.Repository == nil {
		d = forge.Decision{Action: forge.ActionFailed, Reason: "the project has no repository to merge into"}
	} else {
		d, pr, err = s.mergeDecision(ctx, proj, it, f.PullRequest, why == "")
		if err != nil {
			return err
		}
	}
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InMergeState) }
	err = s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		switch d.Action {
		case actionPause:
			return s.wait(f, WaitPause, d.Reason, now), nil
		case forge.ActionDone:
			return s.advance(ctx, System, f, it, pipeline.OutcomeDone, d.Reason, now)
		case forge.ActionFailed:
			return s.advance(ctx, System, f, it, pipeline.OutcomeFailed, d.Reason, now)
		}
		want := f.State()
		if d.Action == forge.ActionWait {
			want = MergeWait(d.Waiting)
		}
		samePR := (pr == nil && f.PullRequest == nil) || (pr != nil && f.PullRequest != nil && *pr == *f.PullRequest)
		if f.State() == want && samePR {
			return nil, nil
		}
		next := f
		next.Status, next.Waiting, next.PullRequest = want.Status, want.Waiting, pr
		return &transition.Transition{
			Events:  []event.Event{flowEvent(System, f, "waiting", &FlowWaiting{Waiting: want.Waiting, Reason: d.Reason, PullRequest: pr})},
			Guarded: []store.Statement{update(f, next, now)},
		}, nil
	})
	if err != nil {
		return err
	}
	if d.Action == forge.ActionDone || d.Action == forge.ActionFailed || d.Action == actionPause {
		return nil
	}
	return job.Snooze(mergePoll(s.Clock.Now().Sub(time.UnixMilli(p.EnteredAt))))
}

// mergeDecision finds or opens the ticket's pull request (keeping the one
// found before, so that a branch a human merged and deleted still counts as
// merged), merges it when the policy allows, and says what the stage does
// next.
// actionPause: the merge would go ahead, but the project or platform is
// paused: the flow waits before merging.
const actionPause = "pause"

func (s *Service) mergeDecision(ctx context.Context, proj tenancy.Project, it tracker.Item, prev *forge.PullRequest, mayMerge bool) (forge.Decision, *forge.PullRequest, error) {
	fg, err := s.Forges(proj.Repository.Forge)
	if err != nil {
		return forge.Decision{}, nil, job.Permanent(err)
	}
	repo := forge.Repo{URL: proj.Repository.URL, DefaultBranch: proj.Repository.DefaultBranch, CredentialsRef: proj.Repository.CredentialsRef}
	branch := Branch(it.Key)
	pr, err := fg.EnsurePullRequest(ctx, repo, branch, it.Key+": "+it.Title, "Opened by Ballet for "+it.Key+".")
	switch {
	case errors.Is(err, forge.ErrBranchNotPushed) && prev != nil:
		pr = *prev // gone since: merged and deleted, or deleted unmerged
	case errors.Is(err, forge.ErrBranchNotPushed):
		d := forge.Decide(forge.Policy(proj.MergePolicy), fg.CanMerge(), forge.State{Branch: branch, Base: repo.DefaultBranch})
		return d, nil, nil
	case err != nil:
		return forge.Decision{}, nil, fmt.Errorf("find the pull request of %s: %w", branch, err)
	}
	st, err := fg.State(ctx, repo, pr)
	if err != nil {
		return forge.Decision{}, nil, fmt.Errorf("read the pull request of %s: %w", branch, err)
	}
	if st.HeadSHA != "" {
		pr.HeadSHA = st.HeadSHA
	}
	d := forge.Decide(forge.Policy(proj.MergePolicy), fg.CanMerge(), st)
	if d.Action == forge.ActionMerge && !mayMerge {
		return forge.Decision{Action: actionPause, Reason: "the pull request is ready, but merging waits for the pause to end"}, &pr, nil
	}
	if d.Action == forge.ActionMerge {
		if err := fg.Merge(ctx, repo, pr); err != nil {
			return forge.Decision{Action: forge.ActionWait, Waiting: WaitChecks, Reason: fmt.Sprintf("the merge did not go through yet: %v", err)}, &pr, nil
		}
		// The next check sees it merged.
	}
	return d, &pr, nil
}

// handleTimeout enforces a stage's timeout: a run still going when it is
// up is cancelled and the flow is flagged.
func (s *Service) handleTimeout(ctx context.Context, j *job.Job) error {
	var p stepPayload
	if err := j.Decode(&p); err != nil {
		return err
	}
	// The step has passed when the run finished in time.
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InRunFinished) }
	return s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		stage, _ := f.Definition.Stage(f.Stage)
		t, err := s.Flag(f, it, now, fmt.Sprintf("stage %s ran longer than its timeout of %s", f.Stage, stage.Timeout()))
		if err != nil {
			return nil, err
		}
		if err := s.CancelRun(ctx, t, f, "the stage timed out", now); err != nil {
			return nil, err
		}
		return t, nil
	})
}
