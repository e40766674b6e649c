package apitest_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// apiItem is an item as the API answers it.
type apiItem struct {
	ID        string   `json:"id"`
	Key       string   `json:"key"`
	Number    int64    `json:"number"`
	Type      string   `json:"type"`
	Title     string   `json:"title"`
	Epic      *string  `json:"epic"`
	EpicID    *string  `json:"epic_id"`
	State     string   `json:"state"`
	BlockedBy []string `json:"blocked_by"`
	Blocks    []string `json:"blocks"`
	Version   int64    `json:"version"`
}

type apiEvent struct {
	Seq        int64           `json:"seq"`
	Type       string          `json:"type"`
	EntityType string          `json:"entity_type"`
	EntityID   string          `json:"entity_id"`
	ProjectID  string          `json:"project_id"`
	ActorSub   string          `json:"actor_sub"`
	Payload    json.RawMessage `json:"payload"`
}

type apiEvents struct {
	Events  []apiEvent `json:"events"`
	LastSeq int64      `json:"last_seq"`
}

func createItem(e *apitest.Env, project string, body map[string]any) apiItem {
	e.T.Helper()
	var it apiItem
	e.Admin(201, "POST", "/api/v1/projects/"+project+"/items", body).JSON(e.T, &it)
	return it
}

func sortedKeys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func TestItemsAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		orgID := e.Org("acme")
		projectID := e.Project("acme", "ACME")
		member := e.RoleToken(orgID, "member")

		// Create: the JSON has exactly the documented fields.
		r := e.Must(201, member, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "epic", "title": "Parser", "description": "All of it"})
		m := r.Map(t)
		if got := sortedKeys(m); got != "acceptance_criteria,assignee,blocked_by,blocks,created_at,created_by,description,epic,epic_id,id,key,number,organization_id,project_id,state,title,type,updated_at,version" {
			t.Fatalf("item fields: %s", got)
		}
		if m["key"] != "ACME-1" || m["organization_id"] != orgID || m["project_id"] != projectID || m["epic"] != nil || m["state"] != "backlog" || m["version"] != 1.0 {
			t.Fatalf("created %s", r.Body)
		}
		epic := m["key"].(string)
		lexer := createItem(e, "ACME", map[string]any{"type": "task", "title": "Lexer", "epic": epic, "acceptance_criteria": "tokens"})
		if lexer.Epic == nil || *lexer.Epic != epic || lexer.Key != "ACME-2" {
			t.Fatalf("lexer %+v", lexer)
		}
		for i := 3; i <= 7; i++ {
			state := "backlog"
			if i%2 == 1 {
				state = "ready"
			}
			createItem(e, "ACME", map[string]any{"type": "bug", "title": fmt.Sprintf("Bug %d", i), "state": state})
		}
		// Get by key and id.
		var byKey, byID apiItem
		e.Must(200, member, "GET", "/api/v1/items/ACME-2", nil).JSON(t, &byKey)
		e.Must(200, member, "GET", "/api/v1/items/"+lexer.ID, nil).JSON(t, &byID)
		if byKey.ID != lexer.ID || byID.Key != "ACME-2" {
			t.Fatalf("get: %+v %+v", byKey, byID)
		}
		e.Must(404, member, "GET", "/api/v1/items/ACME-99", nil)

		// List, filters and pages.
		list := func(query string) (keys []string, next any) {
			t.Helper()
			var body struct {
				Items     []apiItem `json:"items"`
				NextAfter *int64    `json:"next_after"`
			}
			e.Must(200, member, "GET", "/api/v1/projects/ACME/items"+query, nil).JSON(t, &body)
			for _, it := range body.Items {
				keys = append(keys, it.Key)
			}
			if body.NextAfter != nil {
				next = *body.NextAfter
			}
			return keys, next
		}
		for query, want := range map[string]string{
			"":                        "[ACME-1 ACME-2 ACME-3 ACME-4 ACME-5 ACME-6 ACME-7] <nil>",
			"?limit=3":                "[ACME-1 ACME-2 ACME-3] 3",
			"?limit=3&after=3":        "[ACME-4 ACME-5 ACME-6] 6",
			"?limit=3&after=6":        "[ACME-7] <nil>",
			"?limit=1&after=6":        "[ACME-7] <nil>",
			"?state=ready":            "[ACME-3 ACME-5 ACME-7] <nil>",
			"?state=ready&type=bug":   "[ACME-3 ACME-5 ACME-7] <nil>",
			"?type=epic":              "[ACME-1] <nil>",
			"?epic=ACME-1":            "[ACME-2] <nil>",
			"?type=task&state=ready":  "[] <nil>",
			"?state=backlog&limit=2":  "[ACME-1 ACME-2] 2",
			"?state=backlog&after=2":  "[ACME-4 ACME-6] <nil>",
			"?after=7":                "[] <nil>",
			"?limit=200&state=paused": "[] <nil>",
		} {
			keys, next := list(query)
			if got := fmt.Sprint(keys, " ", next); got != want {
				t.Errorf("list%s = %s, want %s", query, got, want)
			}
		}

		// PATCH: a stale version is a conflict; a user may not start a ticket.
		var patched apiItem
		e.Must(200, member, "PATCH", "/api/v1/items/ACME-2", map[string]any{"version": 1, "title": "Lexer v2", "state": "ready"}).JSON(t, &patched)
		if patched.Version != 2 || patched.Title != "Lexer v2" || patched.State != "ready" {
			t.Fatalf("patched %+v", patched)
		}
		r = e.Must(409, member, "PATCH", "/api/v1/items/ACME-2", map[string]any{"version": 1, "title": "Lost"})
		if !strings.Contains(string(r.Body), "stale version") {
			t.Fatalf("stale: %s", r.Body)
		}
		r = e.Must(409, member, "PATCH", "/api/v1/items/ACME-2", map[string]any{"version": 2, "state": "in_progress"})
		if !strings.Contains(string(r.Body), "from ready to in_progress") {
			t.Fatalf("refused transition: %s", r.Body)
		}
		e.Must(200, member, "PATCH", "/api/v1/items/ACME-2", map[string]any{"version": 2, "epic": ""}).JSON(t, &patched)
		if patched.Epic != nil || patched.EpicID != nil || patched.Version != 3 {
			t.Fatalf("epic cleared: %+v", patched)
		}

		// Blockers.
		r = e.Must(201, member, "POST", "/api/v1/items/ACME-2/blockers/ACME-3", nil)
		var blocked apiItem
		r.JSON(t, &blocked)
		if fmt.Sprint(blocked.BlockedBy) != "[ACME-3]" {
			t.Fatalf("blocked %s", r.Body)
		}
		e.Must(200, member, "POST", "/api/v1/items/ACME-2/blockers/ACME-3", nil) // already there: idempotent
		e.Must(201, member, "POST", "/api/v1/items/ACME-3/blockers/ACME-4", nil)
		r = e.Must(422, member, "POST", "/api/v1/items/ACME-4/blockers/ACME-2", nil)
		if !strings.Contains(string(r.Body), "ACME-4 → ACME-2 → ACME-3 → ACME-4") {
			t.Fatalf("cycle: %s", r.Body)
		}
		e.Must(422, member, "POST", "/api/v1/items/ACME-4/blockers/ACME-4", nil)
		e.Must(404, member, "POST", "/api/v1/items/ACME-4/blockers/ACME-99", nil)
		var blocker apiItem
		e.Must(200, member, "GET", "/api/v1/items/ACME-3", nil).JSON(t, &blocker)
		if fmt.Sprint(blocker.BlockedBy, blocker.Blocks) != "[ACME-4] [ACME-2]" {
			t.Fatalf("ACME-3: %+v", blocker)
		}
		e.Must(204, member, "DELETE", "/api/v1/items/ACME-3/blockers/ACME-4", nil)
		e.Must(404, member, "DELETE", "/api/v1/items/ACME-3/blockers/ACME-4", nil)

		// Questions.
		r = e.Must(201, member, "POST", "/api/v1/items/ACME-2/questions", map[string]any{"text": "Which tokens?", "blocking": true})
		q := r.Map(t)
		if got := sortedKeys(q); got != "answer,answered_at,answered_by,asked_at,asked_by,blocking,escalated_at,id,item,item_id,text,version" {
			t.Fatalf("question fields: %s", got)
		}
		if q["item"] != "ACME-2" || q["item_id"] != lexer.ID || q["answer"] != nil || q["blocking"] != true {
			t.Fatalf("question %s", r.Body)
		}
		var q2 struct{ ID string }
		e.Must(201, member, "POST", "/api/v1/items/ACME-2/questions", map[string]any{"text": "Unicode?", "blocking": true}).JSON(t, &q2)
		var q3 struct{ ID string }
		e.Must(201, member, "POST", "/api/v1/items/ACME-2/questions", map[string]any{"text": "Just curious"}).JSON(t, &q3)
		e.Must(200, member, "POST", "/api/v1/questions/"+q3.ID+"/answer", map[string]any{"answer": "Sure"})
		r = e.Must(200, member, "POST", "/api/v1/questions/"+q["id"].(string)+"/answer", map[string]any{"answer": "Identifiers"})
		a := r.Map(t)
		if a["answer"] != "Identifiers" || a["answered_by"] == nil || a["answered_at"] == nil || a["version"] != 2.0 {
			t.Fatalf("answered %s", r.Body)
		}
		e.Must(409, member, "POST", "/api/v1/questions/"+q["id"].(string)+"/answer", map[string]any{"answer": "Again"})
		e.Must(200, member, "POST", "/api/v1/questions/"+q2.ID+"/answer", map[string]any{"answer": "Yes"})
		e.Must(404, member, "POST", "/api/v1/questions/nope/answer", map[string]any{"answer": "x"})
		var qs struct {
			Questions []struct {
				ID     string
				Answer *string
			}
		}
		e.Must(200, member, "GET", "/api/v1/items/ACME-2/questions", nil).JSON(t, &qs)
		if len(qs.Questions) != 3 || qs.Questions[0].ID != q["id"] || qs.Questions[2].Answer == nil {
			t.Fatalf("questions %+v", qs)
		}

		// The item's history: its events and its questions', in seq order.
		var hist apiEvents
		e.Must(200, member, "GET", "/api/v1/items/ACME-2/events", nil).JSON(t, &hist)
		var types []string
		lastFlags := map[string]any{}
		for _, ev := range hist.Events {
			types = append(types, ev.Type)
			if ev.Type == "question.answered" {
				var p map[string]any
				_ = json.Unmarshal(ev.Payload, &p)
				lastFlags[ev.EntityID] = p["last_blocking_answered"]
				if p["item_id"] != lexer.ID || p["blocking"] == nil {
					t.Errorf("answered payload %s", ev.Payload)
				}
			}
		}
		want := "ticket.created ticket.state_changed ticket.updated ticket.blocker_added question.asked question.asked question.asked question.answered question.answered question.answered"
		if strings.Join(types, " ") != want {
			t.Fatalf("history:\n%s\nwant\n%s", strings.Join(types, " "), want)
		}
		if lastFlags[q3.ID] != false || lastFlags[q["id"].(string)] != false || lastFlags[q2.ID] != true {
			t.Fatalf("last_blocking_answered %v", lastFlags)
		}
		if hist.LastSeq != hist.Events[len(hist.Events)-1].Seq {
			t.Fatalf("last_seq %d", hist.LastSeq)
		}
		var page apiEvents
		e.Must(200, member, "GET", fmt.Sprintf("/api/v1/items/ACME-2/events?after=%d&limit=2", hist.Events[3].Seq), nil).JSON(t, &page)
		if len(page.Events) != 2 || page.Events[0].Seq != hist.Events[4].Seq || page.LastSeq != hist.Events[5].Seq {
			t.Fatalf("history page %+v", page)
		}

		// Project events after a seq: every event of the project, in order.
		var all apiEvents
		e.Must(200, member, "GET", "/api/v1/projects/ACME/events?limit=1000", nil).JSON(t, &all)
		if len(all.Events) < 15 || all.Events[0].Type != "project.created" {
			t.Fatalf("%d project events, first %+v", len(all.Events), all.Events[0])
		}
		logged, err := event.List(t.Context(), s, event.Filter{ProjectID: projectID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.Events) != len(logged) {
			t.Fatalf("%d project events, the log holds %d", len(all.Events), len(logged))
		}
		for i, ev := range all.Events {
			if ev.ProjectID != projectID || ev.Seq != logged[i].Seq || ev.Type != logged[i].Type || ev.EntityID != logged[i].EntityID {
				t.Fatalf("project event %d: %+v, the log holds %+v", i, ev, logged[i])
			}
		}
		mid := all.Events[10].Seq
		var tail apiEvents
		e.Must(200, member, "GET", fmt.Sprintf("/api/v1/projects/ACME/events?after=%d&limit=3", mid), nil).JSON(t, &tail)
		if len(tail.Events) != 3 || tail.Events[0].Seq != all.Events[11].Seq || tail.LastSeq != all.Events[13].Seq {
			t.Fatalf("after %d: %+v", mid, tail)
		}
		var empty apiEvents
		e.Must(200, member, "GET", fmt.Sprintf("/api/v1/projects/ACME/events?after=%d", all.LastSeq), nil).JSON(t, &empty)
		if len(empty.Events) != 0 || empty.LastSeq != all.LastSeq || !strings.Contains(string(e.Must(200, member, "GET", fmt.Sprintf("/api/v1/projects/ACME/events?after=%d", all.LastSeq), nil).Body), `"events":[]`) {
			t.Fatalf("empty page %+v", empty)
		}
		// Beyond the log's head: an error naming the head, not an empty
		// page that would make a poller skip every event up to there.
		head := all.LastSeq // the project's events are the last ones written
		for _, path := range []string{"/api/v1/projects/ACME/events", "/api/v1/items/ACME-2/events"} {
			r := e.Must(400, member, "GET", fmt.Sprintf("%s?after=%d", path, head+10), nil)
			if want := fmt.Sprintf(`"field":"after","message":"%d is beyond the log's head (seq %d)`, head+10, head); !strings.Contains(string(r.Body), want) {
				t.Fatalf("%s after the head: %s, want %s", path, r.Body, want)
			}
		}
		if strings.Contains(e.Logs(), "level=ERROR") {
			t.Fatalf("errors logged:\n%s", e.Logs())
		}
	})
}

func TestItemsBadInput(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.HTTP.MaxBodyBytes = 128 << 10 })
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "A task"})
		createItem(e, "ACME", map[string]any{"type": "epic", "title": "An epic"})
		long := strings.Repeat("x", 65<<10)
		cases := []struct {
			method, path string
			body         any
			status       int
			want         string
		}{
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","color":"red"}`, 400, `"field":"color","message":"unknown field"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":42}`, 400, `"field":"title","message":"must be a string, not number"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"` + strings.Repeat("t", 501) + `"}`, 400, `"field":"title"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"  "}`, 400, `"field":"title"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"story","title":"x"}`, 400, `"field":"type","message":"\"story\" is not \"epic\" or one of the project's ticket types (task, bug, docs)"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","epic":"ACME-1"}`, 400, `"field":"epic","message":"ACME-1 is a task, not an epic"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","epic":"ACME-77"}`, 400, `"field":"epic"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"epic","title":"x","epic":"ACME-2"}`, 400, `"field":"epic"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","state":"done"}`, 400, `"field":"state"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","description":"` + long + `"}`, 400, `"field":"description"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","acceptance_criteria":"` + long + `"}`, 400, `"field":"acceptance_criteria"`},
			{"POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"x","description":"` + strings.Repeat("x", 130<<10) + `"}`, 413, "exceeds"},
			{"POST", "/api/v1/projects/NOPE/items", `{"type":"task","title":"x"}`, 404, "not found"},
			{"PATCH", "/api/v1/items/ACME-1", `{"title":"x"}`, 400, `"field":"version"`},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":"1"}`, 400, `"field":"version","message":"must be an integer, not string"`},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":1}`, 400, "nothing to change"},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":1,"state":"started"}`, 400, `"field":"state"`},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":1,"type":"story"}`, 400, `"field":"type"`},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":1,"epic":"ACME-1"}`, 400, `"field":"epic"`},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":1,"blocked_by":[]}`, 400, `"field":"blocked_by","message":"unknown field"`},
			{"PATCH", "/api/v1/items/ACME-1", `{"version":1,"title":"` + strings.Repeat("x", 140<<10) + `"}`, 413, "exceeds"},
			{"GET", "/api/v1/projects/ACME/items?limit=0", nil, 400, `"field":"limit"`},
			{"GET", "/api/v1/projects/ACME/items?limit=201", nil, 400, `"field":"limit"`},
			{"GET", "/api/v1/projects/ACME/items?after=-1", nil, 400, `"field":"after"`},
			{"GET", "/api/v1/projects/ACME/items?state=started", nil, 400, `"field":"state"`},
			{"GET", "/api/v1/projects/ACME/items?epic=ACME-1", nil, 400, `"field":"epic"`},
			{"GET", "/api/v1/projects/ACME/events?limit=x", nil, 400, `"field":"limit"`},
			{"GET", "/api/v1/items/ACME-1/events?after=y", nil, 400, `"field":"after"`},
			{"POST", "/api/v1/items/ACME-1/questions", `{"text":"","blocking":true}`, 400, `"field":"text"`},
			{"POST", "/api/v1/items/ACME-1/questions", `{"text":"` + strings.Repeat("q", 17<<10) + `"}`, 400, `"field":"text"`},
			{"POST", "/api/v1/items/ACME-1/questions", `{"text":"ok","blocking":"yes"}`, 400, `"field":"blocking","message":"must be true or false, not string"`},
		}
		for _, c := range cases {
			r := e.Do(apitest.BootstrapToken, c.method, c.path, c.body)
			if r.Status != c.status || !strings.Contains(string(r.Body), c.want) {
				t.Errorf("%s %s %.60v: %d %.300s; want %d containing %s", c.method, c.path, c.body, r.Status, r.Body, c.status, c.want)
			}
		}
		var q struct{ ID string }
		e.Admin(201, "POST", "/api/v1/items/ACME-1/questions", map[string]any{"text": "?"}).JSON(t, &q)
		e.Admin(400, "POST", "/api/v1/questions/"+q.ID+"/answer", `{"answer":""}`)
		e.Admin(400, "POST", "/api/v1/questions/"+q.ID+"/answer", `{"answer":"x","by":"me"}`)
		e.Admin(400, "POST", "/api/v1/questions/"+q.ID+"/answer", `{"answer":"`+long+`"}`)
		// Nothing of that wrote an event beyond the two items and the question.
		var evs apiEvents
		e.Admin(200, "GET", "/api/v1/projects/ACME/events", nil).JSON(t, &evs)
		var types []string
		for _, ev := range evs.Events {
			types = append(types, ev.Type)
		}
		if strings.Join(types, " ") != "project.created ticket.created epic.created question.asked" {
			t.Fatalf("events %v", types)
		}
		if strings.Contains(e.Logs(), "level=ERROR") {
			t.Fatalf("bad input logged as an internal error:\n%s", e.Logs())
		}
	})
}

// TestItemsInvisibleAcrossOrganizations: another organization's admin gets
// 404 on every item, question and event route, with the message an
// unknown entity gets; blockers never cross organizations.
func TestItemsInvisibleAcrossOrganizations(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		orgB := e.Org("globex")
		e.Project("acme", "ACME")
		e.Project("globex", "GLX")
		a := createItem(e, "ACME", map[string]any{"type": "task", "title": "Secret"})
		b := createItem(e, "ACME", map[string]any{"type": "task", "title": "Other secret"})
		g := createItem(e, "GLX", map[string]any{"type": "task", "title": "Theirs"})
		e.Admin(201, "POST", "/api/v1/items/ACME-1/blockers/ACME-2", nil)
		var q struct{ ID string }
		e.Admin(201, "POST", "/api/v1/items/ACME-1/questions", map[string]any{"text": "?", "blocking": true}).JSON(t, &q)
		other := e.RoleToken(orgB, "admin")
		// The same request on entities that do not exist: the answer must
		// be the same but for the names.
		unknownIDs := []string{transition.NewID(), transition.NewID(), transition.NewID()}
		toUnknown := strings.NewReplacer("ACME-1", "NOPE-1", "ACME-2", "NOPE-2", "/projects/ACME/", "/projects/NOPE/",
			a.ID, unknownIDs[0], b.ID, unknownIDs[1], q.ID, unknownIDs[2])
		fromUnknown := strings.NewReplacer("NOPE", "ACME", unknownIDs[0], a.ID, unknownIDs[1], b.ID, unknownIDs[2], q.ID)
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "x"}},
			{"GET", "/api/v1/projects/ACME/items", nil},
			{"GET", "/api/v1/projects/ACME/events", nil},
			{"GET", "/api/v1/items/ACME-1", nil},
			{"GET", "/api/v1/items/" + a.ID, nil},
			{"PATCH", "/api/v1/items/ACME-1", map[string]any{"version": 1, "title": "x"}},
			{"POST", "/api/v1/items/ACME-1/blockers/ACME-2", nil},
			{"DELETE", "/api/v1/items/ACME-1/blockers/ACME-2", nil},
			{"POST", "/api/v1/items/GLX-1/blockers/ACME-2", nil}, // their item, our blocker
			{"DELETE", "/api/v1/items/GLX-1/blockers/" + b.ID, nil},
			{"GET", "/api/v1/items/ACME-1/questions", nil},
			{"POST", "/api/v1/items/ACME-1/questions", map[string]any{"text": "x"}},
			{"POST", "/api/v1/questions/" + q.ID + "/answer", map[string]any{"answer": "x"}},
			{"GET", "/api/v1/items/ACME-1/events", nil},
		} {
			r := e.Do(other, c.method, c.path, c.body)
			if r.Status != 404 || strings.Contains(string(r.Body), `"message":"not found"`) {
				t.Errorf("%s %s as another organization's admin: %d %s", c.method, c.path, r.Status, r.Body)
			}
			unknown := e.Do(other, c.method, toUnknown.Replace(c.path), c.body)
			if got, want := string(r.Body), fromUnknown.Replace(string(unknown.Body)); unknown.Status != 404 || got != want {
				t.Errorf("%s %s as another organization's admin: %s, but an unknown entity gets %d %s", c.method, c.path, got, unknown.Status, unknown.Body)
			}
		}
		// Even the platform admin cannot link items of two organizations.
		e.Admin(404, "POST", "/api/v1/items/ACME-1/blockers/GLX-1", nil)
		e.Admin(404, "POST", "/api/v1/items/"+g.ID+"/blockers/"+a.ID, nil)
		// Nothing changed.
		var it apiItem
		e.Admin(200, "GET", "/api/v1/items/ACME-1", nil).JSON(t, &it)
		if it.Version != 1 || it.Title != "Secret" || fmt.Sprint(it.BlockedBy) != "[ACME-2]" {
			t.Fatalf("changed: %+v", it)
		}
		var their apiEvents
		e.Must(200, other, "GET", "/api/v1/projects/GLX/events", nil).JSON(t, &their)
		for _, ev := range their.Events {
			if ev.EntityID == a.ID || ev.EntityID == b.ID || ev.EntityID == q.ID {
				t.Fatalf("another organization's event leaked: %+v", ev)
			}
		}
	})
}
