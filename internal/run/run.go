// Package run is Core's side of the runner protocol (spec pipelines.md
// "Running tickets", "Recovery and stuck stages"). A run is one fresh agent
// session for one step of a flow's agent stage. The flow engine creates runs
// (queued) with Create, and cancels them with Service.Cancel: each is the
// part of a transition that the flow engine writes within its own. Runner
// processes, authenticated by runner tokens, register and lease queued
// runs; each lease issues a run token scoped to that one run, with which the
// session heartbeats, reports its outcome, asks questions and finishes. A
// run that reaches a final status (succeeded, failed, cancelled) enqueues the
// jobs of its finish hook (Config.OnFinish: the flow engine's
// flow.run_finished) in the same batch, so the flow engine's reaction cannot
// be lost. Runs whose heartbeats stop for longer than the grace period are
// failed by SweepSilent.
//
// Every change is one transition batch with its event (entity type run or
// runner). Liveness pings (runs.heartbeat_at, runners.last_seen_at) are
// operational columns, not tracked changes: they are written without an
// event and without a version bump, so that they never make a tracked change
// lose its optimistic race.
package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Run statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = runproto.StatusSucceeded // the final statuses are the runner protocol's
	StatusFailed    = runproto.StatusFailed
	StatusCancelled = runproto.StatusCancelled
	// StatusInterrupted: the session ended because of infrastructure
	// (Reason says what), not of the agent: the flow runs the stage again
	// without spending an iteration.
	StatusInterrupted = runproto.StatusInterrupted
)

// Why a run was interrupted (Run.Reason): the runner protocol's reasons.
const (
	ReasonRunnerRestart = runproto.ReasonRunnerRestart
	ReasonRunnerLost    = runproto.ReasonRunnerLost
	ReasonRunnerDrain   = runproto.ReasonRunnerDrain
	ReasonKillSwitch    = runproto.ReasonKillSwitch
	ReasonSandboxStart  = runproto.ReasonSandboxStart
	ReasonProviderLimit = runproto.ReasonProviderLimit
)

// Outcomes a session reports.
const (
	OutcomeDone    = "done"
	OutcomeFailed  = "failed"
	OutcomeBlocked = "blocked"
)

// Permissions of the runner protocol's routes (shown in the OpenAPI
// document). No role grants them: PermRunner needs a runner token,
// PermRun the run token of the run in the path.
const (
	PermRunner access.Permission = "runner"
	PermRun    access.Permission = "run"
)

// Run is one agent session for one flow step, as stored in the runs table.
type Run struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	ProjectID      string `json:"project_id"`
	ItemID         string `json:"item_id"`
	Item           string `json:"item,omitempty"` // the item's key (reads fill it in)
	FlowID         string `json:"flow_id"`
	Stage          string `json:"stage"`
	Iteration      int    `json:"iteration"`
	Step           int    `json:"step"`
	Adapter        string `json:"adapter"`
	// Model is the model that served the session, as its runner reported
	// from the CLI's output; until then (or when it could not tell) the
	// model the stage named ("": the adapter's default).
	Model string `json:"model"`
	// StageModel is the model the stage named ("": the adapter's
	// default, as the runner's configuration sets it): what the session
	// is told to use.
	StageModel string `json:"stage_model"`
	// UsedModel is the model the runner reported ("": not yet, or not
	// known).
	UsedModel        string          `json:"-"`
	Instructions     string          `json:"instructions"`
	Skills           []string        `json:"skills"`    // allowed skill names; empty: all
	Artifacts        json.RawMessage `json:"artifacts"` // ticket, previous report, answered questions
	Status           string          `json:"status"`
	RunnerID         string          `json:"runner_id"`
	TokenID          string          `json:"-"`       // the run token of the current lease
	Outcome          string          `json:"outcome"` // done, failed, blocked; "" before a report
	Report           string          `json:"report"`
	BlockingQuestion bool            `json:"blocking_question"`
	ExitStatus       *int            `json:"exit_status"`
	Error            string          `json:"error"`
	// Reason is why an interrupted run was interrupted (one of
	// runproto.Reasons; "" for any other status). While a running run's
	// cancellation is requested, it is the interruption that asked it
	// (kill_switch), "" for a plain cancellation.
	Reason string `json:"reason"`
	// RetryAt: when the provider said its limit resets, for a run
	// interrupted with provider_limit (omitted: it did not say, or another
	// status or reason).
	RetryAt *time.Time     `json:"retry_at,omitempty"`
	Usage   runproto.Usage `json:"usage"`
	// BranchAhead is how many commits the ticket's branch had ahead of the
	// default branch once the session's work was pushed, as its runner
	// reported (nil: not reported).
	BranchAhead     *int       `json:"branch_ahead,omitempty"`
	CancelRequested bool       `json:"cancel_requested"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	HeartbeatAt     *time.Time `json:"heartbeat_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	UpdatedAt       time.Time  `json:"updated_at"`
	Version         int64      `json:"version"`
}

// IsFinal reports whether status is final: succeeded, failed, cancelled
// or interrupted.
func IsFinal(status string) bool {
	return status == StatusSucceeded || status == StatusFailed || status == StatusCancelled || status == StatusInterrupted
}

// FinalSQL lists the final statuses for an SQL IN clause.
const FinalSQL = `('succeeded', 'failed', 'cancelled', 'interrupted')`

// model is what Run.Model shows: the model used when known, else the
// stage's.
func (r *Run) model() string {
	if r.UsedModel != "" {
		return r.UsedModel
	}
	return r.StageModel
}

// Final reports whether the run has reached a final status.
func (r *Run) Final() bool { return IsFinal(r.Status) }

// FinishHook returns the jobs to enqueue, in the same batch, with a run
// that reaches a final status (r as it is then): the flow engine's reaction
// (flow.OnRunFinished), which thus cannot be lost.
type FinishHook func(r Run) []job.Spec

// Insert returns the statement that creates r as a queued run (Create adds
// its event). The caller
// sets ID (transition.NewID()), OrganizationID, ProjectID, ItemID, FlowID,
// Stage, Iteration, Step, Adapter, StageModel, Instructions, Skills and
// Artifacts; status, times, usage and version are set here. The statement
// is INSERT … ON CONFLICT DO NOTHING: the unique (flow_id, step) index makes
// creating a step's run twice a no-op. Put it in Transition.Guarded, so that
// a conflict aborts the batch (with its run.created event) as a lost race,
// and the re-read finds the existing run with ForFlowStep.
func Insert(r Run, now time.Time) store.Statement {
	skills := r.Skills
	if skills == nil {
		skills = []string{}
	}
	sk, _ := json.Marshal(skills)
	artifacts := string(r.Artifacts)
	if len(r.Artifacts) == 0 {
		artifacts = "{}"
	}
	at := now.UnixMilli()
	return store.Stmt(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model,
instructions, skills, artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error,
input_tokens, output_tokens, cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, 0, 0, 0, ?, NULL, NULL, NULL, ?, 1)
ON CONFLICT DO NOTHING`,
		r.ID, r.OrganizationID, r.ProjectID, r.ItemID, r.FlowID, r.Stage, r.Iteration, r.Step, r.Adapter, r.StageModel,
		r.Instructions, string(sk), artifacts, at, at)
}

// newEvent builds an event of run r (payloads.go).
func newEvent(r Run, actor event.Actor, p event.Payload) event.Event {
	return event.Of(actor, r.OrganizationID, r.ProjectID, r.ID, p)
}

// Create is the part of a transition that creates r as a queued run (see
// Insert) with its run.created event, by actor.
func Create(r Run, actor event.Actor, now time.Time) transition.Transition {
	return transition.Transition{
		Events: []event.Event{newEvent(r, actor, RunCreated{ItemID: r.ItemID, FlowID: r.FlowID, Stage: r.Stage,
			Iteration: r.Iteration, Step: r.Step, Adapter: r.Adapter, Model: r.StageModel})},
		Guarded: []store.Statement{Insert(r, now)}, // ON CONFLICT DO NOTHING must not have conflicted
	}
}

// Cancel is the part of a transition that cancels r as read: a queued run
// is cancelled at once (event run.cancelled, with the finish hook's jobs:
// it reached a final status), a running one gets cancel_requested (event
// run.cancel_requested): its runner learns it at the next heartbeat and
// finishes the run as cancelled. Each of its guarded statements must
// change a row (guarded by r's version and status). A final run, or one
// whose cancellation was requested already, needs nothing (ok=false, an
// empty part). The event's actor is the system.
func (s *Service) Cancel(r Run, reason string, now time.Time) (part transition.Transition, ok bool) {
	at := now.UnixMilli()
	switch {
	case r.Status == StatusQueued:
		version := r.Version
		r.Status, r.Error, r.FinishedAt, r.UpdatedAt, r.Version = StatusCancelled, reason, &now, now, r.Version+1
		return transition.Transition{
			Events: []event.Event{newEvent(r, event.System, RunCancelled{Status: StatusCancelled, Reason: reason,
				FlowID: r.FlowID, Step: r.Step})},
			Guarded: []store.Statement{store.Stmt(`UPDATE runs SET status = 'cancelled', error = ?, finished_at = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'queued'`, nullable(reason), at, at, r.ID, version)},
			Jobs: s.finished(r),
		}, true
	case r.Status == StatusRunning && !r.CancelRequested:
		return transition.Transition{
			Events: []event.Event{newEvent(r, event.System, RunCancelRequested{Reason: reason})},
			Guarded: []store.Statement{store.Stmt(`UPDATE runs SET cancel_requested = 1, error = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running'`, nullable(reason), at, r.ID, r.Version)},
		}, true
	}
	return transition.Transition{}, false
}

// Interrupt is Cancel for an interruption of infrastructure (reason, one
// of runproto.Reasons: the kill switch): a queued run is cancelled as
// Cancel does (no session ran, nothing was interrupted), a running one
// gets cancel_requested with reason, so that its finish ends it
// interrupted with that reason (event run.cancel_requested with its
// interruption).
func (s *Service) Interrupt(r Run, reason, why string, now time.Time) (part transition.Transition, ok bool) {
	if r.Status != StatusRunning || r.CancelRequested {
		return s.Cancel(r, why, now)
	}
	at := now.UnixMilli()
	return transition.Transition{
		Events: []event.Event{newEvent(r, event.System, RunCancelRequested{Reason: why, Interruption: reason})},
		Guarded: []store.Statement{store.Stmt(`UPDATE runs SET cancel_requested = 1, error = ?, reason = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running'`, nullable(why), reason, at, r.ID, r.Version)},
	}, true
}

func nullableInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

const runColumns = `r.id, r.organization_id, r.project_id, r.item_id, i.key, r.flow_id, r.stage, r.iteration, r.step, r.adapter, r.model,
r.instructions, r.skills, r.artifacts, r.status, COALESCE(r.runner_id, ''), COALESCE(r.token_id, ''), COALESCE(r.outcome, ''),
COALESCE(r.report, ''), r.blocking_question, r.exit_status, COALESCE(r.error, ''), COALESCE(r.reason, ''), COALESCE(r.retry_at, 0), r.input_tokens, r.output_tokens,
r.cache_read_tokens, r.cache_write_tokens, r.cost_micros, r.branch_ahead, COALESCE(r.used_model, ''),
r.cancel_requested, r.created_at, COALESCE(r.started_at, 0), COALESCE(r.heartbeat_at, 0), COALESCE(r.finished_at, 0),
r.updated_at, r.version`

const runFrom = ` FROM runs r JOIN items i ON i.id = r.item_id`

func scanRun(rows *store.Rows, i int) (Run, error) {
	var r Run
	var skills string
	var exit, ahead sql.NullInt64
	var cost, retryAt, created, started, heartbeat, finished, updated int64
	if err := rows.Scan(i, &r.ID, &r.OrganizationID, &r.ProjectID, &r.ItemID, &r.Item, &r.FlowID, &r.Stage, &r.Iteration, &r.Step,
		&r.Adapter, &r.StageModel, &r.Instructions, &skills, &r.Artifacts, &r.Status, &r.RunnerID, &r.TokenID, &r.Outcome, &r.Report,
		&r.BlockingQuestion, &exit, &r.Error, &r.Reason, &retryAt, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CacheReadTokens,
		&r.Usage.CacheWriteTokens, &cost, &ahead, &r.UsedModel, &r.CancelRequested,
		&created, &started, &heartbeat, &finished, &updated, &r.Version); err != nil {
		return r, fmt.Errorf("scan run: %w", err)
	}
	if err := json.Unmarshal([]byte(skills), &r.Skills); err != nil {
		return r, fmt.Errorf("run %s skills: %w", r.ID, err)
	}
	if r.Skills == nil {
		r.Skills = []string{}
	}
	if exit.Valid {
		n := int(exit.Int64)
		r.ExitStatus = &n
	}
	if ahead.Valid {
		n := int(ahead.Int64)
		r.BranchAhead = &n
	}
	r.Usage.CostUSD = fromMicros(cost)
	r.Model = r.model()
	r.CreatedAt, r.UpdatedAt = store.Time(created), store.Time(updated)
	r.StartedAt, r.HeartbeatAt, r.FinishedAt = store.OptionalTime(started), store.OptionalTime(heartbeat), store.OptionalTime(finished)
	r.RetryAt = store.OptionalTime(retryAt)
	return r, nil
}

func toMicros(usd float64) int64  { return int64(math.Round(usd * 1e6)) }
func fromMicros(m int64) float64  { return float64(m) / 1e6 }
func runNotFound(id string) error { return apperr.New(apperr.NotFound, "run %q not found", id) }
func scopeOf(runID string) string { return "run:" + runID }
func actorOf(runID string) event.Actor {
	return event.Actor{Kind: event.ActorService, Sub: scopeOf(runID)}
}

func queryRuns(ctx context.Context, q store.Store, where string, args ...any) ([]Run, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+runFrom+` WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return store.ScanAll(rows, scanRun)
}
