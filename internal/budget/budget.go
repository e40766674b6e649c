// Package budget keeps agent spend within a project's limits (spec
// pipelines.md "Budgets"): usage is recorded on each run, rolled up per
// ticket and per project per day (in a configured time zone), and an agent
// stage starts only within budget. The verdict is pure code; the rollups
// are indexed sums over runs.
package budget

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
)

// Limits are a project's budgets in micro-USD; nil means no limit.
type Limits struct {
	PerTicket *int64
	PerDay    *int64
}

// Spend is what was used.
type Spend struct {
	Ticket int64 // micro-USD on this ticket, all time
	Day    int64 // micro-USD in the project today
}

// Verdicts.
const (
	OK          = "ok"
	TicketSpent = "ticket" // the ticket budget is used up: ask a human
	DaySpent    = "day"    // the daily budget is used up: wait for tomorrow
)

// Verdict says whether an agent stage may start.
type Verdict struct {
	Kind   string
	Reason string
}

// Check decides from limits and spend. A used-up ticket budget wins over a
// used-up daily one: waiting for tomorrow would not help it.
func Check(l Limits, s Spend) Verdict {
	if l.PerTicket != nil && s.Ticket >= *l.PerTicket {
		return Verdict{Kind: TicketSpent, Reason: fmt.Sprintf("the ticket budget is used up: spent %s of %s", USD(s.Ticket), USD(*l.PerTicket))}
	}
	if l.PerDay != nil && s.Day >= *l.PerDay {
		return Verdict{Kind: DaySpent, Reason: fmt.Sprintf("the project's daily budget is used up: spent %s of %s today", USD(s.Day), USD(*l.PerDay))}
	}
	return Verdict{Kind: OK}
}

// USD formats micro-USD.
func USD(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) }

// Service reads spend.
type Service struct {
	Store    store.Store
	Clock    clock.Clock
	Location *time.Location // the budget day's time zone (UTC when nil)
}

// Day returns the budget day containing t: its start and end.
func (s *Service) Day(t time.Time) (time.Time, time.Time) {
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	lt := t.In(loc)
	start := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	return start, start.AddDate(0, 0, 1)
}

// TicketSpend sums the cost of every run of an item.
func (s *Service) TicketSpend(ctx context.Context, itemID string) (int64, error) {
	u, err := s.TicketUsage(ctx, itemID)
	return u.CostMicros, err
}

// DaySpend sums the cost of a project's runs that finished during the day
// that contains t.
func (s *Service) DaySpend(ctx context.Context, projectID string, t time.Time) (int64, error) {
	u, err := s.DayUsage(ctx, projectID, t)
	return u.CostMicros, err
}

// Usage is a rollup of runs' usage.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CostMicros   int64
	Runs         int64
}

// TicketUsage rolls up the usage of every run of an item.
func (s *Service) TicketUsage(ctx context.Context, itemID string) (Usage, error) {
	return s.usage(ctx, `WHERE item_id = ?`, itemID)
}

// DayUsage rolls up the usage of a project's runs that finished during the
// day that contains t.
func (s *Service) DayUsage(ctx context.Context, projectID string, t time.Time) (Usage, error) {
	start, end := s.Day(t)
	return s.usage(ctx, `WHERE project_id = ? AND finished_at >= ? AND finished_at < ?`, projectID, start.UnixMilli(), end.UnixMilli())
}

// usage sums runs' usage with TOTAL, SQLite's floating-point sum that
// never overflows (SUM fails on an integer overflow, on every engine): a
// stored row beyond the documented bounds — an old one, or one written
// around the API — saturates its rollup at the largest int64, a spent
// budget, instead of failing every read of it, and never touches another
// project's.
func (s *Service) usage(ctx context.Context, where string, args ...any) (Usage, error) {
	rows, err := s.Store.Query(ctx, `SELECT TOTAL(input_tokens), TOTAL(output_tokens), TOTAL(cost_micros), COUNT(*) FROM runs `+where, args...)
	if err != nil {
		return Usage{}, fmt.Errorf("read usage: %w", err)
	}
	var in, out, cost float64
	var u Usage
	if err := rows.Scan(0, &in, &out, &cost, &u.Runs); err != nil {
		return Usage{}, fmt.Errorf("read usage: %w", err)
	}
	u.InputTokens, u.OutputTokens, u.CostMicros = saturate(in), saturate(out), saturate(cost)
	return u, nil
}

// saturate is x as an int64, clamped to its range (a sum past it is as
// spent as can be).
func saturate(x float64) int64 {
	switch {
	case x >= math.MaxInt64:
		return math.MaxInt64
	case x <= math.MinInt64:
		return math.MinInt64
	}
	return int64(x)
}

// Gate reads the spend that limits l and decides.
func (s *Service) Gate(ctx context.Context, l Limits, projectID, itemID string) (Verdict, Spend, error) {
	var sp Spend
	var err error
	if l.PerTicket != nil {
		if sp.Ticket, err = s.TicketSpend(ctx, itemID); err != nil {
			return Verdict{}, sp, err
		}
	}
	if l.PerDay != nil {
		if sp.Day, err = s.DaySpend(ctx, projectID, s.Clock.Now()); err != nil {
			return Verdict{}, sp, err
		}
	}
	return Check(l, sp), sp, nil
}

// ProjectUsage rolls up the usage of the runs of each project that
// finished in [from, to), by project id (projects without such a run are
// absent): the spend of a digest's period.
func (s *Service) ProjectUsage(ctx context.Context, from, to time.Time) (map[string]Usage, error) {
	rows, err := s.Store.Query(ctx, `SELECT project_id, TOTAL(input_tokens), TOTAL(output_tokens), TOTAL(cost_micros), COUNT(*) FROM runs
WHERE finished_at >= ? AND finished_at < ? GROUP BY project_id`, from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read usage per project: %w", err)
	}
	out := make(map[string]Usage, rows.Len())
	for i := range rows.Len() {
		var project string
		var in, outTok, cost float64
		var u Usage
		if err := rows.Scan(i, &project, &in, &outTok, &cost, &u.Runs); err != nil {
			return nil, fmt.Errorf("read usage per project: %w", err)
		}
		u.InputTokens, u.OutputTokens, u.CostMicros = saturate(in), saturate(outTok), saturate(cost)
		out[project] = u
	}
	return out, nil
}
