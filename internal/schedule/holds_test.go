package schedule_test

import (
	"slices"
	"testing"

	"github.com/ballet/ballet/internal/schedule"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// holds reads GET /items/{key} and returns the codes of its start holds;
// present is false when the answer has no start (not a ready ticket).
func (w *world) holds(key string) (codes []string, present bool) {
	w.T.Helper()
	var it struct {
		Start *struct {
			Holds []schedule.Hold `json:"holds"`
		} `json:"start"`
	}
	w.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(w.T, &it)
	if it.Start == nil {
		return nil, false
	}
	codes = []string{}
	for _, h := range it.Start.Holds {
		if h.Message == "" || !slices.Contains(schedule.Holds, h.Code) {
			w.T.Fatalf("%s: hold %+v", key, h)
		}
		codes = append(codes, h.Code)
	}
	return codes, true
}

func (w *world) wantHolds(key string, want ...string) {
	w.T.Helper()
	got, present := w.holds(key)
	if !present || !slices.Equal(got, want) {
		w.T.Fatalf("%s: holds %v (start shown: %v), want %v", key, got, present, want)
	}
}

// TestHolds: a ready ticket's read says what keeps it from starting, as the
// scheduler sees it — an open blocker, no repository, a paused project or
// platform, a full project or platform limit, a used-up daily budget — and
// nothing for a ticket that would start; a ticket that is not ready shows
// no start at all.
func TestHolds(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		free := w.ready("ACME")
		w.wantHolds(free)

		w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "NOREPO", "name": "No repository"})
		first := w.item("NOREPO", "task", "backlog", nil)
		blocked := w.ready("NOREPO")
		w.Admin(201, "POST", "/api/v1/items/"+blocked+"/blockers/"+first, nil)
		w.wantHolds(blocked, schedule.HoldBlocked, schedule.HoldNoRepository)
		if _, present := w.holds(first); present {
			t.Fatalf("%s is in the backlog: its read shows start holds", first)
		}

		w.patchProject("ACME", map[string]any{"paused": true})
		w.wantHolds(free, schedule.HoldProjectPaused)
		w.patchProject("ACME", map[string]any{"paused": false})
		w.Admin(200, "POST", "/api/v1/platform/pause", nil)
		w.wantHolds(free, schedule.HoldPlatformPaused)
		w.Admin(200, "POST", "/api/v1/platform/resume", nil)

		// One running flow fills a limit of 1, the project's then the
		// platform's.
		w.patchProject("ACME", map[string]any{"concurrency_limit": 1})
		w.expect(free)
		if _, present := w.holds(free); present {
			t.Fatalf("%s runs: its read shows start holds", free)
		}
		next := w.ready("ACME")
		w.wantHolds(next, schedule.HoldProjectLimit)
		w.patchProject("ACME", map[string]any{"concurrency_limit": 0})
		w.setPlatformLimit(1)
		w.wantHolds(next, schedule.HoldPlatformLimit)
		w.setPlatformLimit(0)

		w.patchProject("ACME", map[string]any{"budgets": map[string]any{"per_day_usd": 0}})
		w.wantHolds(next, schedule.HoldDayBudget)
		w.patchProject("ACME", map[string]any{"budgets": map[string]any{"per_day_usd": nil, "per_ticket_usd": 0}})
		w.wantHolds(next, schedule.HoldTicketBudget)
	})
}
