package apitest_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestBoundedListsWithMoreRowsThanTheLimit: every bounded list of Core
// with more rows than its limit, another project's rows interleaved. A
// list with a cursor (items by number, events by seq) walks every row of
// its scope once, in its order, page by page; a list without one keeps
// the right end: the newest flows and tokens, the oldest waiting
// questions (and says it is truncated).
func TestBoundedListsWithMoreRowsThanTheLimit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		e.Project("acme", "OPS")
		var keys []string
		for i := range 11 {
			it := createItem(e, "ACME", map[string]any{"type": "task", "title": fmt.Sprintf("t%d", i), "state": "ready"})
			createItem(e, "OPS", map[string]any{"type": "task", "title": fmt.Sprintf("o%d", i), "state": "ready"})
			keys = append(keys, it.Key)
		}

		t.Run("items by number", func(t *testing.T) {
			var got []string
			after := int64(0)
			for page := 0; ; page++ {
				var body struct {
					Items     []struct{ Key string }
					NextAfter *int64 `json:"next_after"`
				}
				e.Admin(200, "GET", fmt.Sprintf("/api/v1/projects/ACME/items?limit=3&after=%d", after), nil).JSON(t, &body)
				if len(body.Items) > 3 || page > 10 {
					t.Fatalf("page %d has %d items", page, len(body.Items))
				}
				for _, it := range body.Items {
					got = append(got, it.Key)
				}
				if body.NextAfter == nil {
					break
				}
				after = *body.NextAfter
			}
			if !slices.Equal(got, keys) {
				t.Errorf("pages of 3: %v, want %v", got, keys)
			}
		})

		// A few changes of ACME-1, so that its own history is longer than
		// a page too.
		for i := range 4 {
			var it struct{ Version int64 }
			e.Admin(200, "GET", "/api/v1/items/"+keys[0], nil).JSON(t, &it)
			e.Admin(200, "PATCH", "/api/v1/items/"+keys[0], map[string]any{"version": it.Version, "title": fmt.Sprintf("t0 v%d", i)})
		}
		type page struct {
			Events []struct {
				Seq       int64
				ProjectID string `json:"project_id"`
				EntityID  string `json:"entity_id"`
			}
			LastSeq int64 `json:"last_seq"`
		}
		for _, path := range []string{"/api/v1/projects/ACME/events", "/api/v1/items/" + keys[0] + "/events"} {
			t.Run(path, func(t *testing.T) {
				var all page
				e.Admin(200, "GET", path+"?limit=1000", nil).JSON(t, &all)
				if len(all.Events) < 5 {
					t.Fatalf("only %d events", len(all.Events))
				}
				var want, got []int64
				for _, ev := range all.Events {
					want = append(want, ev.Seq)
				}
				after := int64(0)
				for n := 0; ; n++ {
					var p page
					e.Admin(200, "GET", fmt.Sprintf("%s?limit=4&after=%d", path, after), nil).JSON(t, &p)
					if len(p.Events) > 4 || n > 100 {
						t.Fatalf("page %d: %d events", n, len(p.Events))
					}
					if len(p.Events) == 0 {
						if p.LastSeq != after {
							t.Errorf("the empty last page says last_seq %d, want %d", p.LastSeq, after)
						}
						break
					}
					for _, ev := range p.Events {
						got = append(got, ev.Seq)
					}
					after = p.LastSeq
				}
				if !slices.Equal(got, want) || !slices.IsSorted(got) {
					t.Errorf("pages of 4: %v, want %v", got, want)
				}
			})
		}

		t.Run("flows newest first", func(t *testing.T) {
			for _, k := range keys[:5] {
				e.Admin(200, "POST", "/api/v1/items/"+k+"/flow/start", nil)
			}
			e.Admin(200, "POST", "/api/v1/items/OPS-1/flow/start", nil)
			newest := []string{keys[4], keys[3], keys[2], keys[1], keys[0]}
			for _, limit := range []int{2, 5, 100} {
				var l struct{ Flows []struct{ Ticket string } }
				e.Admin(200, "GET", fmt.Sprintf("/api/v1/projects/ACME/flows?limit=%d", limit), nil).JSON(t, &l)
				var got []string
				for _, f := range l.Flows {
					got = append(got, f.Ticket)
				}
				if want := newest[:min(limit, 5)]; !slices.Equal(got, want) {
					t.Errorf("limit %d: %v, want the newest %v", limit, got, want)
				}
			}
		})

		t.Run("tokens newest first", func(t *testing.T) {
			var made []string
			for i := range 4 {
				var tok struct{ ID string }
				e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": fmt.Sprintf("bot %d", i), "organization": "acme"}).JSON(t, &tok)
				made = append([]string{tok.ID}, made...)
			}
			var l struct{ Tokens []struct{ ID string } }
			e.Admin(200, "GET", "/api/v1/tokens?limit=3&kind=api", nil).JSON(t, &l)
			var got []string
			for _, tk := range l.Tokens {
				got = append(got, tk.ID)
			}
			if !slices.Equal(got, made[:3]) {
				t.Errorf("limit 3: %v, want the newest %v", got, made[:3])
			}
		})

		t.Run("needs-me oldest first", func(t *testing.T) {
			var asked []string
			// In key order: questions asked within one millisecond are of
			// the same age, and those come by ticket number.
			for _, k := range keys[7:] {
				e.Admin(201, "POST", "/api/v1/items/"+k+"/questions", map[string]any{"text": "?", "blocking": true})
				asked = append(asked, k)
			}
			var l struct {
				Items     []struct{ Kind, Item string }
				Truncated bool
			}
			e.Admin(200, "GET", "/api/v1/needs-me?limit=2", nil).JSON(t, &l)
			var got []string
			for _, it := range l.Items {
				got = append(got, it.Item)
			}
			if !slices.Equal(got, asked[:2]) || !l.Truncated {
				t.Errorf("limit 2: %v (truncated %v), want the oldest %v, truncated", got, l.Truncated, asked[:2])
			}
		})
	})
}
