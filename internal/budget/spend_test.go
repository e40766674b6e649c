package budget_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// seed writes the rows the sums read: organizations, projects, tickets and
// their runs, straight into the store.
type seed struct {
	t     *testing.T
	s     store.Store
	batch []store.Statement
	n     int
}

func (sd *seed) add(q string, args ...any) { sd.batch = append(sd.batch, store.Stmt(q, args...)) }

func (sd *seed) org(id string) {
	sd.add(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES (?, ?, ?, 0, 0, 1)`, id, strings.ToLower(id), id)
}

func (sd *seed) project(id, org string) {
	sd.add(`INSERT INTO projects (id, organization_id, key, name, merge_policy, required_approvals, required_checks, concurrency_limit,
ticket_types, paused, created_at, updated_at, version) VALUES (?, ?, ?, ?, 'manual', 0, '[]', 0, '[]', 0, 0, 0, 1)`, id, org, id, id)
}

// ticket adds an item of project in org and its flow (id "f-"+id).
func (sd *seed) ticket(id, project, org string) {
	sd.n++
	sd.add(`INSERT INTO items (id, organization_id, project_id, number, key, type, title, description, acceptance_criteria, epic_id, state,
created_by, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, 'task', 't', '', '', NULL, 'in_progress', 'test', 0, 0, 1)`,
		id, org, project, sd.n, fmt.Sprintf("%s-%d", project, sd.n))
	sd.add(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration,
max_iterations, step, status, waiting, run_id, outcome, report, outcome_stage, pull_request, started_at, updated_at, finished_at, version)
VALUES (?, ?, ?, ?, 'default', 0, '{}', 'build', 1, 3, 1, 'running', NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 1)`,
		"f-"+id, org, project, id)
}

// run adds a run of ticket with usage n (input n, output 2n, cost n
// micro-USD), finished at (nil: still running).
func (sd *seed) run(ticket, project, org string, n int64, finished *time.Time) {
	sd.n++
	status, fin := "running", any(nil)
	if finished != nil {
		status, fin = "succeeded", finished.UnixMilli()
	}
	sd.add(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions,
skills, artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error, input_tokens, output_tokens,
cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, 'build', 1, ?, 'claude-code', '', '', '[]', '{}', ?, 'runner', NULL, NULL, NULL, 0, NULL, NULL, ?, ?, ?, 0, 0, 0, 0, ?, 0, 2)`,
		fmt.Sprintf("r%d", sd.n), org, project, ticket, "f-"+ticket, sd.n, status, n, 2*n, n, fin)
}

func (sd *seed) write() {
	sd.t.Helper()
	if _, err := sd.s.Exec(context.Background(), sd.batch...); err != nil {
		sd.t.Fatal(err)
	}
	sd.batch = nil
}

func at(t time.Time) *time.Time { return &t }

// The spend sums, on every engine: a ticket's spend is every run of it,
// whenever it finished (and a run still going counts as a run, costing
// nothing yet); a project's day is its runs that finished from the day's
// first millisecond up to, not including, the next day's, the day being
// midnight to midnight in the budget's time zone — here Berlin's
// 29 March 2026, 23 hours long (summer time starts). Runs of the other
// tickets, the other projects of the organization, another organization
// and the days around are there and count for none of it.
func TestSpendSums(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 29, 0, 0, 0, 0, berlin) // 28 March 23:00 UTC
	end := time.Date(2026, 3, 30, 0, 0, 0, 0, berlin)   // 29 March 22:00 UTC
	if end.Sub(start) != 23*time.Hour {
		t.Fatalf("the day is %s long", end.Sub(start))
	}
	noon := time.Date(2026, 3, 29, 12, 0, 0, 0, berlin)
	storetest.Each(t, func(t *testing.T, s store.Store) {
		sd := &seed{t: t, s: s}
		sd.org("OA")
		sd.org("OB")
		sd.project("P1", "OA")
		sd.project("P2", "OA")
		sd.project("P3", "OB")
		sd.ticket("T1", "P1", "OA")
		sd.ticket("T2", "P1", "OA")
		sd.ticket("T3", "P2", "OA")
		sd.ticket("T4", "P3", "OB")
		sd.run("T1", "P1", "OA", 1, at(start.Add(-time.Millisecond)))     // the day before, by a millisecond
		sd.run("T1", "P1", "OA", 10, at(start))                           // the day's first millisecond
		sd.run("T2", "P1", "OA", 100, at(noon))                           // another ticket, same day
		sd.run("T1", "P1", "OA", 1000, at(end.Add(-time.Millisecond)))    // the day's last millisecond
		sd.run("T1", "P1", "OA", 10000, at(end))                          // the next day
		sd.run("T1", "P1", "OA", 100000, at(start.AddDate(-1, 0, 0)))     // a year before
		sd.run("T1", "P1", "OA", 0, nil)                                  // still running
		sd.run("T3", "P2", "OA", 1000000, at(noon))                       // another project of the organization
		sd.run("T4", "P3", "OB", 10000000, at(noon))                      // another organization
		sd.run("T2", "P1", "OA", 100000000, at(start.Add(-12*time.Hour))) // the day before, in UTC the same date
		sd.write()

		svc := &budget.Service{Store: s, Clock: clock.NewFake(noon), Location: berlin}
		ctx := context.Background()
		for _, c := range []struct {
			name string
			got  func() (budget.Usage, error)
			want budget.Usage
		}{
			{"ticket T1", func() (budget.Usage, error) { return svc.TicketUsage(ctx, "T1") }, usage(6, 1, 10, 1000, 10000, 100000, 0)},
			{"ticket T2", func() (budget.Usage, error) { return svc.TicketUsage(ctx, "T2") }, usage(2, 100, 100000000)},
			{"ticket T4", func() (budget.Usage, error) { return svc.TicketUsage(ctx, "T4") }, usage(1, 10000000)},
			{"a ticket without runs", func() (budget.Usage, error) { return svc.TicketUsage(ctx, "nope") }, usage(0)},
			{"P1 at noon", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P1", noon) }, usage(3, 10, 100, 1000)},
			{"P1 at the day's start", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P1", start) }, usage(3, 10, 100, 1000)},
			{"P1 at the day's end", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P1", end.Add(-time.Millisecond)) }, usage(3, 10, 100, 1000)},
			{"P1 the next day", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P1", end) }, usage(1, 10000)},
			{"P1 the day before", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P1", start.Add(-time.Millisecond)) }, usage(2, 1, 100000000)},
			{"P2 at noon", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P2", noon) }, usage(1, 1000000)},
			{"P3 at noon", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P3", noon) }, usage(1, 10000000)},
		} {
			got, err := c.got()
			if err != nil || got != c.want {
				t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
			}
		}
		if got, err := svc.TicketSpend(ctx, "T1"); got != 111011 || err != nil {
			t.Errorf("TicketSpend(T1) = %d, %v", got, err)
		}
		if got, err := svc.DaySpend(ctx, "P1", noon); got != 1110 || err != nil {
			t.Errorf("DaySpend(P1) = %d, %v", got, err)
		}

		// The gate reads today's spend on the clock, and the ticket's.
		for _, c := range []struct {
			now  time.Time
			l    budget.Limits
			kind string
			sp   budget.Spend
		}{
			{noon, budget.Limits{PerDay: ptr(1110)}, budget.DaySpent, budget.Spend{Day: 1110}},
			{noon, budget.Limits{PerDay: ptr(1111)}, budget.OK, budget.Spend{Day: 1110}},
			{end, budget.Limits{PerDay: ptr(1111)}, budget.DaySpent, budget.Spend{Day: 10000}},
			{end, budget.Limits{PerDay: ptr(10001)}, budget.OK, budget.Spend{Day: 10000}},
			{noon, budget.Limits{PerTicket: ptr(111011)}, budget.TicketSpent, budget.Spend{Ticket: 111011}},
			{noon, budget.Limits{PerTicket: ptr(111012), PerDay: ptr(1111)}, budget.OK, budget.Spend{Ticket: 111011, Day: 1110}},
			{noon, budget.Limits{PerTicket: ptr(111011), PerDay: ptr(1110)}, budget.TicketSpent, budget.Spend{Ticket: 111011, Day: 1110}},
			{noon, budget.Limits{}, budget.OK, budget.Spend{}}, // nothing read without limits
		} {
			svc.Clock = clock.NewFake(c.now)
			v, sp, err := svc.Gate(ctx, c.l, "P1", "T1")
			if err != nil || v.Kind != c.kind || sp != c.sp {
				t.Errorf("Gate at %s with %+v: %+v, %+v, %v; want %s, %+v", c.now, c.l, v, sp, err, c.kind, c.sp)
			}
		}
	})
}

// usage is the rollup of runs n made by seed.run.
func usage(runs int64, ns ...int64) budget.Usage {
	u := budget.Usage{Runs: runs}
	for _, n := range ns {
		u.InputTokens += n
		u.OutputTokens += 2 * n
		u.CostMicros += n
	}
	return u
}

func ptr(v int64) *int64 { return &v }

// runUsage adds a finished run of ticket with the given usage, which may
// be beyond the API's bounds (a row written around it).
func (sd *seed) runUsage(ticket, project, org string, in, out, cost int64, finished time.Time) {
	sd.n++
	sd.add(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions,
skills, artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error, input_tokens, output_tokens,
cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, 'build', 1, ?, 'claude-code', '', '', '[]', '{}', 'succeeded', 'runner', NULL, NULL, NULL, 0, NULL, NULL, ?, ?, ?, 0, 0, 0, 0, ?, 0, 2)`,
		fmt.Sprintf("r%d", sd.n), org, project, ticket, "f-"+ticket, sd.n, in, out, cost, finished.UnixMilli())
}

// TestRollupsBeyondInt64Saturate: a rollup whose rows sum past the largest
// int64 (or below the smallest) reads as that bound — a spent budget —
// instead of failing or wrapping around, on every engine; a single row at
// the largest int64 reads as itself; the other tickets' and projects'
// rollups are untouched.
func TestRollupsBeyondInt64Saturate(t *testing.T) {
	const maxI, minI = int64(math.MaxInt64), int64(math.MinInt64)
	noon := time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC)
	storetest.Each(t, func(t *testing.T, s store.Store) {
		sd := &seed{t: t, s: s}
		sd.org("OA")
		sd.project("P1", "OA")
		sd.project("P2", "OA")
		sd.ticket("T1", "P1", "OA")
		sd.ticket("T2", "P1", "OA")
		sd.ticket("T3", "P2", "OA")
		sd.runUsage("T1", "P1", "OA", maxI, minI, maxI, noon)
		sd.runUsage("T1", "P1", "OA", maxI, minI, 1_000_000, noon)
		sd.runUsage("T2", "P1", "OA", maxI, 0, maxI, noon)
		sd.runUsage("T3", "P2", "OA", 5, 6, 7, noon)
		sd.write()
		svc := &budget.Service{Store: s, Clock: clock.NewFake(noon)}
		ctx := context.Background()
		for _, c := range []struct {
			name string
			got  func() (budget.Usage, error)
			want budget.Usage
		}{
			{"T1, past both ends", func() (budget.Usage, error) { return svc.TicketUsage(ctx, "T1") }, budget.Usage{InputTokens: maxI, OutputTokens: minI, CostMicros: maxI, Runs: 2}},
			{"T2, one row at the largest", func() (budget.Usage, error) { return svc.TicketUsage(ctx, "T2") }, budget.Usage{InputTokens: maxI, CostMicros: maxI, Runs: 1}},
			{"P1's day", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P1", noon) }, budget.Usage{InputTokens: maxI, OutputTokens: minI, CostMicros: maxI, Runs: 3}},
			{"P2's day", func() (budget.Usage, error) { return svc.DayUsage(ctx, "P2", noon) }, budget.Usage{InputTokens: 5, OutputTokens: 6, CostMicros: 7, Runs: 1}},
		} {
			got, err := c.got()
			if err != nil || got != c.want {
				t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
			}
		}
		l := maxI
		if v, _, err := svc.Gate(ctx, budget.Limits{PerDay: &l}, "P1", "T3"); err != nil || v.Kind != budget.DaySpent {
			t.Errorf("the gate over a saturated day: %+v %v, want day spent", v, err)
		}
	})
}
