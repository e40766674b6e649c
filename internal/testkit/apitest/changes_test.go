package apitest_test

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type changesView struct {
	Branch, Base, Head string
	Ahead              int
	Commits            []struct{ SHA, Title, Author, Stage, Run string }
	Files              []struct {
		Path, Status, Patch  string
		Additions, Deletions int
		Truncated            bool
	}
	PullRequest any `json:"pull_request"`
}

// TestChangesAndApprovalHead: a ticket's changes on plain git (nothing
// ahead before a push; the pushed commit and its patch after); an approval
// naming an older head is refused with 409 and names the moved head, one
// naming the current head approves, recorded in the stage's event.
func TestChangesAndApprovalHead(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}}}}})
		key := w.ticket("bug")
		var c changesView
		w.Admin(200, "GET", "/api/v1/items/"+key+"/changes", nil).JSON(t, &c)
		if c.Branch != "ballet/"+key || c.Base != "main" || c.Head != "" || c.Ahead != 0 || len(c.Commits) != 0 || len(c.Files) != 0 || c.PullRequest != nil {
			t.Fatalf("before a push: %+v", c)
		}
		w.repo.PushBranch("ballet/" + key)
		old := w.repo.Head("ballet/" + key)
		w.Admin(200, "GET", "/api/v1/items/"+key+"/changes", nil).JSON(t, &c)
		file := "ballet_" + key + ".txt"
		if c.Head != old || c.Ahead != 1 || len(c.Commits) != 1 || c.Commits[0].SHA != old || c.Commits[0].Title != "change "+file ||
			c.Commits[0].Author != "t <t@example.com>" || c.Commits[0].Stage != "" || len(c.Files) != 1 || c.Files[0].Path != file ||
			c.Files[0].Status != "added" || c.Files[0].Additions != 1 || !strings.Contains(c.Files[0].Patch, "+ballet/"+key+"\n") {
			t.Fatalf("after a push: %+v", c)
		}

		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		w.await(key, "approval", func(f flowView) bool { return f.Waiting == "approval" })
		// The branch moves: a commit on top (PushBranch again could make
		// the very same commit within the same second).
		head := w.repo.CommitFiles("ballet/"+key, map[string]string{"later.txt": "later\n"}, "a later change")
		if head == old {
			t.Fatal("the branch did not move")
		}
		w.Admin(400, "POST", "/api/v1/items/"+key+"/flow/approve", map[string]any{"head": "HEAD"})
		resp := w.Admin(409, "POST", "/api/v1/items/"+key+"/flow/approve", map[string]any{"head": old})
		if !strings.Contains(string(resp.Body), "has moved to "+head[:12]) {
			t.Fatalf("stale head: %s", resp.Body)
		}
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/approve", map[string]any{"head": head, "comment": "seen"})
		w.await(key, "done", func(f flowView) bool { return f.Status == "done" })
		var hist struct {
			Events []struct {
				Type    string
				Payload struct{ Head string }
			}
		}
		w.Admin(200, "GET", "/api/v1/items/"+key+"/events?limit=1000", nil).JSON(t, &hist)
		found := false
		for _, e := range hist.Events {
			found = found || (e.Type == "flow.done" && e.Payload.Head == head)
		}
		if !found {
			t.Fatalf("no flow.done with head %s in %+v", head, hist.Events)
		}
	})
}
