package run

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// How a run ends and what it cost. Only its runner finishes a run and
// reports its usage (the runner token that leased it: Held); the agent
// session's run token serves neither, so a session cannot end its own run
// to dodge its spend. Usage is a run's running total: each report keeps,
// per figure, the larger of what was recorded and what is reported, and a
// report is counted whatever the run's status — a run Core already ended
// (swept silent, cancelled) still gets the usage its runner reports
// (event run.usage_recorded).

// validateUsage checks a usage report's figures (bounds.Tokens,
// bounds.CostUSD), its fields named under prefix.
func validateUsage(v *apperr.Validator, prefix string, u runproto.Usage) {
	bounds.Tokens.Check(v, prefix+"input_tokens", u.InputTokens)
	bounds.Tokens.Check(v, prefix+"output_tokens", u.OutputTokens)
	bounds.Tokens.Check(v, prefix+"cache_read_tokens", u.CacheReadTokens)
	bounds.Tokens.Check(v, prefix+"cache_write_tokens", u.CacheWriteTokens)
	bounds.CostUSD.CheckFloat(v, prefix+"cost_usd", u.CostUSD)
}

// merged is the usage after a report of v on recorded u: per figure, the
// larger (usage is a running total: a late or repeated report never
// lowers it). The cost is kept in whole micro-USD.
func merged(u, v runproto.Usage) runproto.Usage {
	return runproto.Usage{InputTokens: max(u.InputTokens, v.InputTokens), OutputTokens: max(u.OutputTokens, v.OutputTokens),
		CacheReadTokens: max(u.CacheReadTokens, v.CacheReadTokens), CacheWriteTokens: max(u.CacheWriteTokens, v.CacheWriteTokens),
		CostUSD: fromMicros(max(toMicros(u.CostUSD), toMicros(v.CostUSD)))}
}

// FinishInput is how a session ended.
type FinishInput struct {
	ExitStatus *int // required
	Usage      *runproto.Usage
	Error      string
	// BranchAhead: the commits the ticket's branch has ahead of the
	// default branch after the session (nil: not known).
	BranchAhead *int
	// Model: the model that served the session ("": not known).
	Model string
	// Interrupted: the runner's word that the session ended because of
	// its infrastructure (one of runproto.RunnerReasons; "": it did not).
	Interrupted string
	// RetryAt: with Interrupted provider_limit, when the provider said the
	// limit resets (nil: it did not say).
	RetryAt *time.Time
}

// MaxBranchAhead bounds a reported branch_ahead.
const MaxBranchAhead = 1_000_000

func (in FinishInput) validate() error {
	var v apperr.Validator
	v.Check(in.ExitStatus != nil, "exit_status", "is required")
	if in.ExitStatus != nil {
		bounds.ExitStatus.Check(&v, "exit_status", int64(*in.ExitStatus))
	}
	if u := in.Usage; u != nil {
		validateUsage(&v, "usage.", *u)
	}
	validateText(&v, "error", in.Error, runproto.MaxError, false)
	validateText(&v, "model", in.Model, runproto.MaxModel, false)
	v.Check(in.Interrupted == "" || slices.Contains(runproto.RunnerReasons, in.Interrupted), "interrupted",
		"must be one of %s", strings.Join(runproto.RunnerReasons, ", "))
	v.Check(in.RetryAt == nil || in.Interrupted == runproto.ReasonProviderLimit, "retry_at", "is only for interrupted %s", runproto.ReasonProviderLimit)
	if in.BranchAhead != nil {
		v.Check(*in.BranchAhead >= 0 && *in.BranchAhead <= MaxBranchAhead, "branch_ahead", "must be a whole number from 0 to %d", MaxBranchAhead)
	}
	return v.Err()
}

// ending is how a running run ends: its final status, error and, when
// interrupted, the reason.
type ending struct {
	status, err, reason string
}

// finalStatus decides how a running run ends: succeeded when the session
// exited 0 after reporting (whatever else happened, the agent's outcome
// stands); cancelled when that was requested, or interrupted with the
// interruption that requested it (the kill switch); interrupted when its
// runner says the session ended because of its infrastructure
// (interrupted: drain, sandbox start); else failed, with the reason. A
// session that ends without a report has failed whatever its exit status
// (both CLIs exit 0 when the report tool was unreachable).
func finalStatus(r Run, exit int, errText, interrupted string) ending {
	switch {
	case r.CancelRequested:
		if r.Error != "" {
			errText = r.Error
		}
		if r.Reason != "" {
			return ending{StatusInterrupted, errText, r.Reason}
		}
		return ending{StatusCancelled, errText, ""}
	case exit == 0 && r.Outcome != "":
		return ending{StatusSucceeded, errText, ""}
	case interrupted != "":
		if errText == "" {
			errText = "the session was interrupted: " + interrupted
		}
		return ending{StatusInterrupted, errText, interrupted}
	case errText != "":
		return ending{StatusFailed, errText, ""}
	case exit != 0:
		return ending{StatusFailed, fmt.Sprintf("the session exited with status %d", exit), ""}
	default:
		return ending{StatusFailed, "the session ended without a report", ""}
	}
}

// Finish ends running run runID for its runner (actor): its final status
// (see finalStatus), exit status, usage and error are stored, its run
// token is revoked (the session has ended: the token serves nothing
// more) and the flow.run_finished job is enqueued, all in one batch
// (events run.finished and token.revoked). Finishing a finished run
// answers it: a runner that did not get the first answer may send its
// finish again, and usage it carries beyond what was recorded is still
// counted (event run.usage_recorded) — a run Core ended without its runner
// (SweepSilent) gets the spend its runner reports late.
func (s *Service) Finish(ctx context.Context, actor event.Actor, runID string, in FinishInput) (Run, error) {
	if err := in.validate(); err != nil {
		return Run{}, err
	}
	var usage runproto.Usage
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
			return s.usageTransition(r, actor, usage, &out), nil // a repeated or late finish: only its usage counts
		}
		if r.Status != StatusRunning {
			return nil, apperr.New(apperr.Conflict, "run %s is %s: only a running run finishes", r.ID, r.Status)
		}
		end := finalStatus(r, *in.ExitStatus, in.Error, in.Interrupted)
		r.RetryAt = nil
		if end.reason == runproto.ReasonProviderLimit && in.RetryAt != nil {
			t := in.RetryAt.UTC().Truncate(time.Millisecond)
			r.RetryAt = &t
		}
		r.BranchAhead = in.BranchAhead
		if in.Model != "" {
			r.UsedModel = in.Model
		}
		return s.finishTransition(ctx, r, actor, end, in.ExitStatus, merged(r.Usage, usage), false, true, &out)
	})
	if err != nil {
		return Run{}, err
	}
	return out, nil
}

// RecordUsage records what run runID's session has consumed so far, as its
// runner (actor) reports it: a running total, merged into what was
// recorded (see merged; event run.usage_recorded when it grows, nothing
// when it does not). It is counted whatever the run's status but queued
// (no session has run: 409).
func (s *Service) RecordUsage(ctx context.Context, actor event.Actor, runID string, u runproto.Usage) (Run, error) {
	var v apperr.Validator
	validateUsage(&v, "", u)
	if err := v.Err(); err != nil {
		return Run{}, err
	}
	var out Run
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.Get(ctx, runID)
		if err != nil {
			return nil, err
		}
		out = r
		if r.Status == StatusQueued {
			return nil, apperr.New(apperr.Conflict, "run %s is queued: no session has run to report usage", r.ID)
		}
		return s.usageTransition(r, actor, u, &out), nil
	})
	if err != nil {
		return Run{}, err
	}
	return out, nil
}

// usageTransition records the report u on r (event run.usage_recorded,
// guarded by r's version), or nil when it adds nothing; out receives the
// run as it will be.
func (s *Service) usageTransition(r Run, actor event.Actor, u runproto.Usage, out *Run) *transition.Transition {
	next := merged(r.Usage, u)
	*out = r
	if next == r.Usage {
		return nil
	}
	now := s.now()
	at := now.UnixMilli()
	out.Usage, out.UpdatedAt, out.Version = next, now, r.Version+1
	return &transition.Transition{
		Events: []event.Event{newEvent(r, actor, RunUsageRecorded{Status: r.Status, Usage: next})},
		Guarded: []store.Statement{store.Stmt(`UPDATE runs SET input_tokens = ?, output_tokens = ?, cache_read_tokens = ?, cache_write_tokens = ?,
cost_micros = ?, updated_at = ?, version = version + 1 WHERE id = ? AND version = ?`,
			next.InputTokens, next.OutputTokens, next.CacheReadTokens, next.CacheWriteTokens, toMicros(next.CostUSD), at, r.ID, r.Version)},
	}
}

// finishTransition moves running r to a final status with its event and
// the finish hook's jobs (and, with revoke, the revocation of its run
// token); out receives the run as it will be. r.RetryAt is stored as
// it is (set only for an interruption by a provider limit). With silent set (the
// sweep), the write is also guarded by the heartbeat read, so that a
// heartbeat landing meanwhile makes it a lost race (heartbeats do not bump
// the version).
func (s *Service) finishTransition(ctx context.Context, r Run, actor event.Actor, end ending, exit *int, usage runproto.Usage,
	silent, revoke bool, out *Run) (*transition.Transition, error) {
	status, errText := end.status, end.err
	now := s.now()
	at := now.UnixMilli()
	usage.CostUSD = fromMicros(toMicros(usage.CostUSD))
	var exitArg any
	if exit != nil {
		exitArg = *exit
	}
	update := store.Stmt(`UPDATE runs SET status = ?, exit_status = ?, error = ?, input_tokens = ?, output_tokens = ?,
cache_read_tokens = ?, cache_write_tokens = ?, cost_micros = ?, branch_ahead = ?, used_model = ?, reason = ?, retry_at = ?, finished_at = ?, updated_at = ?,
version = version + 1 WHERE id = ? AND version = ? AND status = 'running'`,
		status, exitArg, nullable(errText), usage.InputTokens, usage.OutputTokens, usage.CacheReadTokens, usage.CacheWriteTokens,
		toMicros(usage.CostUSD), nullableInt(r.BranchAhead), nullable(r.UsedModel), nullable(end.reason), optionalMillis(r.RetryAt), at, at, r.ID, r.Version)
	if silent && r.HeartbeatAt != nil {
		update.SQL += ` AND heartbeat_at = ?`
		update.Args = append(update.Args, r.HeartbeatAt.UnixMilli())
	}
	*out = r
	out.Status, out.ExitStatus, out.Error, out.Usage, out.FinishedAt, out.UpdatedAt, out.Version = status, exit, errText, usage, &now, now, r.Version+1
	out.Reason = end.reason
	out.Model = r.model()
	t := &transition.Transition{
		Events: []event.Event{newEvent(r, actor, RunFinished{Status: status, Outcome: r.Outcome,
			ExitStatus: exit, Error: errText, Usage: usage, Model: r.UsedModel, BlockingQuestion: r.BlockingQuestion, Reason: end.reason, RetryAt: r.RetryAt})},
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

// optionalMillis is t as stored (unix milliseconds), NULL when nil.
func optionalMillis(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}
