package knowledge_test

import (
	"slices"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestListingByTagFindsOnlyThatTag: listing a space by a tag, written in
// any case, lists the entries that carry it and none that carry only
// other tags or none.
func TestListingByTagFindsOnlyThatTag(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k, _ := open(t, s)
		for slug, tags := range map[string][]string{"deploy": {"ops", "release"}, "oncall": {"ops"}, "style": {"docs"}, "bare": nil} {
			if _, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: slug, Content: content("t", "b", tags...)}); err != nil {
				t.Fatal(err)
			}
		}
		for tag, want := range map[string][]string{"ops": {"deploy", "oncall"}, "OPS": {"deploy", "oncall"}, "Release": {"deploy"}, "docs": {"style"}} {
			es, err := k.Entries(ctx, "acme", "default", knowledge.ListOptions{Tag: tag})
			var got []string
			for _, e := range es {
				got = append(got, e.Slug)
			}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("entries tagged %q: %v %v, want %v", tag, got, err, want)
			}
		}
	})
}

// TestASaveChecksAndNormalisesItsContent: a save's content is checked and
// its tags normalised as a creation's are.
func TestASaveChecksAndNormalisesItsContent(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k, _ := open(t, s)
		tags := []string{"Release", "ops", "OPS"}
		created, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "a", Content: content("t", "b", tags...)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "b", Content: content("t", "b")}); err != nil {
			t.Fatal(err)
		}
		saved, err := k.Save(ctx, ann, "acme", "default", "b", 1, content("t", "b", tags...))
		if err != nil || !slices.Equal(saved.Tags, created.Tags) || saved.Version != 2 {
			t.Errorf("saved tags %v (%v), want %v as a creation normalises them, at version 2", saved.Tags, err, created.Tags)
		}
		if _, err := k.Save(ctx, ann, "acme", "default", "b", 2, content("", "b")); apperr.Code(err) != apperr.Invalid {
			t.Errorf("a save without a title: %v, want invalid", err)
		}
	})
}

// TestAnEntryIsReadInItsOwnSpace: one slug in two spaces of one
// organization is two entries; each space reads, saves and lists its own.
func TestAnEntryIsReadInItsOwnSpace(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k, _ := open(t, s)
		if _, err := k.CreateSpace(ctx, ann, "acme", knowledge.SpaceInput{Slug: "team", Title: "Team"}); err != nil {
			t.Fatal(err)
		}
		for _, space := range []string{"default", "team"} {
			if _, err := k.CreateEntry(ctx, ann, "acme", space, knowledge.EntryInput{Slug: "guide", Content: content(space+" guide", "b")}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := k.Save(ctx, ann, "acme", "team", "guide", 1, content("team guide", "second")); err != nil {
			t.Fatal(err)
		}
		for space, version := range map[string]int64{"default": 1, "team": 2} {
			e, err := k.Entry(ctx, "acme", space, "guide")
			if err != nil || e.Title != space+" guide" || e.Space != space || e.Version != version {
				t.Errorf("the guide of space %s: %+v %v, want its own at version %d", space, e, err, version)
			}
		}
	})
}
