package realtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/transition"
)

const bootstrap = "test-bootstrap-token-0123456789"

// hangGuard bounds every wait of these tests (on a connection, a
// subscription, a metric or the fake clock's timers), so that a failing
// test ends with a message instead of hanging until the suite's timeout.
// It is not a speed claim: a passing run never comes near it, however
// loaded the machine.
const hangGuard = 2 * time.Minute

// env is one Core instance with its own feed and realtime handler, mounted
// at /api/v1/realtime in front of Core's handler (as core.go wires it).
type env struct {
	t    testing.TB
	core *core.Core
	feed *feed.Feed
	st   store.Store
	URL  string
}

func newEnv(t testing.TB, s store.Store, fc feed.Config) *env {
	t.Helper()
	return newEnvOn(t, s, fc, clock.Real{})
}

// newEnvOn is newEnv whose realtime handler checks credentials, and runs
// its expiry, re-check and ping timers, on clk (with rc, if given, as its
// configuration).
func newEnvOn(t testing.TB, s store.Store, fc feed.Config, clk clock.Clock, rc ...realtime.Config) *env {
	t.Helper()
	cfg := config.Default()
	cfg.Auth.BootstrapToken = bootstrap
	cfg.Auth.BootstrapTokenFile = t.TempDir() + "/bootstrap-token"
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	c, err := core.New(core.Options{Config: cfg, Log: log, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(s, clock.Real{}, log, fc)
	c.Applier.Subscribe(f.OnCommit)
	authn := auth.NewAuthenticator(s, clk, bootstrap, nil, auth.OIDCConfig{})
	var rcfg realtime.Config
	if len(rc) > 0 {
		rcfg = rc[0]
	}
	h := realtime.New(f, authn, &access.Resolver{Store: s}, c.Tenancy, c.Tracker, s, clk, log, rcfg)
	mux := http.NewServeMux()
	mux.Handle("GET "+realtime.Path, h)
	doc, err := openapitest.Served(c.Handler())
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", doc.Handler(t.Errorf, c.Handler())) // every answer checked against the OpenAPI document
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(hangGuard):
			t.Error("the feed did not stop")
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	return &env{t: t, core: c, feed: f, st: s, URL: srv.URL}
}

func (e *env) do(token, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) admin(want int, method, path string, body any) map[string]any {
	e.t.Helper()
	st, b := e.do(bootstrap, method, path, body)
	if st != want {
		e.t.Fatalf("%s %s: %d %s", method, path, st, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func (e *env) org(slug string) string {
	return e.admin(201, "POST", "/api/v1/orgs", map[string]any{"slug": slug, "name": slug})["id"].(string)
}

func (e *env) project(org, key string) string {
	return e.admin(201, "POST", "/api/v1/orgs/"+org+"/projects", map[string]any{"key": key, "name": key,
		"repository": map[string]any{"forge": "git", "url": "/srv/git/" + strings.ToLower(key) + ".git"}})["id"].(string)
}

func (e *env) item(project, title string) (id, key string) {
	m := e.admin(201, "POST", "/api/v1/projects/"+project+"/items", map[string]any{"type": "task", "title": title})
	return m["id"].(string), m["key"].(string)
}

func (e *env) roleToken(orgID, role string) string {
	e.t.Helper()
	secret, _ := e.tokenFor("bootstrap", orgID, role, nil, time.Now())
	return secret
}

// touch writes n events on a project through the applier (as any change
// would) and returns them as committed.
func (e *env) touch(orgID, projectID, entityID string, n int) {
	e.t.Helper()
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{OrganizationID: orgID, ProjectID: projectID, EntityType: "ticket", EntityID: entityID,
			Type: "ticket.touched", Payload: json.RawMessage(`{"n":1,"note":"ü <&>"}`)}
		evs[i].SetActor(event.Actor{Kind: event.ActorHuman, Sub: "alice"})
	}
	if err := e.core.Applier.Apply(context.Background(), &transition.Transition{Events: evs}); err != nil {
		e.t.Fatal(err)
	}
}

// logged returns the events of a project after seq as the log stores them.
func (e *env) logged(projectID string, after int64) []event.Event {
	e.t.Helper()
	var out []event.Event
	for {
		evs, err := event.List(context.Background(), e.st, event.Filter{ProjectID: projectID, AfterSeq: after, Limit: event.MaxLimit})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, evs...)
		if len(evs) < event.MaxLimit {
			return out
		}
		after = evs[len(evs)-1].Seq
	}
}

func dial(t testing.TB, url, token string, msgp bool) *realtime.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c, err := realtime.Dial(ctx, url, token, &realtime.DialOptions{MessagePack: msgp, Buffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func subscribe(t testing.TB, c *realtime.Client, stream string, after int64) *realtime.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := c.Subscribe(ctx, stream, after)
	if err != nil {
		t.Fatalf("subscribe %s: %v", stream, err)
	}
	return s
}

// collect receives until the subscription has delivered an event with seq
// ≥ until (or n events when until is 0).
func collect(t testing.TB, s *realtime.Subscription, until int64) []event.Event {
	t.Helper()
	var out []event.Event
	timeout := time.After(hangGuard)
	for {
		if len(out) > 0 && out[len(out)-1].Seq >= until {
			return out
		}
		select {
		case e, ok := <-s.C():
			if !ok {
				t.Fatalf("subscription ended after %d events (last %v): %v", len(out), lastSeq(out), s.Err())
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("timed out after %d events (last %v), want up to seq %d", len(out), lastSeq(out), until)
		}
	}
}

// closes waits until the subscription's channel is closed, failing on an
// event.
func closes(t testing.TB, s *realtime.Subscription) {
	t.Helper()
	select {
	case e, ok := <-s.C():
		if ok {
			t.Fatalf("event %d (%s) on a subscription that should have ended", e.Seq, e.Type)
		}
	case <-time.After(hangGuard):
		t.Fatal("the subscription is still open")
	}
}

// untilEnd receives until the subscription ends and returns what came.
func untilEnd(t testing.TB, s *realtime.Subscription) []event.Event {
	t.Helper()
	var out []event.Event
	timeout := time.After(hangGuard)
	for {
		select {
		case e, ok := <-s.C():
			if !ok {
				return out
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("the subscription is still open after %d events (last %d)", len(out), lastSeq(out))
		}
	}
}

// blockUntil is fk.BlockUntil(n), failing the test when the timers never
// come.
func blockUntil(t testing.TB, fk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() { fk.BlockUntil(n); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("%d timers pending on the fake clock, want %d", fk.Waiters(), n)
	}
}

func lastSeq(evs []event.Event) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// sameEvents fails unless got equals want exactly (fields and order).
func sameEvents(t testing.TB, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events (last %d), want %d (last %d)", len(got), lastSeq(got), len(want), lastSeq(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.OccurredAt.Equal(w.OccurredAt) {
			t.Fatalf("event %d: occurred_at %v, want %v", i, g.OccurredAt, w.OccurredAt)
		}
		g.OccurredAt = w.OccurredAt
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if !bytes.Equal(gj, wj) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, gj, wj)
		}
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("level=ERROR")) || bytes.Contains(p, []byte("level=WARN")) {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
