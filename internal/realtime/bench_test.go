package realtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// latency measures commit-to-delivery: from the start of Applier.Apply of
// one event (its commit included) until every subscriber has received it.
func latency(b *testing.B, writer, reader *env, subs int) {
	org := writer.org("acme")
	pid := writer.project("acme", "ACME")
	tok := writer.roleToken(org, "viewer")
	// Let the reader's feed pass the setup events, so that each round
	// receives exactly the event it wrote.
	head := lastSeq(writer.logged(pid, 0))
	if n, _ := event.LastSeq(context.Background(), writer.st); n > head {
		head = n
	}
	for deadline := time.Now().Add(hangGuard); reader.feed.Last() < head; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the reader's feed is at seq %d, the log at %d", reader.feed.Last(), head)
		}
	}
	var chans []*realtime.Subscription
	for range subs {
		c := dial(b, reader.URL, tok, false)
		chans = append(chans, subscribe(b, c, "project:ACME", realtime.LiveOnly))
	}
	var lat []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		t0 := time.Now()
		for _, s := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-s.C():
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				case <-time.After(hangGuard):
					b.Error("no delivery")
				}
			}()
		}
		writer.touch(org, pid, "t1", 1)
		wg.Wait()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// go test -run '^$' -bench . -benchtime 200x ./internal/realtime/
func BenchmarkLocalLatency(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			e := newEnv(b, storetest.Open(b, "sqlite"), feed.Config{})
			latency(b, e, e, n)
		})
	}
}

func BenchmarkCrossInstanceLatency(b *testing.B) {
	cl := rqlitetest.Start(b, 1)
	open := func() store.Store {
		s, err := rqlite.Open(context.Background(), rqlite.Options{URLs: cl.URLs()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	s1 := open()
	if err := store.Migrate(context.Background(), s1, time.Now()); err != nil {
		b.Fatal(err)
	}
	w := newEnv(b, s1, feed.Config{})
	r := newEnv(b, open(), feed.Config{})
	latency(b, w, r, 100)
}

// Events per second delivered to 100 subscribers (commits of 100 events).
func BenchmarkThroughput100(b *testing.B) {
	e := newEnv(b, storetest.Open(b, "sqlite"), feed.Config{Buffer: 4096})
	org := e.org("acme")
	pid := e.project("acme", "ACME")
	var subs []*realtime.Subscription
	for range 100 {
		subs = append(subs, subscribe(b, dial(b, e.URL, bootstrap, false), "project:ACME", realtime.LiveOnly))
	}
	const per = 100
	b.ResetTimer()
	start := time.Now()
	total := 0
	for b.Loop() {
		var wg sync.WaitGroup
		for _, s := range subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range per {
					if _, ok := <-s.C(); !ok {
						b.Errorf("ended: %v", s.Err())
						return
					}
				}
			}()
		}
		e.touch(org, pid, "t1", per)
		wg.Wait()
		total += per * len(subs)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
}

// Bytes and CPU per event notification in each encoding.
func BenchmarkEncoding(b *testing.B) {
	ev := event.Event{Seq: 123456, ID: "01a229f3-7d0e-78d8-8c86-15ff485c08f8", OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		OrganizationID: "01a229f3-7c73-7b15-81d3-67ba6bd3f1b5", ProjectID: "01a229f3-7c79-76ad-a934-dd07e6aaefa1",
		EntityType: "ticket", EntityID: "01a229f3-7d0e-78d8-8c86-15ff485c0900", Type: "ticket.state_changed",
		ActorKind: "human", ActorSub: "alice@example.com",
		Payload: json.RawMessage(`{"from":"ready","to":"in_progress","key":"ACME-42","version":3}`)}
	for _, enc := range []string{"json", "msgpack"} {
		b.Run(enc, func(b *testing.B) {
			var n int
			for b.Loop() {
				n = len(realtime.EncodeEventForBench(enc == "msgpack", "s1", ev))
			}
			b.ReportMetric(float64(n), "bytes/event")
		})
	}
}
