package apitest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type skillOut struct {
	ID          string
	ProjectID   string `json:"project_id"`
	Name        string
	Description string
	Content     string
	UpdatedBy   string `json:"updated_by"`
	Version     int64
}

func TestSkillsAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		orgID := e.Org("acme")
		projectID := e.Project("acme", "ACME")
		admin, viewer := e.RoleToken(orgID, "admin"), e.RoleToken(orgID, "viewer")
		const base = "/api/v1/projects/ACME/skills"
		get := func(cred, path string) skillOut {
			t.Helper()
			var k skillOut
			e.Must(200, cred, "GET", path, nil).JSON(t, &k)
			return k
		}

		var k skillOut
		e.Must(201, admin, "POST", base, map[string]any{"name": "go-style", "description": "How we write Go", "content": "gofmt"}).JSON(t, &k)
		if k.Version != 1 || k.ProjectID != projectID || k.Name != "go-style" {
			t.Fatalf("created %+v", k)
		}
		e.Must(409, admin, "POST", base, map[string]any{"name": "go-style", "content": "again"})
		e.Must(201, admin, "POST", "/api/v1/projects/"+projectID+"/skills", map[string]any{"name": "docs", "content": "write them"})

		var list struct{ Skills []skillOut }
		e.Must(200, viewer, "GET", base, nil).JSON(t, &list)
		if len(list.Skills) != 2 || list.Skills[0].Name != "docs" || list.Skills[1].Content != "gofmt" {
			t.Fatalf("list %+v", list)
		}
		if got := get(viewer, base+"/go-style"); got != k {
			t.Fatalf("get %+v, want %+v", got, k)
		}

		// New versions over the version read; a stale one is a conflict.
		var k2 skillOut
		e.Must(200, admin, "PUT", base+"/go-style", map[string]any{"version": 1, "content": "gofmt + vet"}).JSON(t, &k2)
		if k2.Version != 2 || k2.Content != "gofmt + vet" || k2.Description != "How we write Go" {
			t.Fatalf("updated %+v", k2)
		}
		e.Must(409, admin, "PUT", base+"/go-style", map[string]any{"version": 1, "description": "stale"})
		e.Must(200, admin, "PUT", base+"/go-style", map[string]any{"version": 2, "description": "Go, the house way"})
		if old := get(viewer, base+"/go-style?version=1"); old.Content != "gofmt" || old.Version != 1 {
			t.Errorf("version 1: %+v", old)
		}
		if cur := get(viewer, base+"/go-style"); cur.Version != 3 || cur.Description != "Go, the house way" || cur.Content != "gofmt + vet" {
			t.Errorf("current: %+v", cur)
		}
		e.Must(404, viewer, "GET", base+"/go-style?version=4", nil)
		if r := e.Must(400, viewer, "GET", base+"/go-style?version=first", nil); fields(t, r) != "version" {
			t.Errorf("bad version: %s", r.Body)
		}
		var vs struct {
			Versions []struct {
				Version      int64
				Deleted      bool
				ContentBytes int `json:"content_bytes"`
			}
		}
		e.Must(200, viewer, "GET", base+"/go-style/versions", nil).JSON(t, &vs)
		if len(vs.Versions) != 3 || vs.Versions[0].Version != 3 || vs.Versions[2].Version != 1 || vs.Versions[2].ContentBytes != 5 {
			t.Errorf("versions %+v", vs)
		}

		// Delete: gone from reads, the name is free again.
		e.Must(204, admin, "DELETE", base+"/go-style", nil)
		e.Must(404, viewer, "GET", base+"/go-style", nil)
		e.Must(404, viewer, "GET", base+"/go-style/versions", nil)
		e.Must(404, admin, "PUT", base+"/go-style", map[string]any{"version": 4, "content": "x"})
		e.Must(404, admin, "DELETE", base+"/go-style", nil)
		e.Must(200, viewer, "GET", base, nil).JSON(t, &list)
		if len(list.Skills) != 1 {
			t.Errorf("after delete: %+v", list)
		}
		var again skillOut
		e.Must(201, admin, "POST", base, map[string]any{"name": "go-style", "content": "fresh"}).JSON(t, &again)
		if again.ID == k.ID || again.Version != 1 {
			t.Errorf("recreated %+v", again)
		}
		e.Must(404, admin, "GET", "/api/v1/projects/NOPE/skills", nil)

		evs, err := event.List(context.Background(), s, event.Filter{EntityType: "skill", EntityID: k.ID})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type+" "+string(ev.Payload))
			if ev.ProjectID != projectID || ev.OrganizationID != orgID || ev.ActorKind != event.ActorService || ev.ActingFor != "bootstrap" {
				t.Errorf("event %+v", ev)
			}
		}
		want := `skill.created {"name":"go-style","version":1}|skill.updated {"name":"go-style","version":2}|` +
			`skill.updated {"name":"go-style","version":3}|skill.deleted {"name":"go-style","version":4}`
		if got := strings.Join(types, "|"); got != want {
			t.Errorf("events:\n got %s\nwant %s", got, want)
		}
	})
}

// TestSkillsBadInput: every 400 names the field at fault.
func TestSkillsBadInput(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		const base = "/api/v1/projects/ACME/skills"
		e.Admin(201, "POST", base, map[string]any{"name": "go", "content": "x"})
		for _, c := range []struct {
			method, path string
			body         any
			want         string
		}{
			{"POST", base, map[string]any{"name": "Go Style", "content": "x"}, "name"},
			{"POST", base, map[string]any{"name": "", "content": "x"}, "name"},
			{"POST", base, map[string]any{"name": strings.Repeat("a", 65), "content": "x"}, "name"},
			{"POST", base, map[string]any{"name": "a"}, "content"},
			{"POST", base, map[string]any{"name": "a", "content": strings.Repeat("x", 256<<10+1)}, "content"},
			{"POST", base, map[string]any{"name": "a", "content": "x", "description": strings.Repeat("d", 1025)}, "description"},
			{"POST", base, map[string]any{"name": "a", "content": "x", "version": 3}, "version"},
			{"POST", base, `{"name": 7, "content": "x"}`, "name"},
			{"POST", base, map[string]any{"name": "BAD", "description": strings.Repeat("d", 2000)}, "name,description,content"},
			{"PUT", base + "/go", map[string]any{"content": "y"}, "version"},
			{"PUT", base + "/go", map[string]any{"version": "1", "content": "y"}, "version"},
			{"PUT", base + "/go", map[string]any{"version": 1}, "content"},
			{"PUT", base + "/go", map[string]any{"version": 1, "content": ""}, "content"},
			{"PUT", base + "/go", map[string]any{"version": 1, "name": "renamed"}, "name"},
		} {
			r := e.Admin(400, c.method, c.path, c.body)
			if got := fields(t, r); got != c.want {
				t.Errorf("%s %.60v: fields %q, want %q (%s)", c.method, c.body, got, c.want, r.Body)
			}
		}
	})
}

// TestSkillsConcurrentPut: two writers send the same version at once;
// exactly one gets 200, the other 409.
func TestSkillsConcurrentPut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		orgID := e.Org("acme")
		e.Project("acme", "ACME")
		admin := e.RoleToken(orgID, "admin")
		const path = "/api/v1/projects/ACME/skills/go"
		e.Admin(201, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "go", "content": "v1"})
		for round := int64(1); round <= 5; round++ {
			statuses := make([]int, 2)
			var wg sync.WaitGroup
			for i := range statuses {
				wg.Go(func() {
					statuses[i] = e.Do(admin, "PUT", path, map[string]any{"version": round, "content": "writer " + string(rune('a'+i))}).Status
				})
			}
			wg.Wait()
			if !(statuses[0] == 200 && statuses[1] == 409 || statuses[0] == 409 && statuses[1] == 200) {
				t.Fatalf("round %d: statuses %v, want one 200 and one 409", round, statuses)
			}
		}
		var vs struct{ Versions []struct{ Version int64 } }
		e.Admin(200, "GET", path+"/versions", nil).JSON(t, &vs)
		if len(vs.Versions) != 6 || vs.Versions[0].Version != 6 {
			t.Errorf("versions %+v", vs)
		}
	})
}
