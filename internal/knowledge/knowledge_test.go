package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

var (
	ann = event.Actor{Kind: event.ActorHuman, Sub: "ann"}
	bob = event.Actor{Kind: event.ActorHuman, Sub: "bob"}
	t0  = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

func open(t *testing.T, s store.Store) (*knowledge.Service, *clock.Fake) {
	fc := clock.NewFake(t0)
	return knowledge.New(s, fc), fc
}

func code(err error) string { return apperr.Code(err) }

func content(title, body string, tags ...string) knowledge.Content {
	return knowledge.Content{Title: title, Body: body, Tags: tags}
}

// TestEntryLifecycle follows an entry through every change on both engines:
// versions, a stale save, old versions, diff, restore, delete, undelete, and
// its history in the event log.
func TestEntryLifecycle(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k, fc := open(t, s)
		e, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "guides/deploy",
			Content: content("Deploying", "Run make deploy.\nThen wait.\n", "Ops", "ops", "release")})
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != 1 || strings.Join(e.Tags, ",") != "ops,release" || e.UpdatedBy != "ann" {
			t.Fatalf("created %+v", e)
		}
		fc.Advance(time.Minute)
		e2, err := k.Save(ctx, bob, "acme", "default", "guides/deploy", 1, knowledge.Content{Title: "Deploying",
			Body: "Run make deploy.\nThen check the dashboard.\n", Tags: []string{"ops"}, Note: "dashboard"})
		if err != nil || e2.Version != 2 || e2.UpdatedBy != "bob" || e2.Note != "dashboard" {
			t.Fatalf("save: %+v %v", e2, err)
		}
		if _, err := k.Save(ctx, ann, "acme", "default", "guides/deploy", 1, content("Deploying", "other")); code(err) != apperr.Conflict {
			t.Fatalf("a save based on version 1 after version 2: %v, want a conflict", err)
		}
		same, err := k.Save(ctx, ann, "acme", "default", "guides/deploy", 2, knowledge.Content{Title: e2.Title, Body: e2.Body, Tags: e2.Tags})
		if err != nil || same.Version != 2 {
			t.Fatalf("a save that changes nothing: %+v %v, want version 2 unchanged", same, err)
		}
		old, err := k.EntryAt(ctx, "acme", "default", "guides/deploy", 1)
		if err != nil || old.Body != "Run make deploy.\nThen wait.\n" || old.Version != 1 || old.UpdatedBy != "ann" {
			t.Fatalf("version 1: %+v %v", old, err)
		}
		if _, err := k.EntryAt(ctx, "acme", "default", "guides/deploy", 9); code(err) != apperr.NotFound {
			t.Fatalf("version 9: %v", err)
		}
		vs, err := k.Versions(ctx, "acme", "default", "guides/deploy")
		if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || vs[0].Author != "bob" || vs[0].Note != "dashboard" {
			t.Fatalf("versions: %+v %v", vs, err)
		}
		d, err := k.Diff(ctx, "acme", "default", "guides/deploy", 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := "--- guides/deploy@1\n+++ guides/deploy@2\n@@ -1,5 +1,5 @@\n # Deploying\n-tags: ops, release\n+tags: ops\n \n Run make deploy.\n-Then wait.\n+Then check the dashboard.\n"
		if d != want {
			t.Fatalf("diff:\n%s\nwant:\n%s", d, want)
		}
		r, err := k.Restore(ctx, ann, "acme", "default", "guides/deploy", 1, 2)
		if err != nil || r.Version != 3 || r.Body != old.Body || r.Note != "restored from version 1" {
			t.Fatalf("restore: %+v %v", r, err)
		}
		if _, err := k.Restore(ctx, ann, "acme", "default", "guides/deploy", 1, 2); code(err) != apperr.Conflict {
			t.Fatalf("a restore based on a stale version: %v", err)
		}
		del, err := k.SetDeleted(ctx, bob, "acme", "default", "guides/deploy", true)
		if err != nil || !del.Deleted || del.Version != 3 {
			t.Fatalf("delete: %+v %v", del, err)
		}
		if _, err := k.Save(ctx, ann, "acme", "default", "guides/deploy", 3, content("x", "y")); code(err) != apperr.Conflict {
			t.Fatalf("a save of a deleted entry: %v", err)
		}
		if es, _ := k.Entries(ctx, "acme", "default", knowledge.ListOptions{}); len(es) != 0 {
			t.Fatalf("listing holds a deleted entry: %+v", es)
		}
		if es, _ := k.Entries(ctx, "acme", "default", knowledge.ListOptions{IncludeDeleted: true}); len(es) != 1 {
			t.Fatalf("listing with deleted: %+v", es)
		}
		if again, err := k.SetDeleted(ctx, bob, "acme", "default", "guides/deploy", true); err != nil || !again.Deleted {
			t.Fatalf("a second delete is a no-op: %+v %v", again, err)
		}
		if un, err := k.SetDeleted(ctx, ann, "acme", "default", "guides/deploy", false); err != nil || un.Deleted {
			t.Fatalf("undelete: %+v %v", un, err)
		}
		hist, err := k.History(ctx, "acme", "default", "guides/deploy")
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range hist {
			types = append(types, ev.Type+"/"+ev.ActorSub)
			if ev.OrganizationID != "acme" {
				t.Errorf("event %s in organization %q", ev.Type, ev.OrganizationID)
			}
		}
		if got := strings.Join(types, " "); got != "entry.created/ann entry.updated/bob entry.restored/ann entry.deleted/bob entry.undeleted/ann" {
			t.Fatalf("history: %s", got)
		}
		// One org never sees another's entries.
		if _, err := k.Entry(ctx, "other", "default", "guides/deploy"); code(err) != apperr.NotFound {
			t.Fatalf("another organization reads it: %v", err)
		}
		if _, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "guides/deploy", Content: content("t", "b")}); code(err) != apperr.Conflict {
			t.Fatalf("a second entry with the slug: %v", err)
		}
		if _, err := k.CreateEntry(ctx, ann, "acme", "nope", knowledge.EntryInput{Slug: "a", Content: content("t", "b")}); code(err) != apperr.NotFound {
			t.Fatalf("an entry in a missing space: %v", err)
		}
	})
}

// TestConcurrentSavesExactlyOneWins: saves based on one version race;
// exactly one commits, every other gets a conflict, and the entry has one
// version more.
func TestConcurrentSavesExactlyOneWins(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k := knowledge.New(s, nil)
		if _, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "race", Content: content("Race", "v1")}); err != nil {
			t.Fatal(err)
		}
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = k.Save(ctx, ann, "acme", "default", "race", 1, content("Race", fmt.Sprintf("writer %d", i)))
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case code(err) != apperr.Conflict:
				t.Errorf("a loser got %v, want a conflict", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d saves won, want exactly 1 (%v)", won, errs)
		}
		vs, err := k.Versions(ctx, "acme", "default", "race")
		if err != nil || len(vs) != 2 {
			t.Fatalf("versions after the race: %d %v", len(vs), err)
		}
		hits, err := k.Search(ctx, "acme", knowledge.Query{Text: "writer"})
		if err != nil || len(hits) != 1 || hits[0].Version != 2 {
			t.Fatalf("the index holds the winner only: %+v %v", hits, err)
		}
	})
}

// TestDefaultSpaceIsWrittenOnceUnderConcurrentFirstEntries: the first
// entries of an organization race to write its default space; every entry
// lands and the space is created exactly once.
func TestDefaultSpaceIsWrittenOnceUnderConcurrentFirstEntries(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k := knowledge.New(s, nil)
		// First accesses at once: the default space is written once.
		const n = 6
		var reads sync.WaitGroup
		for range n {
			reads.Add(1)
			go func() {
				defer reads.Done()
				if sp, err := k.Spaces(ctx, "fresh2"); err != nil || len(sp) != 1 || sp[0].Slug != "default" || sp[0].CreatedAt.IsZero() {
					t.Errorf("a new organization's spaces: %+v %v", sp, err)
				}
			}()
		}
		reads.Wait()
		if evs, err := event.List(ctx, s, event.Filter{EntityType: "space", OrganizationID: "fresh2", Limit: 100}); err != nil || len(evs) != 1 || evs[0].ActorKind != event.ActorSystem {
			t.Fatalf("space events after concurrent first reads: %+v %v", evs, err)
		}
		// First entries at once, before any read: likewise.
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = k.CreateEntry(ctx, ann, "fresh", "default", knowledge.EntryInput{Slug: fmt.Sprintf("e%d", i), Content: content("T", "b")})
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		evs, err := event.List(ctx, s, event.Filter{EntityType: "space", OrganizationID: "fresh", Limit: 100})
		if err != nil || len(evs) != 1 {
			t.Fatalf("space events: %d %v", len(evs), err)
		}
		if _, err := k.CreateSpace(ctx, ann, "fresh", knowledge.SpaceInput{Slug: "default"}); code(err) != apperr.Conflict {
			t.Fatalf("creating default: %v", err)
		}
		if _, err := k.CreateSpace(ctx, ann, "fresh", knowledge.SpaceInput{Slug: "backend", Title: "Backend"}); err != nil {
			t.Fatal(err)
		}
		if _, err := k.CreateSpace(ctx, ann, "fresh", knowledge.SpaceInput{Slug: "backend"}); code(err) != apperr.Conflict {
			t.Fatalf("a second backend: %v", err)
		}
		sp, _ := k.Spaces(ctx, "fresh")
		if len(sp) != 2 || sp[0].Slug != "backend" || sp[1].Slug != "default" {
			t.Fatalf("spaces: %+v", sp)
		}
		if sp, _ := k.Spaces(ctx, "acme"); len(sp) != 1 {
			t.Fatalf("another organization sees fresh's spaces: %+v", sp)
		}
	})
}

// TestBadInputNamesTheField: every invalid input is a 400-class error
// naming its field.
func TestBadInputNamesTheField(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", knowledge.Migrations)
	k := knowledge.New(s, nil)
	ctx := context.Background()
	for _, c := range []struct {
		in    knowledge.EntryInput
		field string
	}{
		{knowledge.EntryInput{Slug: "Bad Slug", Content: content("t", "b")}, "slug"},
		{knowledge.EntryInput{Slug: "a//b", Content: content("t", "b")}, "slug"},
		{knowledge.EntryInput{Slug: "/a", Content: content("t", "b")}, "slug"},
		{knowledge.EntryInput{Slug: strings.Repeat("a", 201), Content: content("t", "b")}, "slug"},
		{knowledge.EntryInput{Slug: "a", Content: content("", "b")}, "title"},
		{knowledge.EntryInput{Slug: "a", Content: content("t\nx", "b")}, "title"},
		{knowledge.EntryInput{Slug: "a", Content: content("t", "b\x02")}, "body"},
		{knowledge.EntryInput{Slug: "a", Content: content("t", "b\r\n")}, "body"},
		{knowledge.EntryInput{Slug: "a", Content: content("t", strings.Repeat("x", knowledge.MaxBody+1))}, "body"},
		{knowledge.EntryInput{Slug: "a", Content: content("t", "b", "no spaces")}, "tags[0]"},
		{knowledge.EntryInput{Slug: "a", Content: knowledge.Content{Title: "t", Note: "a\x1b[2J"}}, "note"},
	} {
		_, err := k.CreateEntry(ctx, ann, "acme", "default", c.in)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.Invalid || !strings.HasPrefix(ae.Message, c.field+":") {
			t.Errorf("%+.60v: %v, want invalid %s", c.in, err, c.field)
		}
	}
	if _, err := k.CreateSpace(ctx, ann, "acme", knowledge.SpaceInput{Slug: "-x"}); code(err) != apperr.Invalid {
		t.Errorf("space slug -x: %v", err)
	}
	if _, err := k.Search(ctx, "acme", knowledge.Query{Text: "  ?! "}); code(err) != apperr.Invalid {
		t.Errorf("a search without words: %v", err)
	}
}

// TestSpaceInputIsChecked: a space's title is one line of at most
// MaxTitle characters, its description at most MaxSpaceDoc bytes (exactly
// that many is fine); each error names its field.
func TestSpaceInputIsChecked(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		k, _ := open(t, s)
		ctx := t.Context()
		for _, c := range []struct {
			in    knowledge.SpaceInput
			field string
		}{
			{knowledge.SpaceInput{Slug: "a1", Title: strings.Repeat("t", knowledge.MaxTitle+1)}, "title"},
			{knowledge.SpaceInput{Slug: "a2", Title: "two\nlines"}, "title"},
			{knowledge.SpaceInput{Slug: "a3", Description: strings.Repeat("d", knowledge.MaxSpaceDoc+1)}, "description"},
			{knowledge.SpaceInput{Slug: "a4", Title: strings.Repeat("t", knowledge.MaxTitle), Description: strings.Repeat("d", knowledge.MaxSpaceDoc)}, ""},
		} {
			_, err := k.CreateSpace(ctx, ann, "acme", c.in)
			if c.field == "" {
				if err != nil {
					t.Errorf("%s: %v", c.in.Slug, err)
				}
			} else if code(err) != apperr.Invalid || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%s: %v, want a 400 naming %s", c.in.Slug, err, c.field)
			}
		}
	})
}

// TestTagAndResultBounds: an entry holds at most MaxTags tags and a search
// answers at most MaxResults hits; exactly the bound is fine, one more is
// a 400 naming the field.
func TestTagAndResultBounds(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", knowledge.Migrations)
	k := knowledge.New(s, nil)
	ctx := context.Background()
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t%d", i)
		}
		return out
	}
	e, err := k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "many", Content: content("Many", "tags", tags(knowledge.MaxTags)...)})
	if err != nil || len(e.Tags) != knowledge.MaxTags {
		t.Errorf("%d tags: %v, %v", knowledge.MaxTags, e.Tags, err)
	}
	_, err = k.CreateEntry(ctx, ann, "acme", "default", knowledge.EntryInput{Slug: "too-many", Content: content("Too many", "tags", tags(knowledge.MaxTags+1)...)})
	if code(err) != apperr.Invalid || !strings.HasPrefix(err.Error(), "tags:") || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d tags: %v, want a 400 naming tags", knowledge.MaxTags+1, err)
	}
	if _, err := k.Search(ctx, "acme", knowledge.Query{Text: "tags", Limit: knowledge.MaxResults}); err != nil {
		t.Errorf("a search for %d hits: %v", knowledge.MaxResults, err)
	}
	_, err = k.Search(ctx, "acme", knowledge.Query{Text: "tags", Limit: knowledge.MaxResults + 1})
	if code(err) != apperr.Invalid || !strings.HasPrefix(err.Error(), "limit:") {
		t.Errorf("a search for %d hits: %v, want a 400 naming limit", knowledge.MaxResults+1, err)
	}
}

// TestASpaceAnswersWhatALaterReadFinds: creating a space, and the first
// access that writes the default one, answer the creation time as
// stored (to the millisecond), on a clock that has finer time.
func TestASpaceAnswersWhatALaterReadFinds(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		fc := clock.NewFake(t0.Add(123_456_789 * time.Nanosecond))
		k := knowledge.New(s, fc)
		created, err := k.CreateSpace(ctx, ann, "acme", knowledge.SpaceInput{Slug: "ops", Title: "Ops"})
		if err != nil {
			t.Fatal(err)
		}
		first, err := k.Space(ctx, "acme", knowledge.DefaultSpace)
		if err != nil {
			t.Fatal(err)
		}
		fc.Advance(time.Hour)
		for _, want := range []knowledge.Space{created, first} {
			got, err := k.Space(ctx, "acme", want.Slug)
			if err != nil || !got.CreatedAt.Equal(want.CreatedAt) || !got.CreatedAt.Equal(t0.Add(123*time.Millisecond)) {
				t.Errorf("space %s read back %+v, %v; answered %+v", want.Slug, got, err, want)
			}
		}
	})
}
