package realtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// Subscribers join while writers commit concurrently — the first before
// any write, the others after 10, 20 and 30 writes of the first writer —
// and each replays from 0 (or from the middle) and then streams live: what
// each receives is exactly the log after its start (content and seq
// order, no gap, no duplicate). Both encodings.
func TestReplayThenLiveNoGapNoDuplicate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Interval: 50 * time.Millisecond})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		other := e.project("acme", "OTHER")
		tok := e.roleToken(org, "viewer")
		const writers, perWriter = 4, 40
		// joinAt[i] is closed when subscriber i joins: after 10·i writes of
		// writer 0, while the writers are still committing.
		joinAt := make([]chan struct{}, 4)
		for i := range joinAt {
			joinAt[i] = make(chan struct{})
		}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWriter {
					if w == 0 && i%10 == 0 {
						close(joinAt[i/10])
					}
					e.touch(org, pid, "t1", 1+i%3)
					if w == 0 {
						e.touch(org, other, "t2", 1) // not in the stream
					}
				}
			}()
		}
		type result struct {
			after int64
			got   []event.Event
		}
		var results []*result
		var rmu sync.Mutex
		var subs sync.WaitGroup
		for i, msgp := range []bool{false, true, false, true} {
			select {
			case <-joinAt[i]:
			case <-time.After(hangGuard):
				t.Fatalf("writer 0 never reached write %d", 10*i)
			}
			subs.Add(1)
			go func() {
				defer subs.Done()
				c := dial(t, e.URL, tok, msgp)
				after := int64(0)
				if i >= 2 {
					after = e.feed.Last() / 2 // resume from the middle of the log
				}
				sub := subscribe(t, c, "project:ACME", after)
				r := &result{after: after}
				rmu.Lock()
				results = append(results, r)
				rmu.Unlock()
				wg.Wait()
				final := lastSeq(e.logged(pid, 0))
				r.got = collect(t, sub, final)
			}()
		}
		subs.Wait()
		for _, r := range results {
			sameEvents(t, r.got, e.logged(pid, r.after))
		}
	})
}

// A subscriber that disconnects resumes from the last seq it processed.
func TestResumeAfterDisconnect(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Interval: 50 * time.Millisecond})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		tok := e.roleToken(org, "member")
		c := dial(t, e.URL, tok, false)
		sub := subscribe(t, c, "project:ACME", realtime.LiveOnly)
		e.touch(org, pid, "t1", 5)
		first := collect(t, sub, lastSeq(e.logged(pid, 0)))
		_ = c.Close()
		closes(t, sub)
		if !errors.Is(sub.Err(), realtime.ErrClosed) {
			t.Fatalf("err %v", sub.Err())
		}
		e.touch(org, pid, "t1", 7) // while disconnected
		c2 := dial(t, e.URL, tok, true)
		sub2 := subscribe(t, c2, "project:ACME", lastSeq(first))
		e.touch(org, pid, "t1", 3) // live after the resume
		rest := collect(t, sub2, lastSeq(e.logged(pid, 0)))
		sameEvents(t, append(first, rest...), e.logged(pid, first[0].Seq-1))
	})
}

// Both encodings deliver the event exactly as the log stores it.
func TestBothEncodingsCarryTheStoredEvent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		_, key := e.item("ACME", "first")
		for _, msgp := range []bool{false, true} {
			c := dial(t, e.URL, bootstrap, msgp)
			if err := c.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
			sub := subscribe(t, c, "project:ACME", 0)
			want := e.logged(pid, 0)
			sameEvents(t, collect(t, sub, lastSeq(want)), want)
			isub := subscribe(t, c, "item:"+key, 0)
			if got := collect(t, isub, 0); got[0].Type != "ticket.created" {
				t.Fatalf("item stream starts with %s", got[0].Type)
			}
			osub := subscribe(t, c, "org:acme", realtime.LiveOnly)
			e.touch(org, pid, "t9", 1)
			got := collect(t, osub, 0)
			sameEvents(t, got, e.logged(pid, got[0].Seq-1))
			if got[0].EntityID != "t9" || string(got[0].Payload) != `{"n":1,"note":"ü <&>"}` {
				t.Fatalf("org stream got %+v", got[0])
			}
			if err := c.Unsubscribe(context.Background(), osub); err != nil {
				t.Fatal(err)
			}
			closes(t, osub)
		}
	})
}

// The item stream holds the item's own events and its questions', not
// another item's: exactly those of the log, in order.
func TestItemStream(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{})
		e.org("acme")
		pid := e.project("acme", "ACME")
		id1, k1 := e.item("ACME", "one")
		_, k2 := e.item("ACME", "two")
		c := dial(t, e.URL, bootstrap, false)
		sub := subscribe(t, c, "item:"+k1, 0)
		e.admin(200, "PATCH", "/api/v1/items/"+k2, map[string]any{"title": "two!", "version": 1})
		qid := e.admin(201, "POST", "/api/v1/items/"+k1+"/questions", map[string]any{"text": "why?", "blocking": false})["id"].(string)
		e.admin(200, "PATCH", "/api/v1/items/"+k1, map[string]any{"title": "one!", "version": 1})
		var want []event.Event
		for _, ev := range e.logged(pid, 0) {
			if ev.EntityID == id1 || ev.EntityID == qid {
				want = append(want, ev)
			}
		}
		var types []string
		for _, ev := range want {
			types = append(types, ev.Type)
		}
		if got := strings.Join(types, " "); got != "ticket.created question.asked ticket.updated" {
			t.Fatalf("the log holds %s of the item", got)
		}
		sameEvents(t, collect(t, sub, lastSeq(want)), want)
	})
}

// Subscriptions are authorized: other organizations' streams and unknown
// streams get the same refusal; revoking the credential refuses new
// subscriptions on an open connection; a bad token fails the handshake.
func TestAuthorization(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{})
		acme := e.org("acme")
		e.org("globex")
		e.project("acme", "ACME")
		e.project("globex", "GLX")
		_, gkey := e.item("GLX", "secret")
		viewer := e.roleToken(acme, "viewer")
		c := dial(t, e.URL, viewer, false)
		subscribe(t, c, "project:ACME", 0)
		subscribe(t, c, "org:acme", 0)
		for _, stream := range []string{"project:GLX", "org:globex", "item:" + gkey, "project:NOPE", "item:ACME-999", "org:nope"} {
			_, err := c.Subscribe(context.Background(), stream, 0)
			if !realtime.IsForbidden(err) {
				t.Fatalf("%s: %v, want forbidden", stream, err)
			}
		}
		// Revocation takes effect for the next subscription (open ones:
		// revoke_test.go).
		secret, tk, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: "bootstrap"}, auth.KindAPI, "rev", acme, "viewer", nil, nil, time.Now())
		if err := e.core.Applier.Apply(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
		c2 := dial(t, e.URL, secret, true)
		e.admin(204, "DELETE", "/api/v1/tokens/"+tk.ID, nil)
		if _, err := c2.Subscribe(context.Background(), "project:ACME", 0); !realtime.IsUnauthorized(err) {
			t.Fatalf("after revoke: %v", err)
		}
		// Handshake.
		for _, tok := range []string{"", "ballet_nope", secret} {
			_, err := realtime.Dial(context.Background(), e.URL, tok, nil)
			var he *realtime.HandshakeError
			if !errors.As(err, &he) || he.Status != 401 {
				t.Fatalf("token %q: %v, want 401", tok, err)
			}
		}
	})
}

// A subscriber too slow for its buffer is told lagged with its last seq and
// resumes from there without a gap.
func TestSlowSubscriberLagsAndResumes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Buffer: 4})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		c := dial(t, e.URL, bootstrap, false)
		sub := subscribe(t, c, "project:ACME", realtime.LiveOnly)
		e.touch(org, pid, "t1", 500) // one commit: the tailer fans out 500 at once
		got := untilEnd(t, sub)
		if !realtime.IsLagged(sub.Err()) {
			t.Fatalf("ended with %v, want lagged", sub.Err())
		}
		if sub.LastSeq() != lastSeq(got) || len(got) >= 500 {
			t.Fatalf("last_seq %d, received %d up to %d", sub.LastSeq(), len(got), lastSeq(got))
		}
		if err := c.Ping(context.Background()); err != nil {
			t.Fatalf("connection unusable after lag: %v", err)
		}
		all := e.logged(pid, 0)
		start := all[len(all)-500].Seq - 1
		rest := collect(t, subscribe(t, c, "project:ACME", sub.LastSeq()), lastSeq(all))
		sameEvents(t, append(got, rest...), e.logged(pid, start))
	})
}

// Two Core instances on one rqlite cluster, each with its own feed: writes
// on one reach a subscriber of the other (whose feed learns of them only by
// tailing the log, no nudge), and what arrives is exactly the log: content,
// order, no gap. How fast: BenchmarkCrossInstanceLatency.
func TestCrossInstanceDelivery(t *testing.T) {
	cl := rqlitetest.Start(t, 1)
	open := func() store.Store {
		s, err := rqlite.Open(context.Background(), rqlite.Options{URLs: cl.URLs()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1 := open()
	if err := store.Migrate(context.Background(), s1, time.Now()); err != nil {
		t.Fatal(err)
	}
	a := newEnv(t, s1, feed.Config{Interval: 100 * time.Millisecond})
	b := newEnv(t, open(), feed.Config{Interval: 100 * time.Millisecond})
	org := a.org("acme")
	pid := a.project("acme", "ACME")
	tok := a.roleToken(org, "viewer")
	c := dial(t, b.URL, tok, true)
	sub := subscribe(t, c, "project:ACME", 0)
	var got []event.Event
	for i := range 5 {
		a.touch(org, pid, "t1", 1+i%3)
		got = append(got, collect(t, sub, lastSeq(a.logged(pid, 0)))...)
	}
	want := a.logged(pid, 0)
	touched := 0
	for _, e := range want {
		if e.Type == "ticket.touched" {
			touched++
		}
	}
	if touched != 1+2+3+1+2 {
		t.Fatalf("the log holds %d touches, want 9", touched)
	}
	sameEvents(t, got, want)
}
