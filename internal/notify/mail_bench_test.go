package notify_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// BenchmarkEventToMail measures, on SQLite with a whole running Core and
// a real Mailpit, the time from a blocking question's commit to its mail
// accepted by the SMTP server, under a steady 100 questions a second
// (b.N of them): p50-ms and p99-ms. It also reports the notifier's
// largest lag seen meanwhile (max-lag-events, max-lag-ms).
//
//	go test ./internal/notify/ -run '^$' -bench EventToMail -benchtime 500x
func BenchmarkEventToMail(b *testing.B) {
	benchMail(b, 100)
}

// BenchmarkConsumerLagAt1000 offers 1,000 questions a second (b.N of
// them) and reports the notifier's largest lag seen (max-lag-events,
// max-lag-ms), and event-to-mail p50/p99 under that load.
//
//	go test ./internal/notify/ -run '^$' -bench ConsumerLagAt1000 -benchtime 3000x
func BenchmarkConsumerLagAt1000(b *testing.B) {
	benchMail(b, 1000)
}

func benchMail(b *testing.B, perSecond int) {
	s := storetest.Open(b, "sqlite")
	mp := mailtest.Start(b)
	w := newMailWorld(b, s, mp)
	addr := "bob@example.com"
	w.confirm("bob", addr)
	ctx := context.Background()
	keys := make([]string, 10)
	ids := make([]string, len(keys))
	for i := range keys {
		keys[i] = w.ticket("alice", "bob")
		it, err := w.Core.Tracker.FindItem(ctx, keys[i])
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = it.ID
	}
	carol := event.Actor{Kind: event.ActorHuman, Sub: "carol"}

	var mu sync.Mutex
	asked := map[string]time.Time{}
	var maxLag int64
	var maxAge time.Duration
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the notifier's lag, sampled every 10 ms
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			n, age, err := notify.Lag(ctx, s, time.Now())
			if err == nil {
				maxLag, maxAge = max(maxLag, n), max(maxAge, age)
			}
		}
	}()
	b.ResetTimer()
	interval := time.Second / time.Duration(perSecond)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range b.N {
		// A steady rate: question i is due at start + i·interval, asked
		// by its own goroutine so that a slow commit does not delay the
		// next ones.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("Bench question %d?", i)
			at := time.Now()
			if _, err := w.Core.Tracker.AskQuestion(ctx, carol, ids[i%len(ids)], text, true); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			asked[text] = at
			mu.Unlock()
		}()
	}
	wg.Wait()
	offered := time.Since(start)
	got := waitMails(b, mp, addr, b.N+1, 5*time.Minute)
	b.StopTimer()
	close(stop)
	<-sampled
	var lat []time.Duration
	for _, m := range got {
		_, q, ok := strings.Cut(m.Subject, "] Question: ")
		if at, found := asked[q]; ok && found {
			lat = append(lat, m.Created.Sub(at))
		}
	}
	if len(lat) != b.N {
		b.Fatalf("%d mails matched of %d questions", len(lat), b.N)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(maxLag), "max-lag-events")
	b.ReportMetric(float64(maxAge.Milliseconds()), "max-lag-ms")
	b.ReportMetric(float64(b.N)/offered.Seconds(), "offered-per-s")
}

// waitMails waits until addr received n mails.
func waitMails(b *testing.B, mp *mailtest.Server, addr string, n int, timeout time.Duration) []mailtest.Summary {
	deadline := time.Now().Add(timeout)
	for {
		got := mp.To(b, addr)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d mails within %s", len(got), n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
