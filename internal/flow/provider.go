package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Provider limits: a run interrupted with provider_limit (the model API
// answered a rate limit, an overload or a spent quota) makes its flow wait
// for the provider (WaitProvider) until the limit is expected to have
// passed, then run the same stage again in the same iteration — no
// iteration spent, no interruption counted, no question. The limit is
// shared: it is recorded per provider credential (provider_limits), and an
// agent stage of that credential does not start into it but waits too.
// A waiting flow holds no concurrency slot.
//
// Core knows a credential by its adapter's name (Credential): the model
// credentials live in each runner's environment and never reach Core, and
// a stage is bound to its adapter, not to a runner, when it is entered —
// the only identity known before a runner leases the run. Runners that run
// one adapter with different keys are held together (the cautious side: a
// wait too many, never a session into a known limit).

// DefaultProviderWait is Service.ProviderWait's default ([runs]
// provider_wait).
const DefaultProviderWait = time.Minute

// MaxProviderWait caps the doubled wait without a reset time.
const MaxProviderWait = 30 * time.Minute

// Credential names the provider credential the sessions of an adapter use.
func Credential(adapter string) string { return adapter }

// Limit is a provider credential's latest known limit (provider_limits).
type Limit struct {
	Credential string
	Until      time.Time // no stage of the credential starts before this
	Streak     int       // limits in a row on the credential
	RunID      string    // the run that met the latest one
	UpdatedAt  time.Time
	Version    int64
	Found      bool // false: none recorded
}

// ReadLimit reads credential's limit (Found false: none recorded).
func ReadLimit(ctx context.Context, st store.Store, credential string) (Limit, error) {
	rows, err := st.Query(ctx, `SELECT until, streak, run_id, updated_at, version FROM provider_limits WHERE credential = ?`, credential)
	if err != nil {
		return Limit{}, fmt.Errorf("read the provider limit of %s: %w", credential, err)
	}
	l := Limit{Credential: credential}
	if rows.Len() == 0 {
		return l, nil
	}
	var until, updated int64
	if err := rows.Scan(0, &until, &l.Streak, &l.RunID, &updated, &l.Version); err != nil {
		return l, fmt.Errorf("read the provider limit of %s: %w", credential, err)
	}
	l.Until, l.UpdatedAt, l.Found = store.Time(until), store.Time(updated), true
	return l, nil
}

// ProviderBackoff is the wait after the streak-th limit in a row without a
// reset time: base, doubled per limit after the first, at most
// MaxProviderWait.
func ProviderBackoff(base time.Duration, streak int) time.Duration {
	d := base
	for i := 1; i < streak && d < MaxProviderWait; i++ {
		d *= 2
	}
	return min(d, MaxProviderWait)
}

// DecideLimit is the limit of credential after run r met one at now (l:
// the limit recorded before, base: [runs] provider_wait). The reset time
// the provider gave is taken as it is (never before now); without one the
// wait doubles with the limits in a row. A run created before the recorded
// limit was met (queued or running then) ran into that same limit: it is
// not one more in a row, and never shortens it.
func DecideLimit(l Limit, r run.Run, now time.Time, base time.Duration) Limit {
	next := Limit{Credential: l.Credential, RunID: r.ID, UpdatedAt: now, Streak: l.Streak + 1, Version: l.Version + 1, Found: true}
	same := l.Found && l.Streak > 0 && r.CreatedAt.Before(l.UpdatedAt)
	if same {
		next.Streak = l.Streak
	}
	if r.RetryAt != nil {
		next.Until = *r.RetryAt
	} else {
		next.Until = now.Add(ProviderBackoff(base, next.Streak))
	}
	if same && l.Until.After(next.Until) {
		next.Until = l.Until
	}
	if next.Until.Before(now) {
		next.Until = now
	}
	return next
}

// limitWrite records next over l (read before): the guarded insert or
// update, a lost race when another wrote it meanwhile.
func limitWrite(l, next Limit) store.Statement {
	if !l.Found {
		return store.Stmt(`INSERT INTO provider_limits (credential, until, streak, run_id, updated_at, version) VALUES (?, ?, ?, ?, ?, 1)
ON CONFLICT (credential) DO NOTHING`, next.Credential, next.Until.UnixMilli(), next.Streak, next.RunID, next.UpdatedAt.UnixMilli())
	}
	return store.Stmt(`UPDATE provider_limits SET until = ?, streak = ?, run_id = ?, updated_at = ?, version = version + 1
WHERE credential = ? AND version = ?`, next.Until.UnixMilli(), next.Streak, next.RunID, next.UpdatedAt.UnixMilli(), l.Credential, l.Version)
}

// streakReset ends the limits in a row of a credential whose run ended
// well (nil when none are counted).
func streakReset(l Limit) []store.Statement {
	if !l.Found || l.Streak == 0 {
		return nil
	}
	return []store.Statement{store.Stmt(`UPDATE provider_limits SET streak = 0, version = version + 1 WHERE credential = ? AND streak > 0`, l.Credential)}
}

// providerWait returns the base wait without a reset time.
func (s *Service) providerWait() time.Duration {
	if s.ProviderWait > 0 {
		return s.ProviderWait
	}
	return DefaultProviderWait
}

// providerLimited decides what run r, interrupted by a provider limit,
// means for its flow: the credential's limit is recorded (or extended) and
// the flow waits for the provider until it has passed.
func (s *Service) providerLimited(ctx context.Context, f Flow, r run.Run, now time.Time) (*transition.Transition, error) {
	l, err := ReadLimit(ctx, s.Store, Credential(r.Adapter))
	if err != nil {
		return nil, err
	}
	next := DecideLimit(l, r, now, s.providerWait())
	said := "the provider gave no reset time"
	if r.RetryAt != nil {
		said = "the provider said when it resets"
	}
	reason := fmt.Sprintf("the provider of %s refused the session (limit %d in a row; %s): stage %s runs again at %s, without spending an iteration",
		r.Adapter, next.Streak, said, f.Stage, next.Until.Format(time.RFC3339))
	t := s.waitForProvider(f, next.Until, reason, now)
	t.Guarded = append(t.Guarded, limitWrite(l, next))
	t.Jobs = append(t.Jobs, job.New(ProviderHoldArgs{Credential: next.Credential}))
	return t, nil
}

// handleProviderHold makes every flow whose run of a limited credential is
// still queued wait for the provider too: its run is cancelled before any
// runner leases it (a lease skips such runs meanwhile), and the stage
// runs again when the limit has passed. Each flow is its own batch.
func (s *Service) handleProviderHold(ctx context.Context, _ *job.Job, p ProviderHoldArgs) error {
	rows, err := s.Store.Query(ctx, `SELECT f.id FROM flows f JOIN runs r ON r.id = f.run_id
WHERE f.status = 'running' AND f.waiting = 'run' AND r.status = 'queued' AND r.adapter = ? ORDER BY f.started_at, f.id`, p.Credential)
	if err != nil {
		return fmt.Errorf("find the flows queued on %s: %w", p.Credential, err)
	}
	ids := make([]string, rows.Len())
	for i := range ids {
		if err := rows.Scan(i, &ids[i]); err != nil {
			return fmt.Errorf("find the flows queued on %s: %w", p.Credential, err)
		}
	}
	var errs []error
	for _, id := range ids {
		current := func(f Flow) bool { return Accepts(f.State(), InRunFinished) && f.RunID != "" }
		err := s.onFlow(ctx, id, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
			r, err := s.Runs.Get(ctx, f.RunID)
			if err != nil || r.Status != run.StatusQueued || Credential(r.Adapter) != p.Credential {
				return nil, err // leased meanwhile: its session meets the limit, or not
			}
			l, limited, err := s.knownLimit(ctx, r.Adapter, now)
			if err != nil || !limited {
				return nil, err
			}
			t := s.waitForProvider(f, l.Until, fmt.Sprintf("the provider of %s is limited until %s (met by run %s): the queued session of stage %s waits for it",
				r.Adapter, l.Until.Format(time.RFC3339), l.RunID, f.Stage), now)
			cancel, _ := s.Runs.Cancel(r, "the provider of "+r.Adapter+" is limited: the stage runs again once the limit has passed", now)
			t.Add(cancel, transition.Transition{Statements: []store.Statement{job.Retire(TimeoutArgs{FlowID: f.ID, Step: f.Step}, now)}})
			return t, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("hold flow %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// knownLimit reports the limit an agent stage of adapter would start into
// at now (ok=false: none).
func (s *Service) knownLimit(ctx context.Context, adapter string, now time.Time) (Limit, bool, error) {
	l, err := ReadLimit(ctx, s.Store, Credential(adapter))
	if err != nil {
		return l, false, err
	}
	return l, l.Found && now.Before(l.Until), nil
}

// waitForProvider makes the flow wait for the provider until until, its
// stage run again then by flow.provider_wait (no human needed).
func (s *Service) waitForProvider(f Flow, until time.Time, reason string, now time.Time) *transition.Transition {
	next := f
	next.Status, next.Waiting, next.RunID, next.WaitUntil = StatusWaiting, WaitProvider, "", &until
	return &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, &FlowWaiting{Waiting: WaitProvider, Reason: reason, Until: &until})},
		Guarded: []store.Statement{update(f, next, now)},
		Jobs:    []job.Spec{job.New(ProviderWaitArgs{FlowID: f.ID, Step: f.Step}).At(until)},
	}
}

// handleProviderWait runs the stage of a flow waiting for the provider
// again, in a new step of the same iteration, once its time has come (run
// early — the reconciler requeued it — it snoozes until then). Entering
// the stage checks the credential's limit again: a limit extended
// meanwhile makes it wait anew.
func (s *Service) handleProviderWait(ctx context.Context, _ *job.Job, p ProviderWaitArgs) error {
	var early time.Duration
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InLimitPassed) }
	err := s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		early = 0
		if f.WaitUntil != nil && now.Before(*f.WaitUntil) {
			early = f.WaitUntil.Sub(now)
			return nil, nil
		}
		adapter := ""
		if stage, ok := f.Definition.Stage(f.Stage); ok {
			adapter = stage.AdapterOrDefault()
		}
		return s.resume(f, it, now, fmt.Sprintf("the provider limit on %s has passed: stage %s runs again, without spending an iteration", adapter, f.Stage))
	})
	if err == nil && early > 0 {
		return job.Snooze(early)
	}
	return err
}
