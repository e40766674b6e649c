package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Runner limits (runner protocol version 2).
const (
	MaxRunnerName   = 200
	MaxLabels       = 32
	MaxLabelValue   = 200
	MaxAdapters     = 8 // entries of a registration's adapters
	DefaultCapacity = 1
)

// Adapters lists the adapters a runner may name (pipeline's stage adapters).
var Adapters = []string{pipeline.AdapterClaudeCode, pipeline.AdapterOpenCode}

var labelRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// Runner is a registered Runner process. It is bound to the runner token
// that registered it: only that token finds it. A token may register
// several runners (several processes on one host), one per name: a
// registration under a name the token registered before updates that
// runner (a restarted process gets its runner back).
type Runner struct {
	ID       string             `json:"id"`
	Name     string             `json:"name"`
	TokenID  string             `json:"token_id,omitempty"` // "" for an organization admin's view
	Labels   map[string]string  `json:"labels"`
	Capacity int                `json:"capacity"`
	Adapters []runproto.Adapter `json:"adapters"`
	Version  string             `json:"version"`  // the runner's software version
	Problem  string             `json:"problem"`  // why it cannot run sessions now; "" when it can
	Draining bool               `json:"draining"` // the runner's own word (its heartbeat: it stops, SIGTERM)
	// Drained: a platform admin drained it (POST /runners/{runner}/drain):
	// it leases no new run until undrained; the runs it holds finish.
	Drained   bool       `json:"drained"`
	DrainedAt *time.Time `json:"drained_at,omitempty"`
	DrainedBy string     `json:"drained_by,omitempty"` // the admin's subject; "" in an organization admin's view
	// Sessions are the runs it holds (running on it).
	Sessions   []string  `json:"sessions"`
	Alive      bool      `json:"alive"` // a heartbeat within [runs] grace
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	revision   int64     // the row's version
}

// adapterNames returns the names of the runner's adapters.
func (rn Runner) adapterNames() []string {
	out := make([]string, len(rn.Adapters))
	for i, a := range rn.Adapters {
		out[i] = a.Name
	}
	return out
}

// leases reports whether the runner may be given runs: neither draining
// nor drained, and without a problem.
func (rn Runner) leases() bool { return !rn.Draining && !rn.Drained && rn.Problem == "" }

// RunnerInput is a runner registering.
type RunnerInput struct {
	Name     string
	Labels   map[string]string
	Capacity *int               // nil: DefaultCapacity
	Adapters []runproto.Adapter // nil (not given): every adapter, version unknown (a protocol version 1 runner)
	Version  string
	Problem  string
	// Sessions are the runs whose sessions the runner runs now; nil: not
	// said (an older runner). When said, the runner's runs Core holds as
	// running and not listed end interrupted (runner_restart).
	Sessions []string
}

func (in RunnerInput) validate() error {
	var v apperr.Validator
	name := strings.TrimSpace(in.Name)
	v.Check(name != "" && utf8.RuneCountInString(name) <= MaxRunnerName, "name", "must be 1–%d characters", MaxRunnerName)
	v.CheckErr("name", text.Line(name))
	v.Check(len(in.Labels) <= MaxLabels, "labels", "at most %d labels", MaxLabels)
	for k, val := range in.Labels {
		v.Check(labelRE.MatchString(k), "labels."+k, "the label name must match [a-z][a-z0-9_.-]{0,63}")
		v.Check(utf8.RuneCountInString(val) <= MaxLabelValue, "labels."+k, "must be at most %d characters", MaxLabelValue)
		v.CheckErr("labels."+k, text.Line(val))
	}
	if in.Capacity != nil {
		bounds.Capacity.Check(&v, "capacity", int64(*in.Capacity))
	}
	v.Check(len(in.Adapters) <= MaxAdapters, "adapters", "at most %d adapters (has %d)", MaxAdapters, len(in.Adapters))
	seen := map[string]bool{}
	for i, a := range in.Adapters {
		f := fmt.Sprintf("adapters[%d]", i)
		switch {
		case !slices.Contains(Adapters, a.Name):
			v.Add(f+".name", "%q is not claude-code or opencode", a.Name)
		case seen[a.Name]:
			v.Add(f+".name", "%s is listed twice", a.Name)
		}
		seen[a.Name] = true
		validateLine(&v, f+".version", a.Version, runproto.MaxVersion)
	}
	validateLine(&v, "version", in.Version, runproto.MaxVersion)
	validateLine(&v, "problem", in.Problem, runproto.MaxProblem)
	validateSessions(&v, in.Sessions)
	return v.Err()
}

// validateSessions checks the run ids a runner says it runs.
func validateSessions(v *apperr.Validator, sessions []string) {
	v.Check(int64(len(sessions)) <= bounds.Capacity.Max, "sessions", "at most %d runs (has %d)", bounds.Capacity.Max, len(sessions))
	for i, id := range sessions {
		v.Check(id != "" && len(id) <= 100, fmt.Sprintf("sessions[%d]", i), "must be a run id")
		v.CheckErr(fmt.Sprintf("sessions[%d]", i), text.Line(id))
	}
}

// validateLine checks an optional one-line text of at most max characters.
func validateLine(v *apperr.Validator, field, s string, max int) {
	v.Check(utf8.RuneCountInString(s) <= max, field, "must be at most %d characters (is %d)", max, utf8.RuneCountInString(s))
	v.CheckErr(field, text.Line(s))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err))
	}
	return b
}

// allAdapters is what a runner that names no adapters may run.
func allAdapters() []runproto.Adapter {
	out := make([]runproto.Adapter, len(Adapters))
	for i, name := range Adapters {
		out[i] = runproto.Adapter{Name: name}
	}
	return out
}

// RegisterRunner registers a runner for the runner token c (event
// runner.registered): a new one, or the token's runner of that name,
// updated. A runner registering again that says which sessions it runs
// (in.Sessions) has lost the others: in the same batch, each run Core holds
// as running on it and not listed ends interrupted with reason
// runner_restart (see restarted), instead of waiting for the grace period.
func (s *Service) RegisterRunner(ctx context.Context, c RunnerCaller, in RunnerInput) (Runner, error) {
	if err := in.validate(); err != nil {
		return Runner{}, err
	}
	rn := Runner{Name: strings.TrimSpace(in.Name), TokenID: c.TokenID, Labels: in.Labels, Capacity: DefaultCapacity,
		Adapters: in.Adapters, Version: in.Version, Problem: in.Problem}
	if rn.Labels == nil {
		rn.Labels = map[string]string{}
	}
	if in.Capacity != nil {
		rn.Capacity = *in.Capacity
	}
	if rn.Adapters == nil {
		rn.Adapters = allAdapters()
	}
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		old, found, err := s.runnerNamed(ctx, c.TokenID, rn.Name)
		if err != nil {
			return nil, err
		}
		now := s.now()
		at := now.UnixMilli()
		var write store.Statement
		if found {
			rn.ID, rn.CreatedAt, rn.revision = old.ID, old.CreatedAt, old.revision+1
			write = store.Stmt(`UPDATE runners SET labels = ?, capacity = ?, adapters = ?, runner_version = ?, problem = ?, draining = 0,
last_seen_at = MAX(last_seen_at, ?), version = version + 1 WHERE id = ? AND version = ?`,
				string(mustJSON(rn.Labels)), rn.Capacity, string(mustJSON(rn.Adapters)), rn.Version, rn.Problem, at, rn.ID, old.revision)
		} else {
			rn.ID, rn.CreatedAt, rn.revision = transition.NewID(), now, 1
			// The guard: another registration of this token and name
			// that won the race makes this one re-read and update it.
			write = store.Stmt(`INSERT INTO runners (id, name, token_id, labels, capacity, adapters, runner_version, problem, draining,
created_at, last_seen_at, version) SELECT ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 1
WHERE NOT EXISTS (SELECT 1 FROM runners WHERE token_id = ? AND name = ?)`,
				rn.ID, rn.Name, rn.TokenID, string(mustJSON(rn.Labels)), rn.Capacity, string(mustJSON(rn.Adapters)), rn.Version, rn.Problem,
				at, at, rn.TokenID, rn.Name)
		}
		rn.LastSeenAt = now
		e := event.Of(c.Actor, "", "", rn.ID, RunnerRegistered{
			ID: rn.ID, Name: rn.Name, TokenID: rn.TokenID, Labels: rn.Labels, Capacity: rn.Capacity, Adapters: rn.Adapters,
			Version: rn.Version, Problem: rn.Problem, Again: found})
		t := &transition.Transition{Events: []event.Event{e}, Guarded: []store.Statement{write}}
		if found && in.Sessions != nil {
			if err := s.restarted(ctx, t, c.Actor, rn.ID, in.Sessions); err != nil {
				return nil, err
			}
		}
		return t, nil
	})
	if err != nil {
		return Runner{}, err
	}
	return s.withSessions(ctx, rn)
}

// restarted adds to t the interruption (reason runner_restart) of each
// run Core holds as running on runner runnerID that is not among
// sessions, the runs the runner says it runs: their sessions ended with
// the runner. Each is guarded by the run's version and status.
func (s *Service) restarted(ctx context.Context, t *transition.Transition, actor event.Actor, runnerID string, sessions []string) error {
	held, err := queryRuns(ctx, s.store, `r.runner_id = ? AND r.status = 'running' ORDER BY r.id`, runnerID)
	if err != nil {
		return err
	}
	for _, r := range Gone(held, sessions) {
		var out Run
		part, err := s.finishTransition(ctx, r, actor, ending{StatusInterrupted,
			"the runner restarted: the session ended with it", ReasonRunnerRestart}, nil, r.Usage, false, true, &out)
		if err != nil {
			return err
		}
		t.Add(*part)
	}
	return nil
}

// Gone returns the runs among held (running on a runner) whose sessions
// the runner no longer runs: those not among sessions.
func Gone(held []Run, sessions []string) []Run {
	var out []Run
	for _, r := range held {
		if !slices.Contains(sessions, r.ID) {
			out = append(out, r)
		}
	}
	return out
}

const runnerColumns = `id, name, token_id, labels, capacity, adapters, runner_version, problem, draining, created_at, last_seen_at, version,
drained_at, drained_by`

// runnerNamed reads the token's runner of that name (the one seen last,
// should older Cores have registered several).
func (s *Service) runnerNamed(ctx context.Context, tokenID, name string) (Runner, bool, error) {
	runners, err := s.queryRunners(ctx, `token_id = ? AND name = ? ORDER BY last_seen_at DESC, id DESC LIMIT 1`, tokenID, name)
	if err != nil || len(runners) == 0 {
		return Runner{}, false, err
	}
	return runners[0], true, nil
}

func (s *Service) queryRunners(ctx context.Context, where string, args ...any) ([]Runner, error) {
	rows, err := s.store.Query(ctx, `SELECT `+runnerColumns+` FROM runners WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read runners: %w", err)
	}
	out := make([]Runner, rows.Len())
	cutoff := s.now().Add(-s.cfg.Grace)
	for i := range out {
		rn := &out[i]
		var labels, adapters string
		var created, seen int64
		var drained sql.NullInt64
		if err := rows.Scan(i, &rn.ID, &rn.Name, &rn.TokenID, &labels, &rn.Capacity, &adapters, &rn.Version, &rn.Problem, &rn.Draining,
			&created, &seen, &rn.revision, &drained, &rn.DrainedBy); err != nil {
			return nil, fmt.Errorf("scan runner: %w", err)
		}
		if err := json.Unmarshal([]byte(labels), &rn.Labels); err != nil {
			return nil, fmt.Errorf("runner %s labels: %w", rn.ID, err)
		}
		if err := json.Unmarshal([]byte(adapters), &rn.Adapters); err != nil {
			return nil, fmt.Errorf("runner %s adapters: %w", rn.ID, err)
		}
		if rn.Adapters == nil {
			rn.Adapters = []runproto.Adapter{}
		}
		rn.CreatedAt, rn.LastSeenAt = store.Time(created), store.Time(seen)
		if drained.Valid {
			at := store.Time(drained.Int64)
			rn.Drained, rn.DrainedAt = true, &at
		}
		rn.Alive = !rn.LastSeenAt.Before(cutoff)
		rn.Sessions = []string{}
	}
	return out, nil
}

// withSessions fills in the runs rn holds and whether it is alive.
func (s *Service) withSessions(ctx context.Context, rn Runner) (Runner, error) {
	rows, err := s.store.Query(ctx, `SELECT id FROM runs WHERE runner_id = ? AND status = 'running' ORDER BY started_at, id`, rn.ID)
	if err != nil {
		return rn, fmt.Errorf("read runner %s sessions: %w", rn.ID, err)
	}
	rn.Sessions = make([]string, rows.Len())
	for i := range rn.Sessions {
		if err := rows.Scan(i, &rn.Sessions[i]); err != nil {
			return rn, fmt.Errorf("scan runner session: %w", err)
		}
	}
	rn.Alive = !rn.LastSeenAt.Before(s.now().Add(-s.cfg.Grace))
	return rn, nil
}

// FindRunner returns the runner with the id if the runner token c
// registered it; any other runner is not found.
func (s *Service) FindRunner(ctx context.Context, c RunnerCaller, id string) (Runner, error) {
	runners, err := s.queryRunners(ctx, `id = ?`, id)
	if err != nil {
		return Runner{}, err
	}
	if len(runners) == 0 || runners[0].TokenID != c.TokenID {
		return Runner{}, apperr.New(apperr.NotFound, "runner %q not found", id)
	}
	return runners[0], nil
}

// touchRunner records that a runner was seen (last_seen_at: an operational
// column, written without an event).
func (s *Service) touchRunner(ctx context.Context, rn Runner) (time.Time, error) {
	now := s.now()
	_, err := s.store.Exec(ctx, store.Stmt(`UPDATE runners SET last_seen_at = MAX(last_seen_at, ?) WHERE id = ?`, now.UnixMilli(), rn.ID))
	if err != nil {
		return now, fmt.Errorf("touch runner %s: %w", rn.ID, err)
	}
	return now, nil
}

// HeartbeatInput is what a runner says in its heartbeat: the runs whose
// sessions run now, whether it drains, and its problem ("" when none).
type HeartbeatInput struct {
	Sessions []string
	Draining bool
	Problem  string
}

// RunnerBeat is the answer to a runner's heartbeat: the runner, and the
// runs among its sessions to stop at once.
type RunnerBeat struct {
	Runner
	Cancel []string `json:"cancel"`
}

func (in HeartbeatInput) validate() error {
	var v apperr.Validator
	validateSessions(&v, in.Sessions)
	validateLine(&v, "problem", in.Problem, runproto.MaxProblem)
	return v.Err()
}

// RunnerHeartbeat records that the runner is alive (last_seen_at; no
// event) and what it says: a change of draining or problem is a tracked
// change (event runner.updated). It answers the runner and the runs among
// in.Sessions whose session must stop: their cancellation was requested,
// they are not (or no longer) this runner's, or Core ended them without
// the runner (failed after the grace period). A run's liveness is its own
// heartbeat: this one keeps no run alive.
func (s *Service) RunnerHeartbeat(ctx context.Context, c RunnerCaller, runnerID string, in HeartbeatInput) (RunnerBeat, error) {
	if err := in.validate(); err != nil {
		return RunnerBeat{}, err
	}
	var rn Runner
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		var err error
		if rn, err = s.FindRunner(ctx, c, runnerID); err != nil {
			return nil, err
		}
		if rn.Draining == in.Draining && rn.Problem == in.Problem {
			return nil, nil
		}
		rn.Draining, rn.Problem, rn.revision = in.Draining, in.Problem, rn.revision+1
		e := event.Of(c.Actor, "", "", rn.ID, RunnerUpdated{Draining: in.Draining, Problem: in.Problem})
		return &transition.Transition{Events: []event.Event{e}, Guarded: []store.Statement{store.Stmt(
			`UPDATE runners SET draining = ?, problem = ?, version = version + 1 WHERE id = ? AND version = ?`,
			boolInt(in.Draining), in.Problem, rn.ID, rn.revision-1)}}, nil
	})
	if err != nil {
		return RunnerBeat{}, err
	}
	now, err := s.touchRunner(ctx, rn)
	if err != nil {
		return RunnerBeat{}, err
	}
	if now.After(rn.LastSeenAt) {
		rn.LastSeenAt = now
	}
	if rn, err = s.withSessions(ctx, rn); err != nil {
		return RunnerBeat{}, err
	}
	cancel, err := s.toStop(ctx, rn.ID, in.Sessions)
	return RunnerBeat{Runner: rn, Cancel: cancel}, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// toStop returns the runs among sessions whose session must stop (see
// RunnerHeartbeat).
func (s *Service) toStop(ctx context.Context, runnerID string, sessions []string) ([]string, error) {
	out := []string{}
	if len(sessions) == 0 {
		return out, nil
	}
	args := make([]any, len(sessions))
	for i, id := range sessions {
		args[i] = id
	}
	rows, err := s.store.Query(ctx, `SELECT id, COALESCE(runner_id, ''), status, cancel_requested, exit_status IS NULL FROM runs
WHERE id IN (?`+strings.Repeat(", ?", len(sessions)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read the runner's sessions: %w", err)
	}
	keep := map[string]bool{}
	for i := range rows.Len() {
		var id, runner, status string
		var cancelled, noExit bool
		if err := rows.Scan(i, &id, &runner, &status, &cancelled, &noExit); err != nil {
			return nil, fmt.Errorf("scan a session: %w", err)
		}
		endedWithout := IsFinal(status) && noExit // swept, or ended before any finish
		keep[id] = runner == runnerID && !cancelled && !endedWithout && status != StatusQueued
	}
	for _, id := range sessions {
		if !keep[id] && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// ListRunners returns every runner, the last seen first, with its
// sessions; orgIDs, when not nil, limits the sessions to the runs of those
// organizations (an organization admin's view, which also leaves out the
// token and the labels).
func (s *Service) ListRunners(ctx context.Context, orgIDs []string) ([]Runner, error) {
	runners, err := s.queryRunners(ctx, `1 = 1 ORDER BY last_seen_at DESC, id`)
	if err != nil {
		return nil, err
	}
	rows, err := s.store.Query(ctx, `SELECT runner_id, id, organization_id FROM runs WHERE status = 'running' AND runner_id IS NOT NULL
ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("read the runners' sessions: %w", err)
	}
	byRunner := map[string][]string{}
	for i := range rows.Len() {
		var runner, id, org string
		if err := rows.Scan(i, &runner, &id, &org); err != nil {
			return nil, fmt.Errorf("scan a session: %w", err)
		}
		if orgIDs == nil || slices.Contains(orgIDs, org) {
			byRunner[runner] = append(byRunner[runner], id)
		}
	}
	for i := range runners {
		rn := &runners[i]
		if s := byRunner[rn.ID]; s != nil {
			rn.Sessions = s
		}
		if orgIDs != nil {
			rn.TokenID, rn.Labels, rn.DrainedBy = "", map[string]string{}, ""
		}
	}
	return runners, nil
}

// RemoveGoneRunners removes the runners not seen since before cutoff
// (now − [retention] runners) that hold no running run, each in its own
// batch with its event runner.removed (actor: the system). A heartbeat
// that lands meanwhile keeps its runner: the delete is guarded by the last
// sighting. It returns the names of the runners removed.
func (s *Service) RemoveGoneRunners(ctx context.Context, cutoff time.Time, retention time.Duration) ([]string, error) {
	gone, err := s.queryRunners(ctx, `last_seen_at < ? ORDER BY last_seen_at, id`, cutoff.UnixMilli())
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, rn := range gone {
		e := event.Of(event.System, "", "", rn.ID, RunnerRemoved{Name: rn.Name, LastSeenAt: rn.LastSeenAt, Retention: retention.String()})
		t := &transition.Transition{Events: []event.Event{e}, Guarded: []store.Statement{store.Stmt(`DELETE FROM runners
WHERE id = ? AND last_seen_at < ? AND NOT EXISTS (SELECT 1 FROM runs WHERE runner_id = ? AND status = 'running')`,
			rn.ID, cutoff.UnixMilli(), rn.ID)}}
		switch err := s.applier.Apply(ctx, t); {
		case errors.Is(err, store.ErrLostRace): // seen again, or running a run: it stays
		case err != nil:
			return removed, fmt.Errorf("remove runner %s: %w", rn.ID, err)
		default:
			removed = append(removed, rn.Name)
		}
	}
	return removed, nil
}
