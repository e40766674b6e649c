package tracker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

func TestBlockers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		a, b, c := w.item("task", "A"), w.item("task", "B"), w.item("epic", "C")
		add := func(item, blocker Item) func() error {
			return func() error { _, err := w.svc.AddBlocker(ctx, itemAlice, item.ID, blocker.Key); return err }
		}
		evs := w.expect("A blocked by B", "", "ticket.blocker_added", add(a, b))
		if p := payloadOf(t, evs[0]); p["blocker"] != "ACME-2" || p["blocker_id"] != b.ID || evs[0].EntityID != a.ID {
			t.Fatalf("payload %v", p)
		}
		w.expect("B blocked by C", "", "ticket.blocker_added", add(b, c))
		w.expect("again", "", "", func() error {
			added, err := w.svc.AddBlocker(ctx, itemAlice, a.ID, b.ID)
			if added {
				t.Error("a repeated addition reports added")
			}
			return err
		})
		w.expect("self", apperr.Unprocessable, "", add(a, a))
		w.expect("C blocked by A closes a cycle", apperr.Unprocessable, "", func() error {
			err := add(c, a)()
			if err == nil || !strings.Contains(err.Error(), "ACME-3 → ACME-1 → ACME-2 → ACME-3") {
				t.Errorf("the error names the cycle: %v", err)
			}
			return err
		})
		w.expect("B blocked by A closes a two-cycle", apperr.Unprocessable, "", add(b, a))
		w.expect("the epic blocked by A", apperr.Unprocessable, "", add(c, a))
		d := w.item("task", "D")
		w.expect("the epic blocked by D", "", "epic.blocker_added", add(c, d))
		w.expect("A blocked by D (a diamond, no cycle)", "", "ticket.blocker_added", add(a, d))
		if got := w.get(a.ID); fmt.Sprint(got.BlockedBy, got.Blocks) != "[ACME-2 ACME-4] []" {
			t.Fatalf("A: blocked by %v, blocks %v", got.BlockedBy, got.Blocks)
		}
		if got := w.get(d.ID); fmt.Sprint(got.BlockedBy, got.Blocks) != "[] [ACME-1 ACME-3]" {
			t.Fatalf("D: blocked by %v, blocks %v", got.BlockedBy, got.Blocks)
		}
		// Removing B ← C opens the way for C ← A.
		w.expect("remove", "", "ticket.blocker_removed", func() error { return w.svc.RemoveBlocker(ctx, itemAlice, b.ID, c.ID) })
		w.expect("remove again", apperr.NotFound, "", func() error { return w.svc.RemoveBlocker(ctx, itemAlice, b.ID, c.ID) })
		w.expect("C blocked by A now", "", "epic.blocker_added", add(c, a))
		// Another organization's items are not found.
		o2, err := w.ten.CreateOrganization(ctx, itemAlice, tenancy.OrganizationInput{Slug: "globex", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		p2, err := w.ten.CreateProject(ctx, itemAlice, o2.ID, tenancy.ProjectInput{Key: "GLX", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		g, err := w.svc.CreateItem(ctx, itemAlice, p2, ItemInput{Type: "task", Title: "G"})
		if err != nil {
			t.Fatal(err)
		}
		w.expect("cross-organization", apperr.NotFound, "", add(a, g))
		w.expect("unknown", apperr.NotFound, "", func() error { _, err := w.svc.AddBlocker(ctx, itemAlice, a.ID, "ACME-99"); return err })
		// Blockers across projects of one organization are fine.
		p3, err := w.ten.CreateProject(ctx, itemAlice, w.org.ID, tenancy.ProjectInput{Key: "OPS", Name: "Ops"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := w.svc.CreateItem(ctx, itemAlice, p3, ItemInput{Type: "task", Title: "O"})
		if err != nil {
			t.Fatal(err)
		}
		w.expect("cross-project", "", "ticket.blocker_added", add(o, a))
		w.expect("cross-project cycle", apperr.Unprocessable, "", add(d, o))
		// Every change bumped the organization's graph version: 7 changes.
		rows, err := st.Query(ctx, `SELECT version FROM graph_versions WHERE organization_id = ?`, w.org.ID)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		if err := rows.Scan(0, &v); err != nil || v != 7 {
			t.Fatalf("graph version %d, %v", v, err)
		}
	})
}

// TestConcurrentOppositeBlockers: A ← B and B ← A added at once; exactly
// one succeeds and the other is refused as a cycle, round after round.
func TestConcurrentOppositeBlockers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		for round := range 8 {
			a, b := w.item("task", fmt.Sprintf("A%d", round)), w.item("task", fmt.Sprintf("B%d", round))
			before := w.lastSeq()
			start := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, pair := range [][2]Item{{a, b}, {b, a}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = w.svc.AddBlocker(ctx, itemAlice, pair[0].ID, pair[1].ID)
				}()
			}
			close(start)
			wg.Wait()
			ok, cycles := 0, 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case apperr.Code(err) == apperr.Unprocessable:
					cycles++
				default:
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if ok != 1 || cycles != 1 {
				t.Fatalf("round %d: %d succeeded, %d refused: %v", round, ok, cycles, errs)
			}
			if evs := w.events(before); len(evs) != 1 || evs[0].Type != "ticket.blocker_added" {
				t.Fatalf("round %d: events %+v", round, evs)
			}
			ga, gb := w.get(a.ID), w.get(b.ID)
			if len(ga.BlockedBy)+len(gb.BlockedBy) != 1 {
				t.Fatalf("round %d: A blocked by %v, B blocked by %v", round, ga.BlockedBy, gb.BlockedBy)
			}
		}
	})
}

// TestConcurrentCycleOfThree: the three edges of a triangle added at once:
// exactly one is refused as a cycle, round after round.
func TestConcurrentCycleOfThree(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		for round := range 4 {
			x, y, z := w.item("task", "X"), w.item("task", "Y"), w.item("task", "Z")
			start := make(chan struct{})
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for i, pair := range [][2]Item{{x, y}, {y, z}, {z, x}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = w.svc.AddBlocker(ctx, itemAlice, pair[0].ID, pair[1].ID)
				}()
			}
			close(start)
			wg.Wait()
			refused := 0
			for _, err := range errs {
				if err != nil {
					if apperr.Code(err) != apperr.Unprocessable {
						t.Fatalf("round %d: %v", round, err)
					}
					refused++
				}
			}
			if refused != 1 {
				t.Fatalf("round %d: %d refused: %v", round, refused, errs)
			}
		}
	})
}

// TestOpenBlockersKeepATicketFromStarting: a ticket's open blockers are the
// items blocking it or its epic that are neither done nor cancelled, by
// number, and the start's guard (Unblocked) changes no row while there is
// one, so that a blocker added after a start read none makes it lose its
// race.
func TestOpenBlockersKeepATicketFromStarting(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		epic := w.item("epic", "E")
		a := w.item("task", "A", func(in *ItemInput) { in.Epic = epic.Key })
		b, c, d := w.item("task", "B"), w.item("task", "C"), w.item("task", "D")
		check := func(name, want string, wantRows int64) {
			t.Helper()
			open, err := w.svc.OpenBlockers(ctx, w.get(a.ID))
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(open); got != want {
				t.Errorf("%s: open blockers %s, want %s", name, got, want)
			}
			res, err := st.Exec(ctx, Unblocked(w.get(a.ID)))
			if err != nil {
				t.Fatal(err)
			}
			if res[0].RowsAffected != wantRows {
				t.Errorf("%s: the start's guard changed %d rows, want %d", name, res[0].RowsAffected, wantRows)
			}
		}
		check("none", "[]", 1)
		for _, pair := range [][2]Item{{a, c}, {epic, b}, {epic, d}} {
			if _, err := w.svc.AddBlocker(ctx, itemAlice, pair[0].ID, pair[1].ID); err != nil {
				t.Fatal(err)
			}
		}
		check("its own and its epic's", "[{ACME-3 backlog} {ACME-4 backlog} {ACME-5 backlog}]", 0)
		for st2, it := range map[string]Item{StateDone: b, StateCancelled: d} {
			if _, err := st.Exec(ctx, store.Stmt(`UPDATE items SET state = ? WHERE id = ?`, st2, it.ID)); err != nil {
				t.Fatal(err)
			}
		}
		check("done and cancelled ones do not count", "[{ACME-4 backlog}]", 0)
		if err := w.svc.RemoveBlocker(ctx, itemAlice, a.ID, c.ID); err != nil {
			t.Fatal(err)
		}
		check("removed", "[]", 1)
	})
}
