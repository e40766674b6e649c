package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Defaults and limits.
const (
	DefaultGrace = 2 * time.Minute  // a running run without a heartbeat for this long fails
	MaxLeaseWait = 60 * time.Second // the longest long poll of a lease
	DefaultPoll  = 200 * time.Millisecond
	// RunTokenTTL bounds a run token's life in case nothing revoked it
	// (a finish and the sweep revoke it much earlier).
	RunTokenTTL = 7 * 24 * time.Hour
	MaxReport   = 64 << 10 // bytes of a report's summary
	MaxError    = 16 << 10 // bytes of a finish's error
	MaxCostUSD  = 1e6      // per run
)

// Config tunes a Service; zero fields take the defaults.
type Config struct {
	// Grace is how long a running run may go without a heartbeat before
	// SweepSilent fails it (default 2m). RunSweeper sweeps every Grace/4.
	Grace time.Duration
	// LeaseWait caps a lease's long poll (default and at most 60s).
	LeaseWait time.Duration
	// Poll is how often a waiting lease re-reads the queue (default 200ms);
	// runs created in this process wake it at once (Notify).
	Poll time.Duration
	// Log receives the sweeper's errors (default: discarded).
	Log *slog.Logger
	// LogLimit is how many bytes of a run's log are kept (default
	// DefaultLogLimit): the rest is dropped and the log marked truncated.
	LogLimit int64
	// OnFinish returns the jobs enqueued with every run that reaches a
	// final status (the flow engine's flow.OnRunFinished); nil enqueues
	// none.
	OnFinish FinishHook
	// Sessions builds the session a lease hands out (the flow engine's
	// flow.Sessions); nil hands out an empty one.
	Sessions SessionSource
}

// Service runs the runner protocol.
type Service struct {
	store   store.Store
	applier *transition.Applier
	clock   clock.Clock
	tracker *tracker.Service
	cfg     Config
	log     *slog.Logger

	mu      sync.Mutex
	wake    chan struct{} // closed and replaced by Notify
	waiting int           // leases between polls, found nothing, waiting
}

// NewService returns a Service.
func NewService(st store.Store, a *transition.Applier, c clock.Clock, t *tracker.Service, cfg Config) *Service {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.LeaseWait <= 0 || cfg.LeaseWait > MaxLeaseWait {
		cfg.LeaseWait = MaxLeaseWait
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.LogLimit <= 0 {
		cfg.LogLimit = DefaultLogLimit
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, applier: a, clock: c, tracker: t, cfg: cfg, log: log, wake: make(chan struct{})}
}

// finished returns the jobs of the finish hook for r.
func (s *Service) finished(r Run) []job.Spec {
	if s.cfg.OnFinish == nil {
		return nil
	}
	return s.cfg.OnFinish(r)
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// OnCommit is the service's subscriber (transition.Subscriber): a
// committed run.created wakes the leases waiting in this process.
func (s *Service) OnCommit(c transition.Committed) {
	for _, e := range c.Events {
		if e.Type == "run.created" {
			s.Notify()
			return
		}
	}
}

// Notify wakes every lease waiting in this process: a run was created
// (OnCommit calls it when run.created commits). Leases in other Core
// instances find the run at their next poll.
func (s *Service) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Service) woken() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

// Waiting returns how many leases of this process wait now: each has
// found the queue empty and waits for Notify or its next poll (tests wait
// for this before they create the run a waiting lease must get).
func (s *Service) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *Service) addWaiting(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting += n
}

// now is the current time at the stored precision.
func (s *Service) now() time.Time { return s.clock.Now().Truncate(time.Millisecond) }

// Get returns a run by id.
func (s *Service) Get(ctx context.Context, id string) (Run, error) {
	runs, err := queryRuns(ctx, s.store, `r.id = ?`, id)
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 {
		return Run{}, runNotFound(id)
	}
	return runs[0], nil
}

// ForFlowStep returns the run of a flow's step, if it was created.
func (s *Service) ForFlowStep(ctx context.Context, flowID string, step int) (Run, bool, error) {
	runs, err := queryRuns(ctx, s.store, `r.flow_id = ? AND r.step = ?`, flowID, step)
	if err != nil || len(runs) == 0 {
		return Run{}, false, err
	}
	return runs[0], true, nil
}

// List returns an item's runs, oldest first.
func (s *Service) List(ctx context.Context, itemID string) ([]Run, error) {
	return queryRuns(ctx, s.store, `r.item_id = ? ORDER BY r.created_at, r.id`, itemID)
}

// AuthorizeRunner lets only runner tokens through (403 for everyone else).
func AuthorizeRunner(p *auth.Principal) error {
	if p.TokenKind != auth.KindRunner {
		return apperr.New(apperr.Forbidden, "only a runner token may do this")
	}
	return nil
}

// AuthorizeRun lets only the run token of runID through: 403 for any
// other kind of credential, 404 for the token of another run (a run token
// sees no run but its own).
func AuthorizeRun(p *auth.Principal, runID string) error {
	if p.TokenKind != auth.KindRun {
		return apperr.New(apperr.Forbidden, "only the run's own run token may do this")
	}
	if !p.HasScope(scopeOf(runID)) {
		return runNotFound(runID)
	}
	return nil
}

// Leased is a run a runner leased, with the secret of its run token (shown
// this once) and what its session needs.
type Leased struct {
	Run      Run     `json:"run"`
	RunToken string  `json:"run_token"`
	Session  Session `json:"session"`
}

// Lease gives the runner the oldest queued run of one of adapters (nil:
// every adapter it registered; each must be one it registered): it becomes
// running on this runner, and a run token scoped to it is issued in the
// same batch (event run.started, plus token.created for the token). With
// nothing queued it waits up to wait (at most Config.LeaseWait) for a run
// to come, polling every Config.Poll and waking at once on Notify; ok is
// false when none came. Of several runners racing for one run exactly one
// gets it. A runner that drains or has a problem gets none. A run whose
// session cannot be prepared (ErrUnrunnable) is failed on the way, with
// the reason.
func (s *Service) Lease(ctx context.Context, p *auth.Principal, runnerID string, wait time.Duration, adapters []string) (Leased, bool, error) {
	rn, err := s.FindRunner(ctx, p, runnerID)
	if err != nil {
		return Leased{}, false, err
	}
	registered := rn.adapterNames()
	var v apperr.Validator
	for i, a := range adapters {
		f := fmt.Sprintf("adapters[%d]", i)
		switch {
		case !slices.Contains(Adapters, a):
			v.Add(f, "%q is not claude-code or opencode", a)
		case !slices.Contains(registered, a):
			v.Add(f, "%s is not among the adapters runner %s registered (%s)", a, rn.ID, strings.Join(registered, ", "))
		}
	}
	if err := v.Err(); err != nil {
		return Leased{}, false, err
	}
	if len(adapters) == 0 {
		adapters = registered
	}
	if !rn.leases() {
		adapters = nil // it waits like any runner, and gets nothing
	}
	if wait > s.cfg.LeaseWait {
		wait = s.cfg.LeaseWait
	}
	if _, err := s.touchRunner(ctx, rn); err != nil {
		return Leased{}, false, err
	}
	deadline := s.clock.Now().Add(wait)
	for {
		wake := s.woken()
		l, ok, err := s.leaseOnce(ctx, p, rn, adapters)
		if err != nil || ok {
			return l, ok, err
		}
		left := deadline.Sub(s.clock.Now())
		if left <= 0 {
			return Leased{}, false, nil
		}
		s.addWaiting(1) // before the timer: a test that sees the timer sees the count
		t := s.clock.NewTimer(min(s.cfg.Poll, left))
		select {
		case <-ctx.Done():
			t.Stop()
			s.addWaiting(-1)
			return Leased{}, false, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C():
		}
		s.addWaiting(-1)
	}
}

// maxUnrunnable bounds how many unrunnable runs one lease fails before it
// answers that none came.
const maxUnrunnable = 20

// leaseOnce tries to lease the oldest queued run of adapters once, failing
// the unrunnable ones it meets first.
func (s *Service) leaseOnce(ctx context.Context, p *auth.Principal, rn Runner, adapters []string) (Leased, bool, error) {
	if len(adapters) == 0 {
		return Leased{}, false, nil
	}
	args := make([]any, len(adapters))
	for i, a := range adapters {
		args[i] = a
	}
	queue := `r.status = 'queued' AND r.adapter IN (?` + strings.Repeat(", ?", len(adapters)-1) + `) ORDER BY r.created_at, r.id LIMIT 1`
	for range maxUnrunnable {
		var out Leased
		failed := false
		t, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
			failed = false
			runs, err := queryRuns(ctx, s.store, queue, args...)
			if err != nil || len(runs) == 0 {
				return nil, err
			}
			r := runs[0]
			now := s.now()
			// The runner token was authenticated when the long poll began:
			// a runner revoked since gets no run.
			if err := auth.StillValid(ctx, s.store, p.TokenID, now); err != nil {
				return nil, err
			}
			session, err := s.session(ctx, r)
			if errors.Is(err, ErrUnrunnable) {
				failed = true
				return s.failQueued(r, err.Error(), now), nil
			}
			if err != nil {
				return nil, fmt.Errorf("prepare the session of run %s: %w", r.ID, err)
			}
			exp := now.Add(RunTokenTTL)
			secret, tok, issue := auth.Issue(p.Actor(), auth.KindRun, "run "+r.ID, r.OrganizationID, "", []string{scopeOf(r.ID)}, &exp, now)
			at := now.UnixMilli()
			started := newEvent(r, p.Actor(), RunStarted{RunnerID: rn.ID, Runner: rn.Name, TokenID: tok.ID,
				Stage: r.Stage, Step: r.Step})
			t := &transition.Transition{
				Events: []event.Event{started},
				Guarded: []store.Statement{store.Stmt(`UPDATE runs SET status = 'running', runner_id = ?, token_id = ?, started_at = ?,
heartbeat_at = ?, updated_at = ?, version = version + 1 WHERE id = ? AND status = 'queued' AND version = ?`,
					rn.ID, tok.ID, at, at, at, r.ID, r.Version), auth.ValidGuard(p.TokenID, now)},
			}
			t.Add(*issue)
			r.Status, r.RunnerID, r.TokenID, r.StartedAt, r.HeartbeatAt, r.UpdatedAt, r.Version = StatusRunning, rn.ID, tok.ID, &now, &now, now, r.Version+1
			out = Leased{Run: r, RunToken: secret, Session: session}
			return t, nil
		})
		switch {
		case errors.Is(err, transition.ErrGaveUp):
			return Leased{}, false, nil // every attempt lost to other runners: try again at the next poll
		case err != nil || t == nil:
			return Leased{}, false, err
		case failed:
			continue // the next queued run
		}
		return out, true, nil
	}
	return Leased{}, false, nil
}

// session builds r's session (Config.Sessions).
func (s *Service) session(ctx context.Context, r Run) (Session, error) {
	if s.cfg.Sessions == nil {
		return Session{Skills: []SessionSkill{}, AnsweredQuestions: []SessionAnswer{}}, nil
	}
	return s.cfg.Sessions.Session(ctx, r)
}

// failQueued fails queued r, whose session cannot be prepared, with reason
// (event run.finished, with the finish hook's jobs): no runner could run
// it, and it must not wait for one.
func (s *Service) failQueued(r Run, reason string, now time.Time) *transition.Transition {
	at := now.UnixMilli()
	version := r.Version
	r.Status, r.Error, r.FinishedAt, r.UpdatedAt, r.Version = StatusFailed, reason, &now, now, r.Version+1
	return &transition.Transition{
		Events: []event.Event{newEvent(r, event.System, RunFinished{Status: StatusFailed, Error: reason})},
		Guarded: []store.Statement{store.Stmt(`UPDATE runs SET status = 'failed', error = ?, finished_at = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'queued'`, reason, at, at, r.ID, version)},
		Jobs: s.finished(r),
	}
}

// Running reads the run the run token p acts on and requires it to be
// running: 409 once it is final (its token then serves only a repeated
// finish).
func (s *Service) Running(ctx context.Context, p *auth.Principal, runID string) (Run, error) {
	return s.running(ctx, p, runID)
}

// running reads the run a run token acts on and requires it to be running.
func (s *Service) running(ctx context.Context, p *auth.Principal, runID string) (Run, error) {
	if err := AuthorizeRun(p, runID); err != nil {
		return Run{}, err
	}
	r, err := s.Get(ctx, runID)
	if err != nil {
		return r, err
	}
	if r.Status != StatusRunning {
		return r, apperr.New(apperr.Conflict, "run %s is %s, not running", r.ID, r.Status)
	}
	return r, nil
}

// SessionRun returns the run a session's MCP tools act on, for the run
// token p of runID: the run must be running and not asked to stop. A
// finished run, or one whose cancellation was requested, is a conflict
// saying so: its tools are closed.
func (s *Service) SessionRun(ctx context.Context, p *auth.Principal, runID string) (Run, error) {
	r, err := s.running(ctx, p, runID)
	if err != nil {
		return r, err
	}
	if r.CancelRequested {
		return r, apperr.New(apperr.Conflict, "run %s was cancelled: its tools are closed; end the session", r.ID)
	}
	return r, nil
}

// HeartbeatReply tells a run's session whether to stop.
type HeartbeatReply struct {
	Cancelled bool `json:"cancelled"` // cancellation was requested: stop and finish
}

// Heartbeat records that a run's session is alive (heartbeat_at; no event:
// liveness pings are not tracked changes) and says whether it was asked to
// stop.
func (s *Service) Heartbeat(ctx context.Context, p *auth.Principal, runID string) (HeartbeatReply, error) {
	r, err := s.running(ctx, p, runID)
	if err != nil {
		return HeartbeatReply{}, err
	}
	res, err := s.store.Exec(ctx, store.Stmt(`UPDATE runs SET heartbeat_at = MAX(COALESCE(heartbeat_at, 0), ?) WHERE id = ? AND status = 'running'`,
		s.now().UnixMilli(), r.ID))
	if err != nil {
		return HeartbeatReply{}, fmt.Errorf("heartbeat run %s: %w", r.ID, err)
	}
	if len(res) == 1 && res[0].RowsAffected == 0 {
		_, err := s.running(ctx, p, runID) // it finished meanwhile: say how
		if err == nil {
			err = apperr.New(apperr.Conflict, "run %s changed concurrently: retry", runID)
		}
		return HeartbeatReply{}, err
	}
	return HeartbeatReply{Cancelled: r.CancelRequested}, nil
}

// ReportInput is a session's stage report.
type ReportInput struct {
	Outcome string // done, failed or blocked
	Summary string
}

func validateText(v *apperr.Validator, field, s string, max int, required bool) {
	v.Check(!required || strings.TrimSpace(s) != "", field, "must not be blank")
	v.Check(len(s) <= max, field, "must be at most %d bytes (is %d)", max, len(s))
	v.CheckErr(field, text.Multiline(s))
}

// Report stores the session's outcome and summary (event run.reported).
// Sending the same report again changes nothing; a different second
// report is a conflict.
func (s *Service) Report(ctx context.Context, p *auth.Principal, runID string, in ReportInput) (Run, error) {
	var v apperr.Validator
	switch in.Outcome {
	case OutcomeDone, OutcomeFailed, OutcomeBlocked:
	default:
		v.Add("outcome", "%q is not done, failed or blocked", in.Outcome)
	}
	validateText(&v, "summary", in.Summary, MaxReport, true)
	if err := v.Err(); err != nil {
		return Run{}, err
	}
	var out Run
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.running(ctx, p, runID)
		if err != nil {
			return nil, err
		}
		out = r
		if r.Outcome != "" {
			if r.Outcome == in.Outcome && r.Report == in.Summary {
				return nil, nil // a repeat
			}
			return nil, apperr.New(apperr.Conflict, "run %s reported %s already: a run reports once", r.ID, r.Outcome)
		}
		now := s.now()
		out.Outcome, out.Report, out.UpdatedAt, out.Version = in.Outcome, in.Summary, now, r.Version+1
		return &transition.Transition{
			Events: []event.Event{newEvent(r, actorOf(r.ID), RunReported{Outcome: in.Outcome, Summary: in.Summary})},
			Guarded: []store.Statement{store.Stmt(`UPDATE runs SET outcome = ?, report = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running' AND outcome IS NULL`, in.Outcome, in.Summary, now.UnixMilli(), r.ID, r.Version)},
		}, nil
	})
	if err != nil {
		return Run{}, err
	}
	return out, nil
}

// AskQuestion asks a question on the run's item, as the service
// "run:<id>" acting for nobody (tracker.AskQuestion, event
// question.asked). A blocking question first sets the run's
// blocking_question (event run.question_asked), in its own guarded
// transition: tracker.AskQuestion writes its own batch. The flag goes
// first so that a crash between the two errs towards waiting: a flagged
// run without an open question makes the flow wait for no answer and
// resume at once, whereas an open blocking question on an unflagged run
// would let the flow carry on past it. A repeat after a failure finds the
// flag set and only asks.
func (s *Service) AskQuestion(ctx context.Context, p *auth.Principal, runID, text string, blocking bool) (tracker.Question, error) {
	var v apperr.Validator
	validateText(&v, "text", text, tracker.MaxQuestionText, true)
	if err := v.Err(); err != nil {
		return tracker.Question{}, err
	}
	var itemID string
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.running(ctx, p, runID)
		if err != nil {
			return nil, err
		}
		itemID = r.ItemID
		if !blocking || r.BlockingQuestion {
			return nil, nil
		}
		now := s.now()
		return &transition.Transition{
			Events: []event.Event{newEvent(r, actorOf(r.ID), RunQuestionAsked{Text: text, Blocking: true})},
			Guarded: []store.Statement{store.Stmt(`UPDATE runs SET blocking_question = 1, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running'`, now.UnixMilli(), r.ID, r.Version)},
		}, nil
	})
	if err != nil {
		return tracker.Question{}, err
	}
	return s.tracker.AskQuestion(ctx, actorOf(runID), itemID, text, blocking)
}

// FinishInput is how a session ended.
type FinishInput struct {
	ExitStatus *int // required
	Usage      *Usage
	Error      string
}

func (in FinishInput) validate() error {
	var v apperr.Validator
	v.Check(in.ExitStatus != nil, "exit_status", "is required")
	if in.ExitStatus != nil {
		v.Check(*in.ExitStatus >= math.MinInt32 && *in.ExitStatus <= math.MaxInt32, "exit_status", "must fit 32 bits")
	}
	if u := in.Usage; u != nil {
		v.Check(u.InputTokens >= 0, "usage.input_tokens", "must not be negative")
		v.Check(u.OutputTokens >= 0, "usage.output_tokens", "must not be negative")
		v.Check(u.CacheReadTokens >= 0, "usage.cache_read_tokens", "must not be negative")
		v.Check(u.CacheWriteTokens >= 0, "usage.cache_write_tokens", "must not be negative")
		v.Check(!math.IsNaN(u.CostUSD) && u.CostUSD >= 0 && u.CostUSD <= MaxCostUSD, "usage.cost_usd", "must be a number from 0 to %g", float64(MaxCostUSD))
	}
	validateText(&v, "error", in.Error, MaxError, false)
	return v.Err()
}

// finalStatus decides how a running run ends: cancelled when that was
// requested; succeeded when the session exited 0 after reporting; else
// failed, with the reason. A session that ends without a report has failed
// whatever its exit status (both CLIs exit 0 when the report tool was
// unreachable).
func finalStatus(r Run, exit int, errText string) (string, string) {
	switch {
	case r.CancelRequested:
		if r.Error != "" {
			return StatusCancelled, r.Error
		}
		return StatusCancelled, errText
	case exit == 0 && r.Outcome != "":
		return StatusSucceeded, errText
	case errText != "":
		return StatusFailed, errText
	case exit != 0:
		return StatusFailed, fmt.Sprintf("the session exited with status %d", exit)
	default:
		return StatusFailed, "the session ended without a report"
	}
}

// Finish ends a running run: its final status (see finalStatus), exit
// status, usage and error are stored and the flow.run_finished job is
// enqueued, all in one batch (event run.finished). Finishing a finished
// run changes nothing and answers it: a runner that did not get the first
// answer may send its finish again. The run token stays valid for that
// only: every other route of the run refuses it once the run is final
// (Running), and it expires with RunTokenTTL. A run Core ended without its
// runner (SweepSilent) has its token revoked.
func (s *Service) Finish(ctx context.Context, p *auth.Principal, runID string, in FinishInput) (Run, error) {
	if err := AuthorizeRun(p, runID); err != nil {
		return Run{}, err
	}
	if err := in.validate(); err != nil {
		return Run{}, err
	}
	var usage Usage
	if in.Usage != nil {
		usage = *in.Usage
	}
	var out Run
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.Get(ctx, runID)
		if err != nil {
			return nil, err
		}
		out = r
		if r.Final() {
			return nil, nil // a duplicate finish
		}
		if r.Status != StatusRunning {
			return nil, apperr.New(apperr.Conflict, "run %s is %s: only a running run finishes", r.ID, r.Status)
		}
		status, errText := finalStatus(r, *in.ExitStatus, in.Error)
		return s.finishTransition(ctx, r, actorOf(r.ID), status, in.ExitStatus, errText, usage, false, false, &out)
	})
	if err != nil {
		return Run{}, err
	}
	return out, nil
}

// finishTransition moves running r to a final status with its event and
// the finish hook's jobs (and, with revoke, the revocation of its run
// token); out receives the run as it will be. With silent set (the
// sweep), the write is also guarded by the heartbeat read, so that a
// heartbeat landing meanwhile makes it a lost race (heartbeats do not bump
// the version).
func (s *Service) finishTransition(ctx context.Context, r Run, actor event.Actor, status string, exit *int, errText string, usage Usage,
	silent, revoke bool, out *Run) (*transition.Transition, error) {
	now := s.now()
	at := now.UnixMilli()
	usage.CostUSD = fromMicros(toMicros(usage.CostUSD))
	var exitArg any
	if exit != nil {
		exitArg = *exit
	}
	update := store.Stmt(`UPDATE runs SET status = ?, exit_status = ?, error = ?, input_tokens = ?, output_tokens = ?,
cache_read_tokens = ?, cache_write_tokens = ?, cost_micros = ?, finished_at = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running'`,
		status, exitArg, nullable(errText), usage.InputTokens, usage.OutputTokens, usage.CacheReadTokens, usage.CacheWriteTokens,
		toMicros(usage.CostUSD), at, at, r.ID, r.Version)
	if silent && r.HeartbeatAt != nil {
		update.SQL += ` AND heartbeat_at = ?`
		update.Args = append(update.Args, r.HeartbeatAt.UnixMilli())
	}
	*out = r
	out.Status, out.ExitStatus, out.Error, out.Usage, out.FinishedAt, out.UpdatedAt, out.Version = status, exit, errText, usage, &now, now, r.Version+1
	t := &transition.Transition{
		Events: []event.Event{newEvent(r, actor, RunFinished{Status: status, Outcome: r.Outcome,
			ExitStatus: exit, Error: errText, Usage: usage, BlockingQuestion: r.BlockingQuestion})},
		Guarded: []store.Statement{update},
		Jobs:    s.finished(*out),
	}
	if revoke && r.TokenID != "" {
		tok, found, err := auth.ReadToken(ctx, s.store, r.TokenID)
		if err != nil {
			return nil, fmt.Errorf("read the run token: %w", err)
		}
		if found {
			revoke, _ := auth.Revocation(actor, tok, now) // empty when revoked already
			t.Add(revoke)
		}
	}
	return t, nil
}
