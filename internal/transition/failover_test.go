package transition_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestFailoverLosesNothing runs transitions from several goroutines against
// a 3-node rqlite cluster while the leader node is killed with SIGKILL
// several times. No acknowledged transition may be lost, none applied
// twice, no event may exist without its change, and all nodes must end
// identical.
func TestFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := rqlitetest.Start(t, 3)
	s, err := rqlite.Open(ctx, rqlite.Options{URLs: cluster.URLs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := store.Migrate(ctx, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: s}
	a := &transition.Applier{Store: cs, Clock: clock.Real{}, Attempts: 50, Resends: 8}
	if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE widgets (id TEXT PRIMARY KEY, state TEXT NOT NULL, version INTEGER NOT NULL)`)); err != nil {
		t.Fatal(err)
	}
	const writers = 4
	for w := range writers {
		createWidget(t, a, fmt.Sprintf("w%d", w))
	}

	var (
		mu      sync.Mutex
		acked   = map[string]int64{} // event id → version it recorded
		failed  atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
		applied atomic.Int64
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Two writers per widget, so lost races happen too.
			id := fmt.Sprintf("w%d", w/2)
			for !stop.Load() {
				tr, err := a.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
					rows, err := s.Query(ctx, `SELECT version FROM widgets WHERE id = ?`, id)
					if err != nil {
						return nil, err
					}
					var v int64
					if err := rows.Scan(0, &v); err != nil {
						return nil, err
					}
					return bump(id, v, fmt.Sprintf("w%d", w)), nil
				})
				if err != nil {
					// Not acknowledged: it may or may not have committed.
					failed.Add(1)
					// Paces the load while the cluster has no leader.
					time.Sleep(20 * time.Millisecond)
					continue
				}
				var p struct{ Version int64 }
				if err := json.Unmarshal(tr.Events[0].Payload, &p); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[tr.Events[0].ID] = p.Version
				mu.Unlock()
				applied.Add(1)
			}
		}()
	}

	kills := 0
	for range 5 {
		before := applied.Load()
		hang.WaitFor(t, "progress before a kill", func() bool { return applied.Load() >= before+20 })
		leader := cluster.Leader(t)
		cluster.Kill(t, leader)
		kills++
		after := applied.Load()
		hang.WaitFor(t, "progress without the old leader", func() bool { return applied.Load() >= after+20 })
		cluster.Restart(t, leader)
	}
	stop.Store(true)
	wg.Wait()
	cluster.WaitReady(t)

	// No acknowledged transition lost.
	for id, version := range acked {
		_, ok, err := event.ByID(ctx, s, id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("acknowledged transition (event %s, version %d) was lost", id, version)
		}
	}
	// None applied twice, no event without its change: each widget's events
	// carry versions 1, 2, … v exactly once, v being the widget's version.
	evs, err := event.List(ctx, s, event.Filter{Limit: event.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq gap at %d: %d", i, e.Seq)
		}
		var p struct{ Version int64 }
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("event %d: %v", e.Seq, err)
		}
		if p.Version != seen[e.EntityID]+1 {
			t.Fatalf("widget %s: event for version %d after %d", e.EntityID, p.Version, seen[e.EntityID])
		}
		seen[e.EntityID] = p.Version
	}
	for id, v := range seen {
		if _, got := readWidget(t, s, id); got != v {
			t.Fatalf("widget %s at version %d, its events reach %d", id, got, v)
		}
	}
	if jobs := count(t, s, `SELECT COUNT(*) FROM jobs`); jobs != int64(len(evs)-writers) {
		t.Fatalf("%d jobs for %d state changes", jobs, len(evs)-writers)
	}
	// All nodes identical.
	want := ""
	hang.WaitFor(t, "nodes converge", func() bool {
		want = ""
		for _, n := range cluster.Nodes {
			h, err := digest(ctx, n.URL)
			if err != nil {
				return false
			}
			if want == "" {
				want = h
			} else if h != want {
				return false
			}
		}
		return true
	})
	t.Logf("failover: %d leader kills, %d acknowledged transitions, %d not acknowledged, %d unknown outcomes resolved by re-sending, %d events, nodes identical",
		kills, len(acked), failed.Load(), cs.unknown.Load(), len(evs))
}

// digest hashes the tables of one node, read locally on that node.
func digest(ctx context.Context, url string) (string, error) {
	s, err := rqlite.Open(ctx, rqlite.Options{URLs: []string{url}, Consistency: "none"})
	if err != nil {
		return "", err
	}
	defer s.Close()
	h := sha256.New()
	for _, q := range []string{
		`SELECT seq, id, type, entity_id, payload FROM events ORDER BY seq`,
		`SELECT id, state, version FROM widgets ORDER BY id`,
		`SELECT id, kind, status, payload FROM jobs ORDER BY id`,
	} {
		rows, err := s.Query(ctx, q)
		if err != nil {
			return "", err
		}
		fmt.Fprint(h, rows.Values)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// countingStore counts the writes whose outcome the engine could not tell.
type countingStore struct {
	store.Store
	unknown atomic.Int64
}

func (c *countingStore) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	res, err := c.Store.Exec(ctx, batch...)
	if errors.Is(err, store.ErrUnknownOutcome) {
		c.unknown.Add(1)
	}
	return res, err
}
