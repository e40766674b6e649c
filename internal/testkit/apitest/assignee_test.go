package apitest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/tracker"
)

// A ticket's assignee is a project member who may work on it (tracker.write):
// set on creation or by a PATCH, cleared with "", recorded in
// ticket.updated with the previous value; anyone else is a 400 naming
// assignee.
func TestTicketAssignee(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "member"})
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/vic", map[string]any{"role": "viewer"})
		e.Admin(200, "PUT", "/api/v1/projects/ACME/members/vic", map[string]any{"role": "member"}) // a member of ACME only

		var it struct {
			Key      string
			Assignee *string
			Version  int64
		}
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "assignee": "alice"}).JSON(t, &it)
		if it.Assignee == nil || *it.Assignee != "alice" {
			t.Fatalf("created with assignee %v, want alice", it.Assignee)
		}
		for _, bad := range []string{"mallory", "bootstrap"} {
			r := e.Do(apitest.BootstrapToken, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "assignee": bad})
			if r.Status != 400 || !strings.Contains(string(r.Body), `"assignee"`) {
				t.Errorf("assignee %q: %d %s, want a 400 naming assignee", bad, r.Status, r.Body)
			}
		}
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/val", map[string]any{"role": "viewer"})
		if r := e.Do(apitest.BootstrapToken, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": it.Version, "assignee": "val"}); r.Status != 400 {
			t.Errorf("a viewer as assignee: %d %s, want 400", r.Status, r.Body)
		}
		e.Admin(200, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": it.Version, "assignee": "vic"}).JSON(t, &it)
		if it.Assignee == nil || *it.Assignee != "vic" {
			t.Errorf("patched to vic (a member of ACME by override): %v", it.Assignee)
		}
		e.Admin(200, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": it.Version, "assignee": ""}).JSON(t, &it)
		if it.Assignee != nil {
			t.Errorf("unassigned: %v", *it.Assignee)
		}

		var page struct{ Events []event.Event }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/events", nil).JSON(t, &page)
		var changes []string
		for _, ev := range page.Events {
			u, ok, err := event.Decode[tracker.TicketUpdated](ev)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				b, _ := json.Marshal(u)
				changes = append(changes, string(b))
			}
		}
		want := []string{`{"changes":{"assignee":"vic"},"previous":{"assignee":"alice"}}`, `{"changes":{"assignee":null},"previous":{"assignee":"vic"}}`}
		if strings.Join(changes, "\n") != strings.Join(want, "\n") {
			t.Errorf("ticket.updated payloads:\n%s\nwant\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
		}
	})
}
