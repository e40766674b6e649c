package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestEventsFollowPrintsAndResumes runs `ballet events follow` against a
// Core: it replays after --after, prints live events as JSON lines, and
// resumes from the last seq when the connection drops. What it printed is
// exactly the project's log: content, order, no gap, no duplicate.
func TestEventsFollowPrintsAndResumes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		const token = "test-bootstrap-token-0123456789"
		cfg := config.Default()
		cfg.Auth.BootstrapToken = token
		cfg.Auth.BootstrapTokenFile = t.TempDir() + "/bt"
		log := slog.New(slog.DiscardHandler)
		c, err := core.New(core.Options{Config: cfg, Log: log, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		f := feed.New(s, clock.Real{}, log, feed.Config{})
		c.Applier.Subscribe(f.OnCommit)
		mux := http.NewServeMux()
		mux.Handle("GET "+realtime.Path, realtime.New(f, c.Auth, &access.Resolver{Store: s}, c.Tenancy, c.Tracker, s, c.Clock, log, realtime.Config{}))
		doc, err := openapitest.Served(c.Handler())
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("/", doc.Handler(t.Errorf, c.Handler())) // every answer checked against the OpenAPI document
		srv := httptest.NewServer(mux)
		defer srv.Close()
		fctx, fstop := context.WithCancel(context.Background())
		defer fstop()
		go f.Run(fctx)
		post := func(path, body string) {
			req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 201 {
				t.Fatalf("POST %s: %v %v", path, err, resp.Status)
			}
			resp.Body.Close()
		}
		post("/api/v1/orgs", `{"slug":"acme","name":"Acme"}`)
		post("/api/v1/orgs/acme/projects", `{"key":"ACME","name":"Acme","repository":{"forge":"git","url":"/srv/git/acme.git"}}`)
		post("/api/v1/projects/ACME/items", `{"type":"task","title":"one"}`)

		var out, errOut syncBuf
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			done <- eventsFollow(ctx, []string{"--server", srv.URL, "--token", token, "--project", "ACME", "--after", "0"}, &out, &errOut)
		}()
		printed := func() []event.Event {
			t.Helper()
			var evs []event.Event
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if l == "" {
					continue
				}
				var e event.Event
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				evs = append(evs, e)
			}
			return evs
		}
		lines := func(n int) []event.Event {
			t.Helper()
			apitest.Await(t, fmt.Sprintf("%d lines", n), func() bool { return len(printed()) >= n })
			return printed()
		}
		if evs := lines(2); len(evs) != 2 || evs[1].Type != "ticket.created" {
			t.Fatalf("replay printed %+v", evs)
		}
		post("/api/v1/projects/ACME/items", `{"type":"task","title":"two"}`)
		lines(3)
		srv.CloseClientConnections() // drop the WebSocket: follow reconnects
		post("/api/v1/projects/ACME/items", `{"type":"task","title":"three"}`)
		post("/api/v1/projects/ACME/items", `{"type":"task","title":"four"}`)
		evs := lines(5)
		cancel()
		if code := apitest.Receive(t, done, "follow to exit"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		want, err := event.List(context.Background(), s, event.Filter{ProjectID: evs[0].ProjectID})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(want) {
			t.Fatalf("printed %d events, log has %d: %s", len(evs), len(want), out.String())
		}
		for i := range want {
			g, w := evs[i], want[i]
			if !g.OccurredAt.Equal(w.OccurredAt) {
				t.Fatalf("line %d: occurred_at %v, want %v", i, g.OccurredAt, w.OccurredAt)
			}
			g.OccurredAt = w.OccurredAt
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			if !bytes.Equal(gj, wj) {
				t.Fatalf("line %d:\n got %s\nwant %s", i, gj, wj)
			}
		}
		// --after beyond the log's head is an error naming the head, not a
		// silent wait that would skip every event up to it.
		head, _ := event.LastSeq(context.Background(), s)
		var bout, berr syncBuf
		if code := eventsFollow(context.Background(), []string{"--server", srv.URL, "--token", token, "--project", "ACME", "--after", "100000"}, &bout, &berr); code != 1 ||
			!strings.Contains(berr.String(), fmt.Sprintf("beyond the log's head (seq %d)", head)) {
			t.Fatalf("--after beyond the head: exit %d, %q", code, berr.String())
		}
	})
}

func TestEventsFollowUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"tail"}, {"follow"}, {"follow", "--project", "A", "--item", "A-1", "--token", "x"}, {"follow", "--project", "A", "--token", ""}} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"events"}, args...), &out, &errOut); code != 2 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	// An unreachable server is retried (here: twice) until interrupted.
	var out, errOut syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- eventsFollow(ctx, []string{"--server", "http://127.0.0.1:1", "--token", "x", "--project", "A"}, &out, &errOut)
	}()
	apitest.Await(t, "two reconnection attempts", func() bool { return strings.Count(errOut.String(), "reconnecting") >= 2 })
	cancel()
	if code := apitest.Receive(t, done, "follow to exit"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
