package flow

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
)

// Attention values: what a flow needs from a person that its status and
// waiting do not say. A flow's attention is derived whenever it is read (on
// the injected clock); nothing is written when it starts or ends.
const (
	// AttentionNoRunner: the flow runs an agent stage whose run no runner
	// has leased for UnclaimedAfter ([runs] unclaimed_after), or, at once,
	// whose run no live runner could lease: none that heartbeats (within
	// RunnerGrace), neither draining, drained nor with a problem, has the stage's
	// adapter. It ends when a runner leases the run, or when such a runner
	// comes before UnclaimedAfter.
	AttentionNoRunner = "no_runner"
	// AttentionStuck: the reconciler flagged the flow (flow.stuck: its
	// step was lost or failed for good, Service.Flag) and it waits for the
	// answer to the flag's blocking question; it ends when the flow
	// resumes (or stops).
	AttentionStuck = "stuck"
)

// Attentions lists every attention value.
var Attentions = []string{AttentionNoRunner, AttentionStuck}

// StuckSQL is the condition on flows of attention stuck: waiting for an
// answer, and flow.stuck is its latest event (flow.resumed follows the
// answer). A read model of package event's events table, on its
// (entity_type, entity_id, seq) index; flows must be the table's name in
// the query.
const StuckSQL = `flows.status = 'waiting' AND flows.waiting = 'answer' AND (SELECT e.type FROM events e
  WHERE e.entity_type = 'flow' AND e.entity_id = flows.id ORDER BY e.seq DESC LIMIT 1) = 'flow.stuck'`

// NoRunner is the condition on flows (the table's name in the query) of
// attention no_runner now, with its arguments.
func (s *Service) NoRunner() (sql string, args []any) { return noRunnerSQL, s.noRunnerArgs() }

// DefaultUnclaimedAfter is [runs] unclaimed_after's default.
const DefaultUnclaimedAfter = 2 * time.Minute

// capableSQL is the condition on a runner rn that could lease the queued
// run r: it neither drains nor is drained (an admin's drain) nor has a
// problem, and registered r's adapter.
// The adapters are the JSON Go wrote (package run: [{"name":"…",…}]), in
// which instr finds the exact name; json_each would scan a virtual table.
// A read model of package run's runners table.
const capableSQL = `rn.draining = 0 AND rn.drained_at IS NULL AND rn.problem = '' AND instr(rn.adapters, '"name":"' || r.adapter || '"') > 0`

// capableSeenSQL is when a runner that could lease flows' queued run was
// last seen (0 when none could, or the run is not queued).
const capableSeenSQL = `COALESCE((SELECT MAX(rn.last_seen_at) FROM runs r, runners rn
  WHERE r.id = flows.run_id AND r.status = 'queued' AND ` + capableSQL + `), 0)`

// noRunnerSQL is the condition on flows of attention no_runner; its
// arguments are the cutoffs (unix ms) from unclaimedCutoff and aliveCutoff.
const noRunnerSQL = `flows.status = 'running' AND flows.waiting = 'run'
  AND EXISTS (SELECT 1 FROM runs r WHERE r.id = flows.run_id AND r.status = 'queued' AND (r.created_at <= ?
    OR NOT EXISTS (SELECT 1 FROM runners rn WHERE rn.last_seen_at >= ? AND ` + capableSQL + `)))`

// noRunnerArgs are noRunnerSQL's arguments now.
func (s *Service) noRunnerArgs() []any { return []any{s.unclaimedCutoff(), s.aliveCutoff()} }

// aliveCutoff is the earliest last heartbeat (unix ms) of a live runner.
func (s *Service) aliveCutoff() int64 {
	grace := s.RunnerGrace
	if grace <= 0 {
		grace = run.DefaultGrace
	}
	return s.now().Add(-grace).UnixMilli()
}

// unclaimedCutoff is the latest creation time (unix ms) of a run that has
// waited for a runner too long now.
func (s *Service) unclaimedCutoff() int64 {
	after := s.UnclaimedAfter
	if after <= 0 {
		after = DefaultUnclaimedAfter
	}
	return s.now().Add(-after).UnixMilli()
}

// attend derives f's attention (f as read of attendedColumns).
func (s *Service) attend(f *Flow) {
	f.Attention = ""
	if f.stuck {
		f.Attention = AttentionStuck
	}
	if f.Status == StatusRunning && f.Waiting == WaitRun && f.runQueuedAt != 0 &&
		(f.runQueuedAt <= s.unclaimedCutoff() || f.capableSeenAt < s.aliveCutoff()) {
		f.Attention = AttentionNoRunner
	}
}

// NeedingAttention returns every flow that needs attention now, across
// all projects, the oldest first.
func (s *Service) NeedingAttention(ctx context.Context) ([]Flow, error) {
	return s.query(ctx, "list flows needing attention", `SELECT `+attendedColumns+` FROM flows WHERE `+noRunnerSQL+`
ORDER BY started_at, id`, s.noRunnerArgs()...)
}

// countNoRunner counts the flows of attention no_runner now.
func (s *Service) countNoRunner(ctx context.Context) (int64, error) {
	rows, err := s.Store.Query(ctx, `SELECT COUNT(*) FROM flows WHERE `+noRunnerSQL, s.noRunnerArgs()...)
	if err != nil {
		return 0, err
	}
	var n int64
	err = rows.Scan(0, &n)
	return n, err
}

// Summary is what a board shows of a ticket's flow.
type Summary struct {
	Stage     string `json:"stage"`
	Status    string `json:"status"`
	Waiting   string `json:"waiting"`   // "" when it waits for nothing
	Attention string `json:"attention"` // "" or one of Attentions
	// CostUSD is what the ticket's runs cost so far, over all its flows,
	// in US dollars (for people: a sum of micro-USD, shown rounded).
	CostUSD float64 `json:"cost_usd"`
	// Until: waiting for the provider, when its limit is expected to have
	// passed (omitted otherwise).
	Until *time.Time `json:"until,omitempty"`
}

// Summaries returns, in one read, the summary of each item's latest flow
// (its active one, else the last that ended) with what its runs cost so
// far (a sum over the runs_item index in the same read); an item that
// never had a flow is absent.
func (s *Service) Summaries(ctx context.Context, itemIDs []string) (map[string]Summary, error) {
	out := make(map[string]Summary, len(itemIDs))
	if len(itemIDs) == 0 {
		return out, nil
	}
	args := s.noRunnerArgs()
	for _, id := range itemIDs {
		args = append(args, id)
	}
	rows, err := s.Store.Query(ctx, `SELECT item_id, stage, status, COALESCE(waiting, ''), CASE WHEN `+noRunnerSQL+` THEN 1 ELSE 0 END,
CASE WHEN `+StuckSQL+` THEN 1 ELSE 0 END,
(SELECT COALESCE(SUM(r.cost_micros), 0) FROM runs r WHERE r.item_id = flows.item_id), COALESCE(wait_until, 0) FROM flows WHERE item_id IN (?`+strings.Repeat(", ?", len(itemIDs)-1)+`) ORDER BY started_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read flow summaries: %w", err)
	}
	for i := range rows.Len() {
		var item string
		var sm Summary
		var noRunner, stuck bool
		var cost, until int64
		if err := rows.Scan(i, &item, &sm.Stage, &sm.Status, &sm.Waiting, &noRunner, &stuck, &cost, &until); err != nil {
			return nil, err
		}
		switch {
		case noRunner:
			sm.Attention = AttentionNoRunner
		case stuck:
			sm.Attention = AttentionStuck
		}
		sm.CostUSD = float64(cost) / 1e6
		if sm.Waiting == WaitProvider {
			sm.Until = store.OptionalTime(until)
		}
		out[item] = sm // a later flow replaces an earlier one
	}
	return out, nil
}
