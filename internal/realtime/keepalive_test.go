package realtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// metric reads a counter or gauge from reg (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// waitMetric waits until the metric reaches want.
func waitMetric(t *testing.T, reg *prometheus.Registry, name, label string, want float64) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for metric(t, reg, name, label) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s{%s} = %v, want %v", name, label, metric(t, reg, name, label), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The server pings every client: one that stops answering is dropped,
// one that answers stays subscribed and keeps receiving events. Pings and
// their timeouts run on the fake clock.
func TestDeadClientIsDroppedLiveOneStays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		reg := prometheus.NewRegistry()
		const interval, timeout = 30 * time.Second, 10 * time.Second
		// Credential re-checks (also on fk) stay out of the way: an hour.
		e := newEnvOn(t, s, feed.Config{Interval: 50 * time.Millisecond}, fk,
			realtime.Config{PingInterval: interval, PingTimeout: timeout, AuthRecheck: time.Hour, Metrics: realtime.NewMetrics(reg)})
		org := e.org("acme")
		pid := e.project("acme", "ACME")

		live := dial(t, e.URL, bootstrap, false) // its read loop answers pings
		sub := subscribe(t, live, "project:ACME", realtime.LiveOnly)
		dead := rawDial(t, e.URL) // subscribes, then never reads again: no pong
		if a := exchange(t, dead, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:ACME"}}`)); a.Error != nil {
			t.Fatalf("subscribe: %+v", *a.Error)
		}
		waitMetric(t, reg, "ballet_realtime_connections", "", 2)

		blockUntil(t, fk, 4) // both connections wait for their first ping (and re-check)
		fk.Advance(interval)
		waitMetric(t, reg, "ballet_realtime_pings_total", "answered", 1) // the live one answered
		fk.Advance(timeout)                                              // the dead one's time is up
		waitMetric(t, reg, "ballet_realtime_pings_total", "unanswered", 1)
		waitMetric(t, reg, "ballet_realtime_connections", "", 1)

		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		for { // the dead client finds its connection closed behind the ping
			if _, _, err := dead.Read(ctx); err != nil {
				if ctx.Err() != nil {
					t.Fatal("the dead client's connection is still open")
				}
				break
			}
		}
		e.touch(org, pid, "t1", 1)
		if got := collect(t, sub, lastSeq(e.logged(pid, 0))); got[len(got)-1].Type != "ticket.touched" {
			t.Fatalf("live subscriber got %v", got)
		}
		// And the live one keeps being pinged and answering.
		blockUntil(t, fk, 2) // the live one's next ping (and re-check)
		fk.Advance(interval)
		waitMetric(t, reg, "ballet_realtime_pings_total", "answered", 2)
		if err := live.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A subscribe whose after_seq lies beyond the log's head is refused with
// invalid params naming the head; at the head it is fine.
func TestAfterSeqBeyondHead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Interval: 50 * time.Millisecond})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		e.touch(org, pid, "t1", 3)
		head := lastSeq(e.logged(pid, 0))
		for _, msgp := range []bool{false, true} {
			c := dial(t, e.URL, bootstrap, msgp)
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			_, err := c.Subscribe(ctx, "project:ACME", head+5)
			cancel()
			var re *realtime.Error
			if !errors.As(err, &re) || re.Code != realtime.CodeInvalidParams ||
				!strings.Contains(re.Message, fmt.Sprintf("after_seq\" %d is beyond the log's head (seq %d)", head+5, head)) {
				t.Fatalf("after_seq beyond the head: %v", err)
			}
			// The connection stays usable; at the head, the subscription
			// delivers what comes next and nothing is skipped.
			sub := subscribe(t, c, "project:ACME", head)
			e.touch(org, pid, "t1", 1)
			if got := collect(t, sub, 0); got[0].Seq <= head {
				t.Fatalf("got seq %d after the head %d", got[0].Seq, head)
			}
			head = lastSeq(e.logged(pid, 0))
		}
	})
}
