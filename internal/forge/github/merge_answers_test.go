package github

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/forge"
)

// answeringInTurn is a GitHub that answers each "METHOD path" with the
// next of its answers ("status body"; the last one again once they run
// out), 404 for anything else, and counts the calls.
func answeringInTurn(t *testing.T, answers map[string][]string) (*Forge, forge.Repo, map[string]int) {
	t.Helper()
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := r.Method + " " + r.URL.Path
		as, n := answers[key], calls[key]
		calls[key]++
		mu.Unlock()
		if len(as) == 0 {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		a := as[min(n, len(as)-1)]
		var code int
		fmt.Sscanf(a, "%d", &code)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, a[strings.Index(a, " ")+1:])
	}))
	t.Cleanup(srv.Close)
	f := New(Options{Secrets: envs(func(string) (string, bool) { return token, true })})
	return f, forge.Repo{URL: "https://github.com/acme/app", DefaultBranch: "main", APIURL: srv.URL, CredentialsRef: "env:GH_TOKEN"}, calls
}

var headA = strings.Repeat("a", 40)

const (
	mergeCall   = "PUT /repos/acme/app/pulls/7/merge"
	isMergedGet = "GET /repos/acme/app/pulls/7/merge"
	pullGet     = "GET /repos/acme/app/pulls/7"
	pullEdit    = "PATCH /repos/acme/app/pulls/7"
)

func pull7(state, sha string) string {
	return fmt.Sprintf(`200 {"number":7,"state":%q,"head":{"ref":"ballet/ACME-1","sha":%q},"base":{"ref":"main"}}`, state, sha)
}

// TestMergeAnswers: what each of GitHub's answers to a merge means — the
// decision the merge stage acts on.
func TestMergeAnswers(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers map[string][]string
		is      error  // the error it must be (nil: success)
		says    string // and a text it must hold
	}{
		{"merged", map[string][]string{mergeCall: {`200 {"merged":true,"sha":"m1"}`}}, nil, ""},
		{"answered not merged", map[string][]string{mergeCall: {`200 {"merged":false,"message":"Base branch was modified"}`}},
			forge.ErrNotMergeable, "Base branch was modified"},
		{"head moved (409)", map[string][]string{mergeCall: {`409 {"message":"Head branch was modified"}`}}, forge.ErrOutOfDate, "Head branch was modified"},
		{"refused, not merged (405)", map[string][]string{mergeCall: {`405 {"message":"Pull Request is not mergeable"}`}},
			forge.ErrNotMergeable, "405"},
		{"refused, merged already at this head (405)", map[string][]string{mergeCall: {`405 {"message":"Pull Request is not mergeable"}`},
			isMergedGet: {`204 `}, pullGet: {pull7("closed", headA)}}, nil, ""},
		{"refused, merged already at this head (422)", map[string][]string{mergeCall: {`422 {"message":"Validation Failed"}`},
			isMergedGet: {`204 `}, pullGet: {pull7("closed", headA)}}, nil, ""},
		{"refused, merged at another head", map[string][]string{mergeCall: {`405 {"message":"Pull Request is not mergeable"}`},
			isMergedGet: {`204 `}, pullGet: {pull7("closed", strings.Repeat("b", 40))}}, forge.ErrOutOfDate, "merged at bbbb"},
		{"refused, asking whether merged fails", map[string][]string{mergeCall: {`405 {"message":"no"}`},
			isMergedGet: {`500 {"message":"boom"}`}}, nil, "asking whether it was merged"},
		{"refused, merged, reading it fails", map[string][]string{mergeCall: {`405 {"message":"no"}`},
			isMergedGet: {`204 `}, pullGet: {`500 {"message":"boom"}`}}, nil, "reading the merged pull request"},
		{"server error", map[string][]string{mergeCall: {`500 {"message":"boom"}`}}, nil, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, repo, _ := answeringInTurn(t, c.answers)
			err := f.Merge(t.Context(), repo, forge.PullRequest{Number: 7, Branch: "ballet/ACME-1", HeadSHA: headA})
			switch {
			case c.is == nil && c.says == "":
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
			case err == nil:
				t.Fatalf("success, want an error (%v, %q)", c.is, c.says)
			case c.is != nil && !errors.Is(err, c.is):
				t.Fatalf("err = %v, want %v", err, c.is)
			case c.is == nil && (errors.Is(err, forge.ErrNotMergeable) || errors.Is(err, forge.ErrOutOfDate)):
				t.Fatalf("err = %v, want a plain failure, not a merge decision", err)
			case !strings.Contains(err.Error(), c.says):
				t.Fatalf("err = %v, want it to say %q", err, c.says)
			}
		})
	}
}

// TestCloseAnswers: Close closes an open pull request, leaves one already
// closed or merged alone (no edit), takes one closed meanwhile (a 422,
// then not open) as closed, and fails otherwise.
func TestCloseAnswers(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers map[string][]string
		ok      bool
		edits   int
	}{
		{"open", map[string][]string{pullGet: {pull7("open", headA)}, pullEdit: {pull7("closed", headA)}}, true, 1},
		{"closed already", map[string][]string{pullGet: {pull7("closed", headA)}, pullEdit: {`500 {"message":"no edit expected"}`}}, true, 0},
		{"closed meanwhile", map[string][]string{pullGet: {pull7("open", headA), pull7("closed", headA)},
			pullEdit: {`422 {"message":"Validation Failed"}`}}, true, 1},
		{"refused, still open", map[string][]string{pullGet: {pull7("open", headA)}, pullEdit: {`422 {"message":"Validation Failed"}`}}, false, 1},
		{"refused, reading again fails", map[string][]string{pullGet: {pull7("open", headA), `500 {"message":"boom"}`},
			pullEdit: {`422 {"message":"Validation Failed"}`}}, false, 1},
		{"edit fails", map[string][]string{pullGet: {pull7("open", headA)}, pullEdit: {`500 {"message":"boom"}`}}, false, 1},
		{"reading fails", map[string][]string{pullGet: {`500 {"message":"boom"}`}}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, repo, calls := answeringInTurn(t, c.answers)
			err := f.Close(t.Context(), repo, forge.PullRequest{Number: 7, Branch: "ballet/ACME-1"})
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want success %v", err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "closing pull request #7") {
				t.Errorf("err = %v does not say what failed", err)
			}
			if calls[pullEdit] != c.edits {
				t.Errorf("%d edits, want %d", calls[pullEdit], c.edits)
			}
		})
	}
}
