package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/knowledge/client/clientfake"
)

const token = "service-credential-0123456789-0123456789"

func TestClientReadsAndSearches(t *testing.T) {
	f := clientfake.Start(t, token)
	f.Put("acme", client.Entry{Slug: "conventions/go", Title: "Go", Body: "We wrap errors with context.", Tags: []string{"go"}})
	f.Put("acme", client.Entry{Slug: "conventions/go", Title: "Go", Body: "We wrap every error with context.", Tags: []string{"go"}})
	f.Put("acme", client.Entry{Space: "ops", Slug: "deploy", Title: "Deploy", Body: "Deploy with care: errors page someone."})
	f.Put("other", client.Entry{Slug: "secret", Title: "Secret", Body: "errors of another organization"})
	c, err := client.New(client.Options{URL: f.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := c.Entry(ctx, "acme", "", "conventions/go", 0)
	if err != nil || e.Version != 2 || e.Body != "We wrap every error with context." || e.Space != "default" {
		t.Fatalf("entry: %+v, %v", e, err)
	}
	if e, err := c.Entry(ctx, "acme", "default", "conventions/go", 1); err != nil || e.Version != 1 {
		t.Fatalf("version 1: %+v, %v", e, err)
	}
	_, err = c.Entry(ctx, "acme", "", "nope", 0)
	if apperr.Code(err) != apperr.NotFound || !strings.Contains(err.Error(), "default/nope of acme") {
		t.Fatalf("missing entry: %v", err)
	}
	rs, err := c.Search(ctx, "acme", client.Query{Text: "error"})
	if err != nil || len(rs) != 2 || rs[0].Slug != "conventions/go" || !strings.Contains(rs[0].Snippet, "<mark>error</mark>") {
		t.Fatalf("search: %+v, %v", rs, err)
	}
	if rs, err := c.Search(ctx, "acme", client.Query{Text: "error", Space: "ops"}); err != nil || len(rs) != 1 || rs[0].Slug != "deploy" {
		t.Fatalf("search in ops: %+v, %v", rs, err)
	}
	if rs, err := c.Search(ctx, "acme", client.Query{Text: "error", Tags: []string{"go"}}); err != nil || len(rs) != 1 {
		t.Fatalf("search by tag: %+v, %v", rs, err)
	}
	if _, err := c.Search(ctx, "acme", client.Query{}); apperr.Code(err) != apperr.Invalid {
		t.Fatalf("empty query: %v", err)
	}
	// The slug's slash travels escaped, in one path segment.
	for _, r := range f.Requests() {
		if strings.Contains(r.URL.Path, "conventions/go") && !strings.Contains(r.URL.RawPath, "conventions%2Fgo") {
			t.Errorf("the slug was sent as %q", r.URL.RawPath)
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("a call without the service credential: %v", r.Header)
		}
	}
}

func TestClientUnavailable(t *testing.T) {
	f := clientfake.Start(t, token)
	ctx := context.Background()
	c, _ := client.New(client.Options{URL: f.URL, Token: token})
	f.SetDown(true)
	if _, err := c.Entry(ctx, "acme", "", "x", 0); !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "503") {
		t.Errorf("service answering 503: %v", err)
	}
	wrong, _ := client.New(client.Options{URL: f.URL, Token: "another-credential-0123456789-012345"})
	f.SetDown(false)
	if _, err := wrong.Search(ctx, "acme", client.Query{Text: "x"}); !errors.Is(err, client.ErrUnavailable) ||
		strings.Contains(err.Error(), "another-credential") {
		t.Errorf("credential refused: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	closed, _ := client.New(client.Options{URL: "http://" + addr, Token: token})
	if _, err := closed.Entry(ctx, "acme", "", "x", 0); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("nothing listening: %v", err)
	}
	none, _ := client.New(client.Options{URL: f.URL})
	if _, err := none.Entry(ctx, "acme", "", "x", 0); !errors.Is(err, client.ErrNotConfigured) {
		t.Errorf("no credential: %v", err)
	}
	if _, err := client.New(client.Options{URL: "127.0.0.1:8090"}); err == nil {
		t.Error("a URL without scheme was accepted")
	}
}

// TestClientRefusesBadNamesBeforeAnyRequest: a space or entry slug that is
// not one (such as "..", which the URL would resolve to the space itself)
// is an Invalid error naming it, and no request leaves the client with the
// service credential.
func TestClientRefusesBadNamesBeforeAnyRequest(t *testing.T) {
	f := clientfake.Start(t, token)
	c, err := client.New(client.Options{URL: f.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ space, slug, field string }{
		{"", "..", "slug"}, {"", ".", "slug"}, {"", "a/../b", "slug"}, {"", "a//b", "slug"}, {"", "%2e%2e", "slug"},
		{"..", "deploy", "space"}, {"ops/x", "deploy", "space"},
	} {
		_, err := c.Entry(ctx, "acme", tc.space, tc.slug, 0)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.Invalid || len(ae.FieldErrors()) != 1 || ae.FieldErrors()[0].Field != tc.field ||
			!strings.Contains(err.Error(), tc.slug) {
			t.Errorf("Entry(%q, %q) = %v; want Invalid naming %s", tc.space, tc.slug, err, tc.field)
		}
	}
	if _, err := c.Search(ctx, "acme", client.Query{Text: "x", Space: ".."}); apperr.Code(err) != apperr.Invalid {
		t.Errorf("Search in space ..: %v; want Invalid", err)
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("%d requests reached the service; want none", n)
	}
}
