// Package apitest runs Core's HTTP API over a real store for tests: a whole
// Core (core.New) behind an httptest server on 127.0.0.1, with helpers to
// call it as the bootstrap admin or as a principal holding a given role,
// and the test runner (Protocol: the runner protocol over any Caller),
// which the failure suite's runner process speaks too.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/openapitest"
)

// BootstrapToken is the platform-admin token of every test Core.
const BootstrapToken = "test-bootstrap-token-0123456789"

// ServiceToken is the Knowledge service credential of every test Core.
const ServiceToken = "test-knowledge-service-credential-0123456789"

// SecretsAllow is every test Core's [secrets] allow: the tests' secret
// references name variables ACME_… (Ballet's own, BALLET_…, never
// resolve).
const SecretsAllow = "env:ACME_*"

// Env is a running API.
type Env struct {
	T     testing.TB
	Core  *core.Core
	Store store.Store
	URL   string
	logs  *lockedWriter
	stop  func() error // RunOn's: stops Core.Run (once) and returns what it returned
}

// New starts Core's API on s. cfg may adjust the defaults.
func New(t testing.TB, s store.Store, adjust ...func(*config.Config)) *Env {
	t.Helper()
	return NewOn(t, s, nil, adjust...)
}

// NewOn is New with Core on clk (nil: the real clock): its components
// record times and run their timers on it.
func NewOn(t testing.TB, s store.Store, clk clock.Clock, adjust ...func(*config.Config)) *Env {
	t.Helper()
	c, logs, l := build(t, s, clk, nil, adjust)
	doc, err := openapitest.Served(c.Handler())
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	// Registered first, so that it runs last: after the server and every
	// loop of the test have stopped writing.
	t.Cleanup(func() { checkEvents(t, doc, s) })
	feedCtx, stopFeed := context.WithCancel(context.Background())
	feedDone := make(chan struct{})
	go func() { c.RunFeed(feedCtx); close(feedDone) }()
	t.Cleanup(func() { stopFeed(); Receive(t, feedDone, "the feed to stop") })
	// Core's own server (its [http] timeouts) and connection caps, so that
	// every API test also runs under them; every answer is checked against
	// the OpenAPI document.
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = c.HTTPServer()
	srv.Config.Handler = doc.Handler(t.Errorf, srv.Config.Handler)
	srv.Listener.Close()
	srv.Listener = c.LimitConns(l)
	srv.Start()
	t.Cleanup(srv.Close)
	return &Env{T: t, Core: c, Store: s, URL: srv.URL, logs: logs}
}

// RunOn runs a whole Core on s and clk (nil: the real clock) as `ballet
// serve` does (Core.Run: its HTTP server on 127.0.0.1, the event feed and,
// as the leader, the orchestrator, scheduler, reconciler and sweeper)
// until the test ends. Every event is checked against the OpenAPI
// document at the end; the answers are not (Core serves them itself).
func RunOn(t testing.TB, s store.Store, clk clock.Clock, adjust ...func(*config.Config)) *Env {
	t.Helper()
	return RunWithMailer(t, s, clk, nil, adjust...)
}

// RunWithMailer is RunOn with a Mailer for the digests (core.Options.Mailer).
func RunWithMailer(t testing.TB, s store.Store, clk clock.Clock, m digest.Mailer, adjust ...func(*config.Config)) *Env {
	t.Helper()
	c, logs, l := build(t, s, clk, m, adjust)
	doc, err := openapitest.Served(c.Handler())
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	t.Cleanup(func() { checkEvents(t, doc, s) })
	c.UseListener(l)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return Receive(t, stopped, "Core to stop") })
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Core stopped: %v", err)
		}
	})
	return &Env{T: t, Core: c, Store: s, URL: "http://" + c.Addr(), logs: logs, stop: stop}
}

// Stop stops a Core started with RunOn as a signal stops `ballet serve`,
// and returns what Core.Run returned.
func (e *Env) Stop() error {
	e.T.Helper()
	if e.stop == nil {
		e.T.Fatal("Stop: this Core was not started with RunOn")
	}
	return e.stop()
}

// build builds a test Core on s and clk, logging into logs, and binds its
// address on 127.0.0.1 first: Core's [http] public_url is that address
// (unless adjust set one), so that the leases it hands out name its MCP
// endpoint where it answers.
func build(t testing.TB, s store.Store, clk clock.Clock, m digest.Mailer, adjust []func(*config.Config)) (*core.Core, *lockedWriter, net.Listener) {
	t.Helper()
	cfg := config.Default()
	cfg.Auth.BootstrapToken = BootstrapToken
	cfg.Auth.BootstrapTokenFile = t.TempDir() + "/bootstrap-token"
	cfg.Knowledge.ServiceToken = ServiceToken
	cfg.Secrets.Allow = []string{SecretsAllow}
	for _, f := range adjust {
		f(&cfg)
	}
	l, err := core.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cfg.HTTP.Addr = l.Addr().String()
	if cfg.HTTP.PublicURL == "" {
		cfg.HTTP.PublicURL = "http://" + cfg.HTTP.Addr
	}
	if cfg.Notify.MailOn() && cfg.Notify.BaseURL == "" { // the links of mails reach this Core
		cfg.Notify.BaseURL = cfg.HTTP.PublicURL
	}
	logs := &lockedWriter{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := core.New(core.Options{Config: cfg, Log: log, Store: s, Clock: clk, Mailer: m})
	if err != nil {
		t.Fatalf("core: %v", err)
	}
	return c, logs, l
}

// checkEvents checks every event in the log against the schema of its type
// in the OpenAPI document: every type must be in the catalogue
// (event/catalogue.Core) and every payload must match its struct.
func checkEvents(t testing.TB, doc *openapitest.Doc, s store.Store) {
	t.Helper()
	ctx := context.Background()
	for after := int64(0); ; {
		evs, err := event.List(ctx, s, event.Filter{AfterSeq: after, Limit: event.MaxLimit})
		if err != nil {
			t.Errorf("read the events to check them: %v", err)
			return
		}
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				t.Errorf("encode event %d: %v", e.Seq, err)
				continue
			}
			if err := doc.Event(b); err != nil {
				t.Error(err)
			}
		}
		if len(evs) < event.MaxLimit {
			return
		}
		after = evs[len(evs)-1].Seq
	}
}

// Response is an API answer.
type Response struct {
	Status int
	Body   []byte
	Header http.Header
}

// JSON decodes the body into v (failing the test on error).
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r *Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// ErrorCode returns error.code of an error body.
func (r *Response) ErrorCode() string {
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// Do calls the API. body may be nil, a string/[]byte (sent as is) or any
// value (sent as JSON). token "" sends no Authorization header.
func (e *Env) Do(token, method, path string, body any) *Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	contentType := ""
	if rd != nil {
		contentType = "application/json"
	}
	return e.send(token, method, path, contentType, rd)
}

// Raw sends body as is with the Content-Type given ("": none).
func (e *Env) Raw(token, method, path, contentType string, body []byte) *Response {
	e.T.Helper()
	return e.send(token, method, path, contentType, bytes.NewReader(body))
}

func (e *Env) send(token, method, path, contentType string, rd io.Reader) *Response {
	e.T.Helper()
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// Must calls the API and fails the test unless the status is want.
func (e *Env) Must(want int, token, method, path string, body any) *Response {
	e.T.Helper()
	r := e.Do(token, method, path, body)
	if r.Status != want {
		e.T.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// Admin calls the API as the platform admin.
func (e *Env) Admin(want int, method, path string, body any) *Response {
	e.T.Helper()
	return e.Must(want, BootstrapToken, method, path, body)
}

// RoleToken returns an API token that holds role in the organization
// (role "platform_admin" for a platform-wide admin token).
func (e *Env) RoleToken(orgID, role string) string {
	e.T.Helper()
	return e.TokenFor("bootstrap", orgID, role)
}

// TokenFor returns an API token created by subject (a human) with role in
// the organization.
func (e *Env) TokenFor(subject, orgID, role string) string {
	e.T.Helper()
	actor := event.Actor{Kind: event.ActorHuman, Sub: subject}
	secret, _, tr := auth.Issue(actor, auth.KindAPI, "test "+role, orgID, role, nil, nil, e.Core.Clock.Now())
	if err := e.Core.Applier.Apply(context.Background(), tr); err != nil {
		e.T.Fatal(err)
	}
	return secret
}

// Org creates an organization and returns its id.
func (e *Env) Org(slug string) string {
	e.T.Helper()
	var o struct{ ID string }
	e.Admin(201, "POST", "/api/v1/orgs", map[string]any{"slug": slug, "name": "Org " + slug}).JSON(e.T, &o)
	return o.ID
}

// Project creates a project (with a plain-git repository) and returns its id.
func (e *Env) Project(org, key string) string {
	e.T.Helper()
	var p struct{ ID string }
	e.Admin(201, "POST", "/api/v1/orgs/"+org+"/projects", map[string]any{"key": key, "name": "Project " + key,
		"repository": map[string]any{"forge": "git", "url": "/srv/git/" + strings.ToLower(key) + ".git"}}).JSON(e.T, &p)
	return p.ID
}

// Logs returns what Core logged so far (tests check secrets stay out).
func (e *Env) Logs() string { return e.logs.String() }

// Browser is a browser on the API: a cookie jar (the session cookie) and
// the Origin and Sec-Fetch-Site headers a page of its origin sends.
type Browser struct {
	e      *Env
	Client *http.Client
	// Origin is the origin of the page making the requests (Env.URL: Core's
	// own pages).
	Origin string
}

// Browser returns a browser whose pages come from origin ("": Core's own).
func (e *Env) Browser(origin string) *Browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.T.Fatal(err)
	}
	if origin == "" {
		origin = e.URL
	}
	return &Browser{e: e, Client: &http.Client{Jar: jar}, Origin: origin}
}

// From returns a browser sharing b's cookies whose pages come from origin:
// another site's page the person has open.
func (b *Browser) From(origin string) *Browser {
	return &Browser{e: b.e, Client: b.Client, Origin: origin}
}

// Do sends a request as the browser would: with its cookies, Origin and
// Sec-Fetch-Site, and body as JSON (nil: none).
func (b *Browser) Do(method, path string, body any) *Response {
	e := b.e
	e.T.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Origin", b.Origin)
	site := "same-origin"
	if b.Origin != e.URL {
		site = "cross-site"
	}
	req.Header.Set("Sec-Fetch-Site", site)
	resp, err := b.Client.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return &Response{Status: resp.StatusCode, Body: out, Header: resp.Header}
}

// Must is Do failing the test unless the status is want.
func (b *Browser) Must(want int, method, path string, body any) *Response {
	b.e.T.Helper()
	r := b.Do(method, path, body)
	if r.Status != want {
		b.e.T.Fatalf("browser %s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// SignIn signs the browser in with token (POST /api/v1/session).
func (b *Browser) SignIn(token string) *Response {
	b.e.T.Helper()
	return b.Must(http.StatusCreated, "POST", "/api/v1/session", map[string]any{"token": token})
}

// Session returns the value of the browser's session cookie ("" when none).
func (b *Browser) Session() string {
	u, err := url.Parse(b.e.URL)
	if err != nil {
		b.e.T.Fatal(err)
	}
	for _, c := range b.Client.Jar.Cookies(u) {
		if c.Name == auth.SessionCookie {
			return c.Value
		}
	}
	return ""
}
