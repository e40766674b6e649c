package transition_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/keys"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

var start = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// setup creates a widgets table: a tracked entity with a version.
func setup(t *testing.T, s store.Store) *transition.Applier {
	t.Helper()
	if _, err := s.Exec(context.Background(),
		store.Stmt(`CREATE TABLE widgets (id TEXT PRIMARY KEY, state TEXT NOT NULL, version INTEGER NOT NULL)`)); err != nil {
		t.Fatal(err)
	}
	return &transition.Applier{Store: s, Clock: clock.NewFake(start)}
}

func createWidget(t *testing.T, a *transition.Applier, id string) {
	t.Helper()
	err := a.Apply(context.Background(), &transition.Transition{
		Events:     []event.Event{widgetEvent(id, "widget.created", 1)},
		Statements: []store.Statement{store.Stmt(`INSERT INTO widgets (id, state, version) VALUES (?, 'new', 1)`, id)},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func widgetEvent(id, typ string, version int64) event.Event {
	e := event.Event{OrganizationID: "org1", ProjectID: "p1", EntityType: "widget", EntityID: id, Type: typ,
		Payload: []byte(fmt.Sprintf(`{"version":%d}`, version))}
	e.SetActor(event.System)
	return e
}

// bump returns the transition that moves a widget from version v to v+1.
func bump(id string, v int64, state string) *transition.Transition {
	return &transition.Transition{
		Events:  []event.Event{widgetEvent(id, "widget.state_changed", v+1)},
		Guarded: []store.Statement{store.Stmt(`UPDATE widgets SET state = ?, version = version + 1 WHERE id = ? AND version = ?`, state, id, v)},
		Jobs:    []job.Spec{{Kind: "widget.follow_up", Payload: map[string]any{"id": id, "version": v + 1}}},
	}
}

func readWidget(t *testing.T, s store.Store, id string) (state string, version int64) {
	t.Helper()
	rows, err := s.Query(context.Background(), `SELECT state, version FROM widgets WHERE id = ?`, id)
	if err != nil || rows.Len() != 1 {
		t.Fatalf("read widget %s: %v (%d rows)", id, err, rows.Len())
	}
	if err := rows.Scan(0, &state, &version); err != nil {
		t.Fatal(err)
	}
	return state, version
}

func count(t *testing.T, s store.Store, q string, args ...any) int64 {
	t.Helper()
	rows, err := s.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLostRaceCommitsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		createWidget(t, a, "w1")
		if err := a.Apply(context.Background(), bump("w1", 1, "first")); err != nil {
			t.Fatal(err)
		}
		events, jobs := count(t, s, `SELECT COUNT(*) FROM events`), count(t, s, `SELECT COUNT(*) FROM jobs`)
		// A stale version: the update matches nothing.
		err := a.Apply(context.Background(), bump("w1", 1, "stale"))
		if !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("want ErrLostRace, got %v", err)
		}
		if state, v := readWidget(t, s, "w1"); state != "first" || v != 2 {
			t.Fatalf("widget changed by a lost race: %s v%d", state, v)
		}
		if e, j := count(t, s, `SELECT COUNT(*) FROM events`), count(t, s, `SELECT COUNT(*) FROM jobs`); e != events || j != jobs {
			t.Fatalf("a lost race committed events %d→%d, jobs %d→%d", events, e, jobs, j)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM race_guard`); n != 0 {
			t.Fatalf("race_guard holds %d rows", n)
		}
	})
}

// TestLostRaceOnAnyGuardedStatementCommitsNothing: in a transition with
// several guarded statements (the flow engine writes such), the one that
// matches nothing may be any of them — the first, one in the middle or the
// last — and the batch is a lost race that commits nothing: not the
// guarded statements that did match, nor the event, the plain statements
// or the jobs.
func TestLostRaceOnAnyGuardedStatementCommitsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		ids := []string{"w1", "w2", "w3"}
		for _, id := range ids {
			createWidget(t, a, id)
		}
		for stale := range ids {
			t.Run(fmt.Sprintf("guarded statement %d of %d matches nothing", stale+1, len(ids)), func(t *testing.T) {
				events, jobs := count(t, s, `SELECT COUNT(*) FROM events`), count(t, s, `SELECT COUNT(*) FROM jobs`)
				tr := &transition.Transition{
					Events:     []event.Event{widgetEvent("w1", "widget.state_changed", 2)},
					Statements: []store.Statement{store.Stmt(`INSERT INTO widgets (id, state, version) VALUES ('side', 'new', 1)`)},
					Jobs:       []job.Spec{{Kind: "widget.follow_up"}},
				}
				for i, id := range ids {
					v := int64(1)
					if i == stale {
						v = 0 // matches nothing
					}
					tr.Guarded = append(tr.Guarded, store.Stmt(`UPDATE widgets SET state = 'moved', version = version + 1 WHERE id = ? AND version = ?`, id, v))
				}
				if err := a.Apply(context.Background(), tr); !errors.Is(err, store.ErrLostRace) {
					t.Fatalf("want ErrLostRace, got %v", err)
				}
				for _, id := range ids {
					if state, v := readWidget(t, s, id); state != "new" || v != 1 {
						t.Fatalf("widget %s changed by a lost race: %s v%d", id, state, v)
					}
				}
				if n := count(t, s, `SELECT COUNT(*) FROM widgets WHERE id = 'side'`); n != 0 {
					t.Fatal("a lost race committed its plain statement")
				}
				if e, j := count(t, s, `SELECT COUNT(*) FROM events`), count(t, s, `SELECT COUNT(*) FROM jobs`); e != events || j != jobs {
					t.Fatalf("a lost race committed events %d→%d, jobs %d→%d", events, e, jobs, j)
				}
				if n := count(t, s, `SELECT COUNT(*) FROM race_guard`); n != 0 {
					t.Fatalf("race_guard holds %d rows", n)
				}
			})
		}
		// The same transition with every guarded statement matching commits.
		tr := &transition.Transition{Events: []event.Event{widgetEvent("w1", "widget.state_changed", 2)}}
		for _, id := range ids {
			tr.Guarded = append(tr.Guarded, store.Stmt(`UPDATE widgets SET state = 'moved', version = version + 1 WHERE id = ? AND version = ?`, id, 1))
		}
		if err := a.Apply(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if state, v := readWidget(t, s, id); state != "moved" || v != 2 {
				t.Fatalf("widget %s: %s v%d, want moved v2", id, state, v)
			}
		}
	})
}

// TestGuardedInsertThatConflictedIsALostRace: a guarded INSERT … ON
// CONFLICT DO NOTHING that did nothing is a lost race too, also after a
// guarded update that matched.
func TestGuardedInsertThatConflictedIsALostRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		createWidget(t, a, "w1")
		createWidget(t, a, "taken")
		events := count(t, s, `SELECT COUNT(*) FROM events`)
		err := a.Apply(context.Background(), &transition.Transition{
			Events: []event.Event{widgetEvent("w1", "widget.state_changed", 2)},
			Guarded: []store.Statement{
				store.Stmt(`UPDATE widgets SET state = 'moved', version = version + 1 WHERE id = ? AND version = ?`, "w1", 1),
				store.Stmt(`INSERT INTO widgets (id, state, version) VALUES (?, 'new', 1) ON CONFLICT DO NOTHING`, "taken"),
			},
		})
		if !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("want ErrLostRace, got %v", err)
		}
		if state, v := readWidget(t, s, "w1"); state != "new" || v != 1 {
			t.Fatalf("widget changed by a lost race: %s v%d", state, v)
		}
		if e := count(t, s, `SELECT COUNT(*) FROM events`); e != events {
			t.Fatalf("a lost race committed events %d→%d", events, e)
		}
	})
}

func TestOtherErrorsAreNotLostRaces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		createWidget(t, a, "w1")
		err := a.Apply(context.Background(), &transition.Transition{
			Events:     []event.Event{widgetEvent("w1", "widget.created", 1)},
			Statements: []store.Statement{store.Stmt(`INSERT INTO widgets (id, state, version) VALUES (?, 'new', 1)`, "w1")},
		})
		if err == nil || errors.Is(err, store.ErrLostRace) || !errors.Is(err, store.ErrUnique) {
			t.Fatalf("want a unique violation that is not a lost race, got %v", err)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM events`); n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
	})
}

func TestTransitionNeedsAnEvent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		err := a.Apply(context.Background(), &transition.Transition{
			Statements: []store.Statement{store.Stmt(`INSERT INTO widgets (id, state, version) VALUES ('w', 'new', 1)`)},
		})
		if err == nil {
			t.Fatal("a change without an event was accepted")
		}
		bad := widgetEvent("w", "gadget.created", 1) // type must be <entity>.<change>
		err = a.Apply(context.Background(), &transition.Transition{Events: []event.Event{bad}})
		if err == nil {
			t.Fatal("an event whose type does not name its entity was accepted")
		}
		if n := count(t, s, `SELECT COUNT(*) FROM widgets`); n != 0 {
			t.Fatalf("rejected transitions wrote %d widgets", n)
		}
	})
}

// TestAddComposesParts: parts added to a transition keep their order, each
// after what the transition had, field by field; the composed change is
// one batch, which a lost race in any part aborts whole.
func TestAddComposesParts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		createWidget(t, a, "w1")
		createWidget(t, a, "w2")
		composed := bump("w1", 1, "on")
		moveW2 := *bump("w2", 1, "on")
		extra := transition.Transition{Statements: []store.Statement{store.Stmt(`INSERT INTO widgets (id, state, version) VALUES ('w3', 'new', 1)`)}}
		if got := composed.Add(moveW2, extra); got != composed {
			t.Fatal("Add does not return the transition it added to")
		}
		if len(composed.Events) != 2 || composed.Events[0].EntityID != "w1" || composed.Events[1].EntityID != "w2" ||
			len(composed.Guarded) != 2 || composed.Guarded[0].Args[1] != "w1" || composed.Guarded[1].Args[1] != "w2" ||
			len(composed.Statements) != 1 || len(composed.Jobs) != 2 {
			t.Fatalf("composed %+v", composed)
		}
		if err := a.Apply(context.Background(), composed); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"w1", "w2"} {
			if st, v := readWidget(t, s, id); st != "on" || v != 2 {
				t.Fatalf("%s: %s at %d after the composed change", id, st, v)
			}
		}
		if n := count(t, s, `SELECT COUNT(*) FROM widgets WHERE id = 'w3'`); n != 1 {
			t.Fatalf("the added statement wrote %d rows", n)
		}
		// A stale part makes the whole batch lose: nothing of the others lands.
		stale := bump("w1", 2, "off").Add(*bump("w2", 1, "off"))
		if err := a.Apply(context.Background(), stale); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a stale part: %v, want a lost race", err)
		}
		if st, v := readWidget(t, s, "w1"); st != "on" || v != 2 {
			t.Fatalf("w1: %s at %d after a batch with a stale part", st, v)
		}
	})
}

// TestConcurrentWritersSeqGapless runs many writers that race on a few
// widgets. Every committed change has exactly one event; seq is gapless and
// in commit order (each widget's versions appear in increasing seq order);
// lost races left no trace.
func TestConcurrentWritersSeqGapless(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		a.Attempts = 1000
		ctx := context.Background()
		widgets := []string{"a", "b", "c"}
		for _, w := range widgets {
			createWidget(t, a, w)
		}
		const writers, each = 8, 15
		var wg sync.WaitGroup
		var mu sync.Mutex
		lost, tried := 0, 0
		for g := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					id := widgets[(g+i)%len(widgets)]
					_, err := a.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
						rows, err := s.Query(ctx, `SELECT version FROM widgets WHERE id = ?`, id)
						if err != nil {
							return nil, err
						}
						var v int64
						if err := rows.Scan(0, &v); err != nil {
							return nil, err
						}
						// Also send one doomed stale write per round.
						mu.Lock()
						tried++
						mu.Unlock()
						if err := a.Apply(ctx, bump(id, v-1, "stale")); errors.Is(err, store.ErrLostRace) {
							mu.Lock()
							lost++
							mu.Unlock()
						} else {
							return nil, fmt.Errorf("stale write: %v", err)
						}
						return bump(id, v, fmt.Sprintf("g%d-%d", g, i)), nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		total := writers*each + len(widgets)
		evs, err := event.List(ctx, s, event.Filter{Limit: event.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != total {
			t.Fatalf("%d events, want %d (one per committed change)", len(evs), total)
		}
		last := map[string]int64{}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("seq gap: event %d has seq %d", i, e.Seq)
			}
			var p struct{ Version int64 }
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Version != last[e.EntityID]+1 {
				t.Fatalf("widget %s: version %d after %d: seq is not in commit order", e.EntityID, p.Version, last[e.EntityID])
			}
			last[e.EntityID] = p.Version
		}
		for _, w := range widgets {
			if _, v := readWidget(t, s, w); v != last[w] {
				t.Fatalf("widget %s at version %d but its events reach %d", w, v, last[w])
			}
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs`); n != writers*each {
			t.Fatalf("%d jobs, want %d", n, writers*each)
		}
		if lost != tried || tried < writers*each {
			t.Fatalf("%d of %d stale writes lost", lost, tried)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM race_guard`); n != 0 {
			t.Fatalf("lost races left %d race_guard rows", n)
		}
	})
}

// unknownOutcome wraps a store so that the first Exec reports an unknown
// outcome, after committing (commitFirst) or without.
type unknownOutcome struct {
	store.Store
	commitFirst bool
	mu          sync.Mutex
	calls       int
}

func (u *unknownOutcome) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	u.mu.Lock()
	u.calls++
	first := u.calls == 1
	u.mu.Unlock()
	if first {
		if u.commitFirst {
			if _, err := u.Store.Exec(ctx, batch...); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: connection reset", store.ErrUnknownOutcome)
	}
	return u.Store.Exec(ctx, batch...)
}

func TestUnknownOutcomeIsResolvedWithoutDoubleApply(t *testing.T) {
	for _, commitFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", commitFirst), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, s store.Store) {
				base := setup(t, s)
				createWidget(t, base, "w1")
				flaky := &unknownOutcome{Store: s, commitFirst: commitFirst}
				fc := clock.NewFake(start)
				a := &transition.Applier{Store: flaky, Clock: fc}
				done := make(chan error, 1)
				go func() { done <- a.Apply(context.Background(), bump("w1", 1, "once")) }()
				hang.BlockUntil(t, fc, 1, "the resend's backoff timer")
				fc.Advance(time.Second)
				if err := hang.Recv(t, done, "the apply"); err != nil {
					t.Fatalf("apply: %v", err)
				}
				if flaky.calls != 2 { // Apply has returned: no send is running
					t.Fatalf("%d sends, want 2", flaky.calls)
				}
				if state, v := readWidget(t, s, "w1"); state != "once" || v != 2 {
					t.Fatalf("widget %s v%d, want once v2", state, v)
				}
				if n := count(t, s, `SELECT COUNT(*) FROM events WHERE type = 'widget.state_changed'`); n != 1 {
					t.Fatalf("%d events for one change", n)
				}
				if n := count(t, s, `SELECT COUNT(*) FROM jobs`); n != 1 {
					t.Fatalf("%d jobs for one change", n)
				}
			})
		})
	}
}

func TestDoGivesUpAfterBoundedLostRaces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		a.Attempts = 3
		createWidget(t, a, "w1")
		calls := 0
		_, err := a.Do(context.Background(), func(context.Context) (*transition.Transition, error) {
			calls++
			return bump("w1", 0, "never"), nil
		})
		if !errors.Is(err, transition.ErrGaveUp) || !errors.Is(err, store.ErrLostRace) || calls != 3 {
			t.Fatalf("err %v after %d calls", err, calls)
		}
	})
}

// TestDoGivesUpAfterRetryFor: Do stops retrying once a race is lost after
// RetryFor has passed on its clock.
func TestDoGivesUpAfterRetryFor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		fc := clock.NewFake(start)
		a.Clock, a.RetryFor = fc, 5*time.Second
		createWidget(t, a, "w1")
		calls := 0
		_, err := a.Do(context.Background(), func(context.Context) (*transition.Transition, error) {
			calls++
			fc.Advance(time.Second) // each round takes a second
			return bump("w1", 0, "never"), nil
		})
		if !errors.Is(err, transition.ErrGaveUp) || !errors.Is(err, store.ErrLostRace) || calls != 5 {
			t.Fatalf("err %v after %d calls, want ErrGaveUp after 5", err, calls)
		}
	})
}

// TestNestedDoDoesNotQueueBehindItself: a Do inside the decide of a Do that
// holds the retry queue retries without waiting for the queue.
func TestNestedDoDoesNotQueueBehindItself(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		createWidget(t, a, "outer")
		createWidget(t, a, "inner")
		// A deadlock fails the test instead of hanging the suite.
		ctx, cancel := context.WithTimeout(context.Background(), hang.Guard)
		defer cancel()
		// fresh decides a bump of id; its first call sends a stale one, so
		// that Do loses once and queues to retry.
		var fresh func(id string) func(context.Context) (*transition.Transition, error)
		fresh = func(id string) func(context.Context) (*transition.Transition, error) {
			first := true
			return func(ctx context.Context) (*transition.Transition, error) {
				_, v := readWidget(t, s, id)
				if first {
					first = false
					return bump(id, v-1, "stale"), nil
				}
				if id == "outer" {
					if _, err := a.Do(ctx, fresh("inner")); err != nil {
						return nil, err
					}
				}
				return bump(id, v, "done"), nil
			}
		}
		if _, err := a.Do(ctx, fresh("outer")); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"outer", "inner"} {
			if state, _ := readWidget(t, s, id); state != "done" {
				t.Fatalf("%s is %s", id, state)
			}
		}
	})
}

// TestItemKeysAreUniqueUnderConcurrency: a burst of writers taking numbers
// from one key counter, with the applier's default bounds, all commit,
// with the numbers 1..n each once.
func TestItemKeysAreUniqueUnderConcurrency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		ctx := context.Background()
		const n = 200
		var wg sync.WaitGroup
		nums := make([]int64, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var got int64
				_, err := a.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
					alloc, err := keys.Next(ctx, s, "p1")
					if err != nil {
						return nil, err
					}
					got = alloc.Number
					id := keys.Item("ACME", alloc.Number)
					return &transition.Transition{
						Events:     []event.Event{widgetEvent(id, "widget.created", 1)},
						Guarded:    []store.Statement{alloc.Take},
						Statements: []store.Statement{store.Stmt(`INSERT INTO widgets (id, state, version) VALUES (?, 'new', 1)`, id)},
					}, nil
				})
				if err != nil {
					t.Error(err)
				}
				nums[i] = got
			}()
		}
		wg.Wait()
		sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
		for i, v := range nums {
			if v != int64(i+1) {
				t.Fatalf("allocated %v, want 1..%d each once", nums, n)
			}
		}
	})
}

// TestSubscribersSeeEachCommitInOrder: every subscriber is called, in the
// order subscribed, after each committed transition (never after a lost
// race), with its events; WakeOnJobs wakes only after a transition that
// enqueued jobs.
func TestSubscribersSeeEachCommitInOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a := setup(t, s)
		var seen []string
		wakes := 0
		a.Subscribe(func(c transition.Committed) { seen = append(seen, "first:"+c.Events[0].Type) },
			transition.WakeOnJobs(func() { wakes++ }),
			func(c transition.Committed) { seen = append(seen, "second:"+c.Events[0].Type) })
		createWidget(t, a, "w1") // no jobs
		if err := a.Apply(context.Background(), bump("w1", 1, "first")); err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(context.Background(), bump("w1", 1, "stale")); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("want ErrLostRace, got %v", err)
		}
		want := []string{"first:widget.created", "second:widget.created", "first:widget.state_changed", "second:widget.state_changed"}
		if !slices.Equal(seen, want) {
			t.Fatalf("subscribers saw %v, want %v", seen, want)
		}
		if wakes != 1 {
			t.Fatalf("WakeOnJobs woke %d times, want 1 (one transition enqueued jobs)", wakes)
		}
	})
}
