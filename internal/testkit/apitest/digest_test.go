package apitest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestMyDigest: GET /api/v1/me/digest answers the caller's own current
// digest — what needs them in the projects they may read, nothing of
// another organization — as JSON, and as an HTML page with ?format=html or
// when Accept prefers text/html; another format is a 400, no credential a
// 401.
func TestMyDigest(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		acme, other := e.Org("acme"), e.Org("other")
		e.Project("acme", "ACME")
		e.Project("other", "OTH")
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/ann", map[string]any{"role": "member"})
		e.Admin(200, "PUT", "/api/v1/orgs/other/members/bob", map[string]any{"role": "member"})
		ann, bob := e.TokenFor("ann", acme, "member"), e.TokenFor("bob", other, "member")
		ask := func(project, text string) string {
			var it struct{ Key string }
			e.Admin(201, "POST", "/api/v1/projects/"+project+"/items", map[string]any{"type": "task", "title": "needs " + text}).JSON(t, &it)
			e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": text, "blocking": true})
			return it.Key
		}
		mine, theirs := ask("ACME", "Which database?"), ask("OTH", "Secret plans?")

		type digest struct {
			Subject  string
			Needs    int
			Empty    bool
			Projects []struct {
				Org, Project, Name string
				Needs              []struct{ Kind, Item, Link string }
			}
		}
		var d digest
		r := e.Must(200, ann, "GET", "/api/v1/me/digest", nil)
		r.JSON(t, &d)
		if d.Needs != 1 || d.Empty || len(d.Projects) != 1 || d.Projects[0].Project != "ACME" || d.Projects[0].Name != "Project ACME" ||
			len(d.Projects[0].Needs) != 1 || d.Projects[0].Needs[0].Item != mine || d.Projects[0].Needs[0].Kind != "question" ||
			!strings.HasPrefix(d.Projects[0].Needs[0].Link, "http") || !strings.HasSuffix(d.Projects[0].Needs[0].Link, "/items/"+mine+"#questions") ||
			d.Subject != "Ballet digest — 1 needs you" {
			t.Fatalf("ann's digest: %s", r.Body)
		}
		if strings.Contains(string(r.Body), theirs) || strings.Contains(string(r.Body), "OTH") {
			t.Errorf("ann's digest shows the other organization: %s", r.Body)
		}
		r = e.Must(200, bob, "GET", "/api/v1/me/digest?format=json", nil)
		if !strings.Contains(string(r.Body), theirs) || strings.Contains(string(r.Body), mine) {
			t.Errorf("bob's digest: %s", r.Body)
		}

		r = e.Must(200, ann, "GET", "/api/v1/me/digest?format=html", nil)
		page := string(r.Body)
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("?format=html answers %q", ct)
		}
		if !strings.Contains(page, "<!doctype html>") || !strings.Contains(page, "/items/"+mine+`#questions">`+mine+"</a>") ||
			!strings.Contains(page, "Ballet digest — 1 needs you") || strings.Contains(page, theirs) {
			t.Errorf("the page:\n%s", page)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script") {
			t.Errorf("the page's policy: %q", csp)
		}

		req, _ := http.NewRequest("GET", e.URL+"/api/v1/me/digest", nil)
		req.Header.Set("Authorization", "Bearer "+ann)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), mine) {
			t.Errorf("Accept text/html: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}

		if r := e.Do(ann, "GET", "/api/v1/me/digest?format=xml", nil); r.Status != 400 || !strings.Contains(string(r.Body), "format") {
			t.Errorf("?format=xml: %d %s", r.Status, r.Body)
		}
		if r := e.Do("", "GET", "/api/v1/me/digest", nil); r.Status != 401 {
			t.Errorf("no credential: %d %s", r.Status, r.Body)
		}
	})
}

// writeDigestEvents makes the world write digest.created, digest.sent and
// digest.failed: a digest for the platform admin, mailed, and one for a
// member, refused by the mail server on its last attempt (this world's
// Core mails none itself: it has no Mailer).
func writeDigestEvents(t *testing.T, w *flowWorld) {
	t.Helper()
	ctx := context.Background()
	s, c := w.Store, w.Core
	w.Admin(200, "PUT", "/api/v1/orgs/acme/members/carol", map[string]any{"role": "member"})
	for _, sub := range []string{"bootstrap", "carol"} {
		if _, err := s.Exec(ctx, store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, updated_at, version)
VALUES (?, ?, 'oidc', NULL, 0, 1)`, sub, sub+"@example.com")); err != nil {
			t.Fatal(err)
		}
	}
	res := &access.Resolver{Store: s}
	b := &digest.Builder{Store: s, Access: res, Needs: &needsme.Service{Store: s, Access: res, Flows: c.Flows}, Items: c.Tracker,
		Projects: c.Tenancy, Spend: &budget.Service{Store: s, Clock: c.Clock}, BaseURL: "https://ballet.example"}
	g := (&digest.Digester{Store: s, Applier: c.Applier, Clock: c.Clock, Builder: b, Every: 24 * time.Hour, PlatformAdmin: c.Auth.IsPlatformAdmin}).Init()
	if _, n, err := g.Pass(ctx); err != nil || n != 2 {
		t.Fatalf("the digester wrote %d digests: %v", n, err)
	}
	// Carol's address is gone by the time her digest is mailed: skipped
	// (digest.failed), whichever sender runs the job — this one, or the
	// world's own Core, which mails digests too when mail is configured.
	if _, err := s.Exec(ctx, store.Stmt(`UPDATE notification_settings SET email = NULL WHERE subject = 'carol'`)); err != nil {
		t.Fatal(err)
	}
	mailer := &refusing{refuse: "carol@example.com"}
	reg := handlers{}
	(&digest.Sender{Store: s, Applier: c.Applier, Clock: c.Clock, Builder: b, Mailer: mailer, PlatformAdmin: c.Auth.IsPlatformAdmin}).Register(reg)
	// Each digest's job, run here (the world's Core may have run some
	// already: a digest that is no longer pending is left alone).
	rows, err := s.Query(ctx, `SELECT id FROM digests WHERE status <> 'empty'`)
	if err != nil || rows.Len() != 2 {
		t.Fatalf("%v digests to mail: %v", rows, err)
	}
	for i := range rows.Len() {
		var id string
		_ = rows.Scan(i, &id)
		payload, _ := json.Marshal(digest.SendArgs{Digest: id})
		_ = reg["digest.send"](ctx, &job.Job{Kind: "digest.send", Payload: payload, Attempt: 1, MaxAttempts: 1})
	}
}

// refusing is a Mailer that refuses one address.
type refusing struct{ refuse string }

func (m *refusing) Send(_ context.Context, msg digest.Message) error {
	if msg.To == m.refuse {
		return errors.New("550 mailbox unavailable")
	}
	return nil
}

type handlers map[string]job.Handler

func (h handlers) Handle(kind string, f job.Handler) { h[kind] = f }
