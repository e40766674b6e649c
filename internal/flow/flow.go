package flow

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/pipeline/versions"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Flow is a ticket's run through its pinned pipeline version.
type Flow struct {
	ID              string
	OrganizationID  string
	ProjectID       string
	ItemID          string
	Pipeline        string
	PipelineVersion int64
	Definition      pipeline.Definition
	Stage           string
	Iteration       int
	MaxIterations   int
	Step            int
	Status          string
	Waiting         string
	RunID           string
	Outcome         string
	Report          string
	OutcomeStage    string // the stage that reported Outcome and Report
	PullRequest     *forge.PullRequest
	// BranchAhead is how many commits the ticket's branch had ahead of the
	// default branch after the latest agent stage, as its runner reported
	// (nil: not known yet).
	BranchAhead *int
	StartedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  *time.Time
	Version     int64
	// Attention is what the flow needs from a person that its status and
	// waiting do not say ("" or one of Attentions), derived when it is read.
	Attention string
	// EscalatedAt is when the approval the flow waits for was escalated to
	// the project's admins, having waited longer than [notify]
	// escalate_after (nil: it waits for no approval, or was not escalated).
	EscalatedAt *time.Time
	// WaitUntil: while the flow waits for the provider (WaitProvider),
	// when it expects the provider's limit to have passed and runs its
	// stage again (nil otherwise).
	WaitUntil *time.Time

	runQueuedAt   int64 // unix ms: when its run was queued, while no runner has leased it (else 0)
	capableSeenAt int64 // unix ms: when a runner that could lease its queued run was last seen (0: none)
	stuck         bool  // flagged by the reconciler, not resumed since (StuckSQL)
	// runnerMissingRun is the queued run whose missing runner was last
	// recorded (flow.runner_missing), "" when none was.
	runnerMissingRun string
}

// State is the flow's machine state.
func (f *Flow) State() State { return State{f.Status, f.Waiting} }

// Forges picks the forge of a repository kind ("git", "gitea", "github").
type Forges func(kind string) (forge.Forge, error)

// Service runs flows.
type Service struct {
	Store     store.Store
	Applier   *transition.Applier
	Clock     clock.Clock
	Log       *slog.Logger
	Tenancy   *tenancy.Service
	Tracker   *tracker.Service
	Pipelines *versions.Service
	Runs      *run.Service
	Forges    Forges
	Budget    *budget.Service // nil: no budgets enforced
	// UnclaimedAfter is how long a flow's run may wait for a runner before
	// the flow needs attention (DefaultUnclaimedAfter when ≤ 0).
	UnclaimedAfter time.Duration
	// RunnerGrace is how recent a runner's last heartbeat must be for it to
	// count as alive ([runs] grace; run.DefaultGrace when ≤ 0).
	RunnerGrace time.Duration
	// Knowledge reads the entries agent stages name (nil: none can be
	// read, so such a stage waits and then asks).
	Knowledge KnowledgeSource
	// KnowledgeWait: how long a stage whose entries cannot be fetched
	// retries, from when it was entered, before its flow asks
	// (DefaultKnowledgeWait when ≤ 0).
	KnowledgeWait time.Duration
	// ProviderWait: how long a stage whose run met a provider limit waits
	// when the provider did not say when it resets, doubled per limit in a
	// row on the credential up to MaxProviderWait ([runs] provider_wait;
	// DefaultProviderWait when ≤ 0).
	ProviderWait time.Duration
	// MaxInterruptions: how many times in a row a stage's run may end
	// interrupted and the stage run again by itself before the flow asks
	// ([runs] max_interruptions; DefaultMaxInterruptions when ≤ 0).
	MaxInterruptions int
}

// DefaultMaxInterruptions is Service.MaxInterruptions' default.
const DefaultMaxInterruptions = 3

// System is the flow engine as an actor.
var System = event.Actor{Kind: event.ActorSystem, Sub: "flow"}

// flowColumns are a flow's own columns: what a step reads of the row it
// changes.
const flowColumns = `id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration, max_iterations, step,
status, COALESCE(waiting, ''), COALESCE(run_id, ''), COALESCE(outcome, ''), COALESCE(report, ''), COALESCE(outcome_stage, ''), COALESCE(pull_request, ''), started_at, updated_at, COALESCE(finished_at, 0), version, branch_ahead,
COALESCE(escalated_step, -1), COALESCE(escalated_at, 0), COALESCE(runner_missing_run, ''), COALESCE(wait_until, 0)`

// attendedColumns are flowColumns and what attention is derived from (the
// queued run's age, the capable runners' last heartbeat, the reconciler's
// flag): only the views that show attention read them (scanAttended).
const attendedColumns = flowColumns + `,
COALESCE((SELECT r.created_at FROM runs r WHERE r.id = flows.run_id AND r.status = 'queued'), 0), ` + capableSeenSQL + `,
CASE WHEN ` + StuckSQL + ` THEN 1 ELSE 0 END`

// scanFlow reads the flow of row i of a query of flowColumns.
func scanFlow(rows *store.Rows, i int) (Flow, error) {
	var f Flow
	return f, scanInto(rows, i, &f)
}

// scanAttended reads the flow of row i of a query of attendedColumns and
// derives its attention.
func (s *Service) scanAttended(rows *store.Rows, i int) (Flow, error) {
	var f Flow
	if err := scanInto(rows, i, &f, &f.runQueuedAt, &f.capableSeenAt, &f.stuck); err != nil {
		return f, err
	}
	s.attend(&f)
	return f, nil
}

// scanInto scans flowColumns into f, then extra.
func scanInto(rows *store.Rows, i int, f *Flow, extra ...any) error {
	var def, pr string
	var started, updated, finished, escalatedStep, escalated, waitUntil int64
	var ahead sql.NullInt64
	dest := append([]any{&f.ID, &f.OrganizationID, &f.ProjectID, &f.ItemID, &f.Pipeline, &f.PipelineVersion, &def, &f.Stage, &f.Iteration,
		&f.MaxIterations, &f.Step, &f.Status, &f.Waiting, &f.RunID, &f.Outcome, &f.Report, &f.OutcomeStage, &pr, &started, &updated, &finished, &f.Version, &ahead,
		&escalatedStep, &escalated, &f.runnerMissingRun, &waitUntil},
		extra...)
	if err := rows.Scan(i, dest...); err != nil {
		return fmt.Errorf("scan flow: %w", err)
	}
	if pr != "" {
		f.PullRequest = &forge.PullRequest{}
		if err := json.Unmarshal([]byte(pr), f.PullRequest); err != nil {
			return fmt.Errorf("flow %s pull request: %w", f.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(def), &f.Definition); err != nil {
		return fmt.Errorf("flow %s definition: %w", f.ID, err)
	}
	if ahead.Valid {
		n := int(ahead.Int64)
		f.BranchAhead = &n
	}
	f.StartedAt, f.UpdatedAt = time.UnixMilli(started).UTC(), time.UnixMilli(updated).UTC()
	if finished != 0 {
		t := time.UnixMilli(finished).UTC()
		f.FinishedAt = &t
	}
	if f.State() == (State{StatusWaiting, WaitProvider}) {
		f.WaitUntil = store.OptionalTime(waitUntil)
	}
	if f.State() == (State{StatusWaiting, WaitApproval}) && escalatedStep == int64(f.Step) && escalated != 0 {
		t := time.UnixMilli(escalated).UTC()
		f.EscalatedAt = &t
	}
	return nil
}

// Get reads a flow by id, with its attention: the view of a flow.
func (s *Service) Get(ctx context.Context, id string) (Flow, error) {
	flows, err := s.query(ctx, "read flow "+id, `SELECT `+attendedColumns+` FROM flows WHERE id = ?`, id)
	if err != nil {
		return Flow{}, err
	}
	if len(flows) == 0 {
		return Flow{}, apperr.New(apperr.NotFound, "flow %s not found", id)
	}
	return flows[0], nil
}

// Read reads one flow from st, without its attention (Service.Get adds
// it): the flow's own row, what a step reads of the flow it changes.
func Read(ctx context.Context, st store.Store, id string) (Flow, error) {
	rows, err := st.Query(ctx, `SELECT `+flowColumns+` FROM flows WHERE id = ?`, id)
	if err != nil {
		return Flow{}, fmt.Errorf("read flow %s: %w", id, err)
	}
	if rows.Len() == 0 {
		return Flow{}, apperr.New(apperr.NotFound, "flow %s not found", id)
	}
	return scanFlow(rows, 0)
}

// Latest returns the item's newest flow, with its attention (ok=false
// before any started).
func (s *Service) Latest(ctx context.Context, itemID string) (Flow, bool, error) {
	flows, err := s.query(ctx, "read flow of "+itemID, `SELECT `+attendedColumns+` FROM flows WHERE item_id = ? ORDER BY started_at DESC, id DESC LIMIT 1`, itemID)
	if err != nil || len(flows) == 0 {
		return Flow{}, false, err
	}
	return flows[0], true, nil
}

// latest returns the item's newest flow's own row (ok=false before any
// started).
func (s *Service) latest(ctx context.Context, itemID string) (Flow, bool, error) {
	rows, err := s.Store.Query(ctx, `SELECT `+flowColumns+` FROM flows WHERE item_id = ? ORDER BY started_at DESC, id DESC LIMIT 1`, itemID)
	if err != nil {
		return Flow{}, false, fmt.Errorf("read flow of %s: %w", itemID, err)
	}
	if rows.Len() == 0 {
		return Flow{}, false, nil
	}
	f, err := scanFlow(rows, 0)
	return f, err == nil, err
}

// Definitions reads the pinned pipeline definitions of flows, by flow id
// (a flow that does not exist is left out).
func (s *Service) Definitions(ctx context.Context, flowIDs []string) (map[string]pipeline.Definition, error) {
	const batch = 500
	out := make(map[string]pipeline.Definition, len(flowIDs))
	for len(flowIDs) > 0 {
		n := min(len(flowIDs), batch)
		args := make([]any, n)
		for i, id := range flowIDs[:n] {
			args[i] = id
		}
		flowIDs = flowIDs[n:]
		rows, err := s.Store.Query(ctx, `SELECT id, definition FROM flows WHERE id IN (?`+strings.Repeat(", ?", n-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("read pipeline definitions: %w", err)
		}
		for i := range rows.Len() {
			var id, def string
			if err := rows.Scan(i, &id, &def); err != nil {
				return nil, err
			}
			var d pipeline.Definition
			if err := json.Unmarshal([]byte(def), &d); err != nil {
				return nil, fmt.Errorf("flow %s definition: %w", id, err)
			}
			out[id] = d
		}
	}
	return out, nil
}

// active returns the item's active flow, if any.
func (s *Service) active(ctx context.Context, itemID string) (Flow, bool, error) {
	f, ok, err := s.latest(ctx, itemID)
	if err != nil || !ok || !Active(f.Status) {
		return Flow{}, false, err
	}
	return f, true, nil
}

// now is the current time at stored precision.
func (s *Service) now() time.Time { return s.Clock.Now().Truncate(time.Millisecond) }

// update returns the guarded statement writing next over f (as read).
func update(f, next Flow, now time.Time) store.Statement {
	var finished, pr, ahead, until any
	if next.State() == (State{StatusWaiting, WaitProvider}) && next.WaitUntil != nil {
		until = next.WaitUntil.UnixMilli()
	}
	if next.BranchAhead != nil {
		ahead = *next.BranchAhead
	}
	if next.FinishedAt != nil {
		finished = next.FinishedAt.UnixMilli()
	}
	if next.PullRequest != nil {
		b, _ := json.Marshal(next.PullRequest)
		pr = string(b)
	}
	return store.Stmt(`UPDATE flows SET stage = ?, iteration = ?, step = ?, status = ?, waiting = ?, run_id = ?, outcome = ?, report = ?,
outcome_stage = ?, pull_request = ?, branch_ahead = ?, wait_until = ?, updated_at = ?, finished_at = ?, version = version + 1 WHERE id = ? AND version = ?`,
		next.Stage, next.Iteration, next.Step, next.Status, nullable(next.Waiting), nullable(next.RunID), nullable(next.Outcome),
		nullable(next.Report), nullable(next.OutcomeStage), pr, ahead, until, now.UnixMilli(), finished, f.ID, f.Version)
}

// Unchanged is the SQL condition that flow f is still at the version read
// (for a write guarded by it that is not an update of the flow:
// job.Spec.InsertWhile).
func Unchanged(f Flow) store.Statement {
	return store.Stmt(`EXISTS (SELECT 1 FROM flows WHERE id = ? AND version = ?)`, f.ID, f.Version)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// flowEvent builds a flow.<change> event whose payload (payloads.go)
// carries f's position.
func flowEvent(actor event.Actor, f Flow, p payload) event.Event {
	p.place(f)
	return event.Of(actor, f.OrganizationID, f.ProjectID, f.ID, p)
}

// enterJob is the flow.enter job of f's step.
func enterJob(f Flow) job.Spec { return job.New(EnterArgs{FlowID: f.ID, Step: f.Step}) }

// Start starts the pipeline of a ready ticket: the ticket moves to
// in_progress, the pipeline version is resolved and pinned, flow.started is
// recorded and the first stage is queued. A ticket whose earlier flow ended
// may start again; one that is not ready, or whose flow is still active, is
// a conflict.
func (s *Service) Start(ctx context.Context, actor event.Actor, itemRef string) (Flow, error) {
	var out Flow
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		it, err := s.Tracker.FindItem(ctx, itemRef)
		if err != nil {
			return nil, err
		}
		if it.IsEpic() {
			return nil, apperr.New(apperr.Conflict, "%s is an epic: only tickets run through pipelines", it.Key)
		}
		if cur, ok, err := s.active(ctx, it.ID); err != nil {
			return nil, err
		} else if ok {
			return nil, apperr.New(apperr.Conflict, "%s already has an active flow (%s at stage %s)", it.Key, cur.Status, cur.Stage)
		}
		if it.State != "ready" {
			return nil, apperr.New(apperr.Conflict, "%s is %s: only a ready ticket can start", it.Key, it.State)
		}
		open, err := s.Tracker.OpenBlockers(ctx, it)
		if err != nil {
			return nil, err
		}
		if err := blockedStart(it.Key, open); err != nil {
			return nil, err
		}
		p, err := s.Tenancy.FindProject(ctx, it.ProjectID)
		if err != nil {
			return nil, err
		}
		pv, err := s.Pipelines.Resolve(ctx, p, it.Type)
		if err != nil {
			return nil, err
		}
		first, ok := pv.Definition.First()
		if !ok {
			return nil, apperr.New(apperr.Conflict, "pipeline %s version %d has no stages", pv.Name, pv.Version)
		}
		def, err := json.Marshal(pv.Definition)
		if err != nil {
			return nil, fmt.Errorf("encode pipeline: %w", err)
		}
		now := s.now()
		f := Flow{ID: transition.NewID(), OrganizationID: it.OrganizationID, ProjectID: it.ProjectID, ItemID: it.ID, Pipeline: pv.Name,
			PipelineVersion: pv.Version, Definition: pv.Definition, Stage: first.ID, Iteration: 1, MaxIterations: pv.Definition.MaxIter(),
			Step: 1, Status: StatusRunning, StartedAt: now, UpdatedAt: now, Version: 1}
		out = f
		move, err := tracker.FlowMove(actor, it, tracker.StateInProgress, now)
		if err != nil {
			return nil, err
		}
		t := &transition.Transition{Events: []event.Event{flowEvent(actor, f, &FlowStarted{Ticket: it.Key, Pipeline: pv.Name, PipelineVersion: pv.Version})}}
		return t.Add(move, transition.Transition{
			Guarded: []store.Statement{tracker.Unblocked(it), store.Stmt(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition,
stage, iteration, max_iterations, step, status, waiting, run_id, outcome, report, outcome_stage, pull_request, started_at, updated_at,
finished_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, 1, 'running', NULL, NULL, NULL, NULL, NULL, NULL, ?, ?, NULL, 1) ON CONFLICT DO NOTHING`,
				f.ID, f.OrganizationID, f.ProjectID, f.ItemID, f.Pipeline, f.PipelineVersion, string(def), f.Stage, f.MaxIterations,
				now.UnixMilli(), now.UnixMilli())},
			Jobs: []job.Spec{enterJob(f)},
		}), nil
	})
	return out, err
}

// blockedStart refuses to start a ticket that items still block (it or
// its epic), naming each and its state: the scheduler would not start it
// either.
func blockedStart(key string, open []tracker.OpenBlocker) error {
	if len(open) == 0 {
		return nil
	}
	names := make([]string, len(open))
	for i, b := range open {
		names[i] = b.Key + " (" + b.State + ")"
	}
	return apperr.New(apperr.Conflict, "%s is blocked by %s: it can start once each is done or cancelled", key, strings.Join(names, ", "))
}

// ListFilter selects flows of a project.
type ListFilter struct {
	Status    string // "" for any
	Waiting   string // "" for any
	Attention string // "" for any, else one of Attentions
	Limit     int
}

// List returns a project's flows, newest first.
func (s *Service) List(ctx context.Context, projectID string, fl ListFilter) ([]Flow, error) {
	q := `SELECT ` + attendedColumns + ` FROM flows WHERE project_id = ?`
	args := []any{projectID}
	if fl.Status != "" {
		q += ` AND status = ?`
		args = append(args, fl.Status)
	}
	if fl.Waiting != "" {
		q += ` AND waiting = ?`
		args = append(args, fl.Waiting)
	}
	switch fl.Attention {
	case "":
	case AttentionNoRunner:
		q += ` AND ` + noRunnerSQL
		args = append(args, s.noRunnerArgs()...)
	case AttentionStuck:
		q += ` AND ` + StuckSQL
	default:
		return nil, fmt.Errorf("list flows: unknown attention %q", fl.Attention)
	}
	if fl.Limit <= 0 {
		fl.Limit = 100
	}
	return s.query(ctx, "list flows", q+` ORDER BY started_at DESC, id DESC LIMIT ?`, append(args, fl.Limit)...)
}

// query reads flows of attendedColumns, with their attention.
func (s *Service) query(ctx context.Context, what, q string, args ...any) ([]Flow, error) {
	rows, err := s.Store.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return store.ScanAll(rows, s.scanAttended)
}

// own reads flows of flowColumns: their own rows, for steps.
func (s *Service) own(ctx context.Context, what, q string, args ...any) ([]Flow, error) {
	rows, err := s.Store.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return store.ScanAll(rows, scanFlow)
}
