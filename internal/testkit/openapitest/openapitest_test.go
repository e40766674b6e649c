package openapitest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/openapitest"
)

type admin struct{}

func (admin) Authenticate(context.Context, string) (*auth.Principal, error) {
	return &auth.Principal{Subject: "root", PlatformAdmin: true}, nil
}

// doc is the document of a small API: one route answering the project it
// is given.
func doc(t *testing.T) (*openapitest.Doc, *server.API) {
	t.Helper()
	api := server.NewAPI(slog.New(slog.DiscardHandler), admin{}, &access.Resolver{}, server.Finders{}, 1<<20, 0)
	api.Add(&server.Route{Method: "GET", Path: "/api/v1/projects/{project}", Perm: access.PlatformAdmin, Summary: "a project",
		Response: tenancy.Project{}, Handle: func(r *server.Request) (any, error) { return nil, nil }})
	b, err := json.Marshal(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	d, err := openapitest.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return d, api
}

const project = `{"id":"p1","organization_id":"o1","key":"ACME","name":"Acme","repository":null,
"merge_policy":{"mode":"manual","required_approvals":0,"required_checks":[]},"concurrency_limit":0,
"budgets":{"per_ticket_usd":null,"per_day_usd":2.5},"ticket_types":["task"],"paused":false,"notify":{"escalate_after":null},
"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","version":1}`

// TestResponsesAreChecked shows that the validator holds responses to the
// document: what a handler may send passes; a missing, mistyped, extra or
// null field, an undocumented status or a bad error body fails.
func TestResponsesAreChecked(t *testing.T) {
	d, _ := doc(t)
	req := httptest.NewRequest("GET", "/api/v1/projects/ACME", nil)
	h := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"as sent", 200, project, true},
		{"nullable pointer", 200, strings.Replace(project, `"repository":null`, `"repository":{"forge":"git","url":"/r","default_branch":"main","credentials_ref":"","api_url":"","webhook_secret_ref":""}`, 1), true},
		{"missing field", 200, strings.Replace(project, `"key":"ACME",`, "", 1), false},
		{"wrong type", 200, strings.Replace(project, `"version":1`, `"version":"1"`, 1), false},
		{"extra field", 200, strings.Replace(project, `"version":1`, `"version":1,"Version":1`, 1), false},
		{"null slice", 200, strings.Replace(project, `["task"]`, `null`, 1), false},
		{"null in a nested struct", 200, strings.Replace(project, `"required_checks":[]`, `"required_checks":null`, 1), false},
		{"Go field names", 200, strings.Replace(project, `"repository":null`, `"repository":{"Forge":"git","URL":"/r","DefaultBranch":"main","CredentialsRef":""}`, 1), false},
		{"error", 404, `{"error":{"code":"not_found","message":"project \"ACME\" not found"}}`, true},
		{"error with field details", 400, `{"error":{"code":"invalid","message":"x","details":[{"field":"limit","message":"bad"}]}}`, true},
		{"error with an unknown code", 404, `{"error":{"code":"teapot","message":"x"}}`, false},
		{"error without a message", 404, `{"error":{"code":"not_found"}}`, false},
		{"undocumented status", 418, `{"error":{"code":"invalid","message":"x"}}`, false},
	}
	for _, c := range cases {
		err := d.Response(req, c.status, h, []byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: valid %v, want %v (%v)", c.name, err == nil, c.ok, err)
		}
	}
}

// TestEventsAreChecked shows that each event is held to its type's payload
// schema and that a type outside the catalogue fails.
func TestEventsAreChecked(t *testing.T) {
	d, _ := doc(t)
	ev := func(typ, entity, payload string) []byte {
		return []byte(`{"seq":7,"id":"e1","occurred_at":"2026-01-02T03:04:05Z","organization_id":"o1","project_id":"p1",
"entity_type":"` + entity + `","entity_id":"f1","type":"` + typ + `","actor_kind":"system","actor_sub":"core","acting_for":"","payload":` + payload + `}`)
	}
	waiting := `{"stage":"merge","iteration":1,"step":3,"waiting":"checks","reason":"r",
"pull_request":{"number":0,"url":"","branch":"ballet/ACME-1","base":"main","head_sha":"abc"}}`
	cases := []struct {
		name string
		raw  []byte
		ok   bool
	}{
		{"as sent", ev("flow.waiting", "flow", waiting), true},
		{"Go field names in the payload", ev("flow.waiting", "flow", strings.Replace(waiting, `"head_sha"`, `"HeadSHA"`, 1)), false},
		{"payload of another type", ev("flow.waiting", "flow", `{"stage":"merge","iteration":1,"step":3,"reason":"r"}`), false},
		{"an unknown waiting", ev("flow.waiting", "flow", strings.Replace(waiting, `"checks"`, `"coffee"`, 1)), false},
		{"entity type not the type's", ev("flow.waiting", "run", waiting), false},
		{"a type outside the catalogue", ev("flow.napping", "flow", waiting), false},
		{"empty payload", ev("platform.paused", "platform", `{}`), true},
	}
	for _, c := range cases {
		err := d.Event(c.raw)
		if (err == nil) != c.ok {
			t.Errorf("%s: valid %v, want %v (%v)", c.name, err == nil, c.ok, err)
		}
	}
	if err := d.Event(ev("flow.napping", "flow", `{}`)); err == nil || !strings.Contains(err.Error(), "not in the catalogue") {
		t.Errorf("unknown type: %v", err)
	}
}

// TestHandlerReportsMismatches serves a handler whose answer breaks the
// document: the test's fail function hears of it before the client gets
// the answer.
func TestHandlerReportsMismatches(t *testing.T) {
	d, _ := doc(t)
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, format) }
	h := d.Handler(fail, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, http.StatusOK, map[string]any{"id": "p1"})
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/projects/ACME")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(failures) != 1 || resp.StatusCode != 200 || string(b) != "{\"id\":\"p1\"}\n" {
		t.Fatalf("failures %v, answer %d %s", failures, resp.StatusCode, b)
	}
	// A path outside the document is served, unchecked.
	resp, err = http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(failures) != 1 {
		t.Fatalf("failures %v", failures)
	}
}

// TestClientThatLeftIsNotAMismatch: a handler that answers nothing because
// its client went away (a lease long poll the runner gave up) is not an
// empty 200 to check against the document.
func TestClientThatLeftIsNotAMismatch(t *testing.T) {
	d, _ := doc(t)
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	started, returned := make(chan struct{}), make(chan struct{})
	checked := d.Handler(fail, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // the handler gives up with its client, writing nothing
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		checked.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/projects/ACME", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the handler never started")
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("the handler never returned")
	}
	if err := <-errc; err == nil {
		t.Fatal("the request was answered; want it cancelled")
	}
	if len(failures) != 0 {
		t.Fatalf("a request whose client left was checked: %v", failures)
	}
}
