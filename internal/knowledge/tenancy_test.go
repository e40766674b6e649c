package knowledge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestOrganizationsSeeOnlyTheirOwn: two organizations with the same space
// and entry slugs, on both engines. Every read of one (spaces, a space, an
// entry and an old version of it, a space's entries with and without the
// deleted, versions, history, diff, search in every space and in one)
// shows its own rows and none of the other's; the other's own slug is not
// found, to read or to change.
func TestOrganizationsSeeOnlyTheirOwn(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k, _ := open(t, s)
		orgs := []string{"acme", "globex"}
		for _, org := range orgs {
			if _, err := k.CreateSpace(ctx, ann, org, knowledge.SpaceInput{Slug: "shared", Title: "Shared of " + org}); err != nil {
				t.Fatal(err)
			}
			for _, e := range []struct{ space, slug string }{{"default", "guides/deploy"}, {"default", org + "-only"}, {"shared", "guides/deploy"}} {
				if _, err := k.CreateEntry(ctx, ann, org, e.space, knowledge.EntryInput{Slug: e.slug,
					Content: content("Deploying at "+org, "How "+org+" deploys.", "ops")}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := k.Save(ctx, bob, org, "default", "guides/deploy", 1, content("Deploying at "+org, "How "+org+" deploys, then tells.", "ops")); err != nil {
				t.Fatal(err)
			}
			if _, err := k.SetDeleted(ctx, bob, org, "default", org+"-only", true); err != nil {
				t.Fatal(err)
			}
		}
		for i, org := range orgs {
			other := orgs[1-i]
			reads := map[string]func() (any, error){
				"Spaces":  func() (any, error) { return k.Spaces(ctx, org) },
				"Space":   func() (any, error) { return k.Space(ctx, org, "shared") },
				"Entry":   func() (any, error) { return k.Entry(ctx, org, "shared", "guides/deploy") },
				"EntryAt": func() (any, error) { return k.EntryAt(ctx, org, "default", "guides/deploy", 1) },
				"Entries": func() (any, error) {
					es, err := k.Entries(ctx, org, "default", knowledge.ListOptions{IncludeDeleted: true})
					if err == nil && len(es) != 2 {
						err = fmt.Errorf("%d entries, want its own 2", len(es))
					}
					return es, err
				},
				"Entries by tag": func() (any, error) {
					es, err := k.Entries(ctx, org, "default", knowledge.ListOptions{Tag: "ops"})
					if err == nil && len(es) != 1 {
						err = fmt.Errorf("%d entries, want its own 1", len(es))
					}
					return es, err
				},
				"Versions": func() (any, error) {
					vs, err := k.Versions(ctx, org, "default", "guides/deploy")
					if err == nil && len(vs) != 2 {
						err = fmt.Errorf("%d versions, want 2", len(vs))
					}
					return vs, err
				},
				"History": func() (any, error) { return k.History(ctx, org, "default", "guides/deploy") },
				"Diff":    func() (any, error) { return k.Diff(ctx, org, "default", "guides/deploy", 1, 2) },
				"Search": func() (any, error) {
					hs, err := k.Search(ctx, org, knowledge.Query{Text: "deploys", IncludeDeleted: true})
					if err == nil && len(hs) != 3 {
						err = fmt.Errorf("%d hits, want its own 3", len(hs))
					}
					return hs, err
				},
				"Search a space": func() (any, error) {
					hs, err := k.Search(ctx, org, knowledge.Query{Text: "deploys", Space: "shared"})
					if err == nil && len(hs) != 1 {
						err = fmt.Errorf("%d hits, want its own 1", len(hs))
					}
					return hs, err
				},
			}
			for name, read := range reads {
				v, err := read()
				got := fmt.Sprintf("%+v", v)
				switch {
				case err != nil:
					t.Errorf("%s of %s: %v", name, org, err)
				case strings.Contains(got, other):
					t.Errorf("%s of %s shows %s's: %s", name, org, other, got)
				case !strings.Contains(got, org):
					t.Errorf("%s of %s shows none of its own: %s", name, org, got)
				}
			}
			if hist, err := k.History(ctx, org, "default", "guides/deploy"); err != nil || len(hist) != 2 {
				t.Errorf("history of %s's entry: %d events (%v), want its own 2", org, len(hist), err)
			}
			if _, err := k.Entry(ctx, org, "default", other+"-only"); code(err) != apperr.NotFound {
				t.Errorf("%s reads %s's entry: %v, want not found", org, other, err)
			}
			if _, err := k.SetDeleted(ctx, ann, org, "default", other+"-only", false); code(err) != apperr.NotFound {
				t.Errorf("%s undeletes %s's entry: %v, want not found", org, other, err)
			}
		}
	})
}

// TestEntriesPageBySlug: a space's entries come by slug; pages of Limit
// after the last slug of the page before walk every entry once, and the
// deleted ones only when asked for.
func TestEntriesPageBySlug(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k, _ := open(t, s)
		var want []string
		for _, i := range []int{7, 3, 12, 0, 9, 1, 11, 5, 2, 10, 4, 8, 6} {
			slug := fmt.Sprintf("e%02d", i)
			if _, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: slug, Content: content("t", "b")}); err != nil {
				t.Fatal(err)
			}
			want = append(want, slug)
		}
		if _, err := k.SetDeleted(ctx, ann, "acme", "default", "e05", true); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		walk := func(deleted bool) []string {
			var got []string
			after := ""
			for range 20 {
				page, err := k.Entries(ctx, "acme", "default", knowledge.ListOptions{Limit: 4, After: after, IncludeDeleted: deleted})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > 4 {
					t.Fatalf("a page of %d, limit 4", len(page))
				}
				for _, e := range page {
					got = append(got, e.Slug)
				}
				if len(page) < 4 {
					return got
				}
				after = page[len(page)-1].Slug
			}
			t.Fatal("the pages never end")
			return nil
		}
		if got := walk(true); !slices.Equal(got, want) {
			t.Errorf("every entry by pages of 4: %v, want %v", got, want)
		}
		live := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "e05" })
		if got := walk(false); !slices.Equal(got, live) {
			t.Errorf("the live entries by pages of 4: %v, want %v", got, live)
		}
		def, err := k.Entries(ctx, "acme", "default", knowledge.ListOptions{IncludeDeleted: true})
		if err != nil || len(def) != len(want) {
			t.Errorf("the default limit lists %d (%v), want all %d", len(def), err, len(want))
		}
	})
}
