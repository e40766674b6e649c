package githubfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

func get(t *testing.T, s *Server, path, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestAuthPaginationAndCounting(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	s := New(Options{Token: "tok", Clock: clk})
	defer s.Close()
	s.AddRepo("acme", "app", "main")
	for i := range 5 {
		b := fmt.Sprintf("b%d", i)
		s.Push("acme", "app", b, SHA(b))
		s.OpenPullRequest("acme", "app", b, "main", b, "")
	}

	if resp, _ := get(t, s, "repos/acme/app/pulls", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(t, s, "repos/acme/app/pulls", "other"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}

	resp, body := get(t, s, "repos/acme/app/pulls?per_page=2&page=2", "tok")
	var items []map[string]any
	if err := json.Unmarshal(body, &items); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(items) != 2 || items[0]["number"].(float64) != 3 {
		t.Fatalf("page 2 = %v, want #3 and #2 (newest first)", items)
	}
	if _, has := items[0]["mergeable"]; has {
		t.Fatal("a list item carries mergeable; GitHub's do not")
	}
	if link := resp.Header.Get("Link"); !strings.Contains(link, `page=3`) || !strings.Contains(link, `rel="next"`) {
		t.Fatalf("Link = %q", link)
	}
	if resp, _ := get(t, s, "repos/acme/app/pulls?per_page=2&page=3", "tok"); resp.Header.Get("Link") != "" {
		t.Fatal("the last page links a next one")
	}
	if resp, _ := get(t, s, "repos/acme/app/pulls?head=acme:b1&state=all", "tok"); resp.Header.Get("X-RateLimit-Remaining") == "0" {
		t.Fatal("a normal answer says no calls are left")
	}

	s.RateLimit(LimitPrimary, clk.Now().Add(time.Hour), 1)
	resp, _ = get(t, s, "repos/acme/app/pulls", "tok")
	if resp.StatusCode != 403 || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("X-RateLimit-Reset") != fmt.Sprint(clk.Now().Add(time.Hour).Unix()) {
		t.Fatalf("rate limited: %d %v", resp.StatusCode, resp.Header)
	}
	s.RateLimit(LimitSecondary, clk.Now().Add(90*time.Second), 1)
	if resp, _ = get(t, s, "repos/acme/app/pulls", "tok"); resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "90" {
		t.Fatalf("secondary: %d %v", resp.StatusCode, resp.Header)
	}
	s.Fail(502, 1)
	if resp, _ = get(t, s, "repos/acme/app/pulls", "tok"); resp.StatusCode != 502 {
		t.Fatalf("fail: %d", resp.StatusCode)
	}
	if resp, _ = get(t, s, "repos/acme/app/pulls", "tok"); resp.StatusCode != 200 {
		t.Fatalf("after the armed answers: %d", resp.StatusCode)
	}

	if resp, _ := get(t, s, "repos/acme/app/branches/nope", "tok"); resp.StatusCode != 404 {
		t.Fatalf("missing branch: %d", resp.StatusCode)
	}
	s.Push("acme", "app", "ballet/ACME-1", SHA("x"))
	for _, p := range []string{"repos/acme/app/branches/ballet/ACME-1", "repos/acme/app/branches/ballet%2FACME-1"} {
		if resp, _ := get(t, s, p, "tok"); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := get(t, s, "nowhere", "tok"); resp.StatusCode != 404 {
		t.Fatalf("unknown route: %d", resp.StatusCode)
	}

	calls := s.Calls()
	if calls["GET /repos/{owner}/{repo}/pulls"] != 9 || calls["GET /repos/{owner}/{repo}/branches/{branch...}"] != 3 || calls["GET (unknown)"] != 1 {
		t.Fatalf("calls %v", calls)
	}
	s.ResetCalls()
	if s.TotalCalls() != 0 {
		t.Fatal("ResetCalls left counts")
	}
}
