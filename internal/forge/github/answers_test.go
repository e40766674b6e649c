package github

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/forge"
)

// answering is a GitHub that answers each "METHOD path" with a status and
// a body (404 for anything else), for answers the fake never gives.
func answering(t *testing.T, answers map[string]string) (*Forge, forge.Repo) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		if r.URL.Query().Get("page") != "" {
			key += "?page=" + r.URL.Query().Get("page")
		}
		a, ok := answers[key]
		if !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		var code int
		var body string
		fmt.Sscanf(a, "%d", &code)
		body = a[strings.Index(a, " ")+1:]
		if strings.HasPrefix(body, "next ") { // a Link to page 2
			body = strings.TrimPrefix(body, "next ")
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?page=2>; rel="next"`, r.Host, r.URL.Path))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	f := New(Options{Secrets: envs(func(string) (string, bool) { return token, true })})
	return f, forge.Repo{URL: "https://github.com/acme/app", DefaultBranch: "main", APIURL: srv.URL, CredentialsRef: "env:GH_TOKEN"}
}

const (
	branchA1 = `200 {"name":"ballet/ACME-1","commit":{"sha":"a1"}}`
	pullA1   = `{"number":%d,"state":"%s","head":{"ref":"%s","sha":"a1"},"base":{"ref":"%s"},"created_at":"2026-05-01T12:00:00Z"}`
)

// TestEnsureDuplicateNobodyLists: GitHub refuses the create as a duplicate
// yet lists no pull request of the branch: an error saying so, never an
// empty pull request taken for the ticket's.
func TestEnsureDuplicateNobodyLists(t *testing.T) {
	f, repo := answering(t, map[string]string{
		"GET /repos/acme/app/branches/ballet/ACME-1": branchA1,
		"GET /repos/acme/app/pulls":                  `200 []`,
		"POST /repos/acme/app/pulls":                 `422 {"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for acme:ballet/ACME-1."}]}`,
	})
	pr, err := f.EnsurePullRequest(t.Context(), repo, "ballet/ACME-1", "t", "b")
	if err == nil || !strings.Contains(err.Error(), "lists none") {
		t.Fatalf("EnsurePullRequest = %+v, %v; want the error that GitHub lists none", pr, err)
	}
}

// TestEnsureAdoptsOnlyWhatMatches: GitHub's head and base filter is not
// trusted: a listed pull request of another branch or into another base is
// never adopted (though newer), and every page is read.
func TestEnsureAdoptsOnlyWhatMatches(t *testing.T) {
	f, repo := answering(t, map[string]string{
		"GET /repos/acme/app/branches/ballet/ACME-1": branchA1,
		"GET /repos/acme/app/pulls": "200 next [" + fmt.Sprintf(pullA1, 5, "open", "ballet/ACME-2", "main") + "," +
			fmt.Sprintf(pullA1, 4, "open", "ballet/ACME-1", "release") + "]",
		"GET /repos/acme/app/pulls?page=2": "200 [" + fmt.Sprintf(pullA1, 3, "open", "ballet/ACME-1", "main") + "]",
	})
	pr, err := f.EnsurePullRequest(t.Context(), repo, "ballet/ACME-1", "t", "b")
	if err != nil || pr.Number != 3 {
		t.Fatalf("EnsurePullRequest = %+v, %v; want #3 of the second page", pr, err)
	}
}

// TestEnsureListRefused: a refused list is an error naming it.
func TestEnsureListRefused(t *testing.T) {
	f, repo := answering(t, map[string]string{
		"GET /repos/acme/app/branches/ballet/ACME-1": branchA1,
		"GET /repos/acme/app/pulls":                  `500 {"message":"boom"}`,
	})
	if _, err := f.EnsurePullRequest(t.Context(), repo, "ballet/ACME-1", "t", "b"); err == nil || !strings.Contains(err.Error(), "listing the pull requests") {
		t.Fatalf("err = %v, want the list's failure", err)
	}
}

// TestStateWithoutANumber: a pull request never opened has no state to
// read and nothing to merge; no call is made for number 0.
func TestStateWithoutANumber(t *testing.T) {
	f, repo := answering(t, nil)
	if _, err := f.State(t.Context(), repo, forge.PullRequest{Branch: "ballet/ACME-1"}); err == nil || !strings.Contains(err.Error(), "no pull request number") {
		t.Fatalf("State: err = %v", err)
	}
	if err := f.Merge(t.Context(), repo, forge.PullRequest{Branch: "ballet/ACME-1", HeadSHA: strings.Repeat("a", 40)}); err == nil || !strings.Contains(err.Error(), "no pull request number") {
		t.Fatalf("Merge: err = %v", err)
	}
}

// TestChangesRequestedWithoutWords: a change request with no text still
// says who asked, in the stage's report.
func TestChangesRequestedWithoutWords(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.AddReview("acme", "app", pr.Number, "alice", "MEMBER", "CHANGES_REQUESTED", "  ")
	if st := e.state(t, pr); !st.ChangesRequested || len(st.ChangeRequests) != 1 || st.ChangeRequests[0] != "alice: (no comment)" {
		t.Fatalf("%+v", st)
	}
}
