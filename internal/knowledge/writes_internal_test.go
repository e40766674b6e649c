package knowledge

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestASaveWritesOnlyItsEntryAndOnlyOverWhatItRead: a save's write
// changes its own entry and no other (of its organization or another's
// at the same version), and a save decided on a read that has since
// moved on — another save, or a deletion — loses instead of writing.
func TestASaveWritesOnlyItsEntryAndOnlyOverWhatItRead(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", Migrations)
	k := New(s, clock.NewFake(t0()))
	ctx := t.Context()
	ann := event.Actor{Kind: event.ActorHuman, Sub: "ann"}
	for _, e := range []struct{ org, slug string }{{"acme", "a"}, {"acme", "b"}, {"acme", "c"}, {"globex", "a"}} {
		if _, err := k.CreateEntry(ctx, ann, e.org, "default", EntryInput{Slug: e.slug, Content: Content{Title: e.org + " " + e.slug, Body: "first"}}); err != nil {
			t.Fatal(err)
		}
	}
	stale := func(slug string) (Entry, func() error) {
		cur, err := k.Entry(ctx, "acme", "default", slug)
		if err != nil {
			t.Fatal(err)
		}
		next, _, err := decideSave(cur, cur.Version, Content{Title: "stale", Body: "stale"}, "ann", t0())
		if err != nil {
			t.Fatal(err)
		}
		return cur, func() error {
			return k.Applier.Apply(ctx, saveTransition(ann, "acme", cur, next, entryEvent(ann, "acme", next, updated, 0)))
		}
	}
	_, applyA := stale("a")
	if _, err := k.Save(ctx, ann, "acme", "default", "a", 1, Content{Title: "acme a", Body: "second"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ org, slug string }{{"acme", "b"}, {"acme", "c"}, {"globex", "a"}} {
		got, err := k.Entry(ctx, e.org, "default", e.slug)
		if err != nil || got.Version != 1 || got.Title != e.org+" "+e.slug || got.Body != "first" {
			t.Errorf("%s's %s after a save of acme's a: %+v %v, want it unchanged at version 1", e.org, e.slug, got, err)
		}
	}
	if err := applyA(); err == nil {
		t.Error("a save decided on version 1 was written over version 2")
	}
	_, applyC := stale("c")
	if _, err := k.SetDeleted(ctx, ann, "acme", "default", "c", true); err != nil {
		t.Fatal(err)
	}
	if err := applyC(); err == nil {
		t.Error("a save decided before a deletion was written over the deleted entry")
	}
	for slug, body := range map[string]string{"a": "second", "c": "first"} {
		if got, err := k.Entry(ctx, "acme", "default", slug); err != nil || got.Body != body {
			t.Errorf("acme's %s: %+v %v, want body %q", slug, got, err, body)
		}
	}
}

// TestWritesAnswerWhatALaterReadFinds: on a clock with nanoseconds, what
// a create, a save, a restore and a deletion answer equals what reading
// the entry then finds (times at the stored milliseconds), and a version's
// time is when it was written.
func TestWritesAnswerWhatALaterReadFinds(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", Migrations)
	fc := clock.NewFake(t0().Add(123456789 * time.Nanosecond))
	k := New(s, fc)
	ctx := t.Context()
	ann := event.Actor{Kind: event.ActorHuman, Sub: "ann"}
	check := func(what string, got Entry, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		read, err := k.Entry(ctx, "acme", "default", "a")
		if err != nil || !got.CreatedAt.Equal(read.CreatedAt) || !got.UpdatedAt.Equal(read.UpdatedAt) {
			t.Errorf("%s answered %v/%v; a read finds %v/%v (%v)", what, got.CreatedAt, got.UpdatedAt, read.CreatedAt, read.UpdatedAt, err)
		}
	}
	e, err := k.CreateEntry(ctx, ann, "acme", "default", EntryInput{Slug: "a", Content: Content{Title: "A", Body: "one"}})
	check("create", e, err)
	fc.Advance(time.Minute + time.Nanosecond)
	e, err = k.Save(ctx, ann, "acme", "default", "a", 1, Content{Title: "A", Body: "two"})
	check("save", e, err)
	fc.Advance(time.Minute + time.Nanosecond)
	e, err = k.Restore(ctx, ann, "acme", "default", "a", 1, 2)
	check("restore", e, err)
	fc.Advance(time.Minute + time.Nanosecond)
	e, err = k.SetDeleted(ctx, ann, "acme", "default", "a", true)
	check("delete", e, err)
	vs, err := k.Versions(ctx, "acme", "default", "a")
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	for i, v := range vs {
		want := t0().Add(time.Duration(2-i) * time.Minute).Truncate(time.Millisecond).Add(123 * time.Millisecond)
		if !v.At.Equal(want) {
			t.Errorf("version %d written at %v, want %v", v.Version, v.At, want)
		}
	}
}

// TestADeletionDecidedOnAStaleReadLoses: a deletion decided on a read
// that has since moved on — a save (its event would name the older
// title), or the same deletion by someone else (two entry.deleted
// events) — loses instead of writing.
func TestADeletionDecidedOnAStaleReadLoses(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", Migrations)
	k := New(s, clock.NewFake(t0()))
	ctx := t.Context()
	ann := event.Actor{Kind: event.ActorHuman, Sub: "ann"}
	for _, slug := range []string{"saved", "deleted"} {
		if _, err := k.CreateEntry(ctx, ann, "acme", "default", EntryInput{Slug: slug, Content: Content{Title: slug, Body: "first"}}); err != nil {
			t.Fatal(err)
		}
	}
	stale := func(slug string) func() error {
		cur, err := k.Entry(ctx, "acme", "default", slug)
		if err != nil {
			t.Fatal(err)
		}
		next, _ := decideDeleted(cur, true, "ann", t0())
		return func() error { return k.Applier.Apply(ctx, deletedTransition(ann, "acme", cur, next, deletion)) }
	}
	applySaved, applyDeleted := stale("saved"), stale("deleted")
	if _, err := k.Save(ctx, ann, "acme", "default", "saved", 1, Content{Title: "saved", Body: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := applySaved(); err == nil {
		t.Error("a deletion decided on version 1 was written over version 2")
	}
	if _, err := k.SetDeleted(ctx, ann, "acme", "default", "deleted", true); err != nil {
		t.Fatal(err)
	}
	if err := applyDeleted(); err == nil {
		t.Error("a deletion decided before another deletion was written again")
	}
	if got, err := k.Entry(ctx, "acme", "default", "saved"); err != nil || got.Deleted {
		t.Errorf("the saved entry: %+v %v, want it not deleted", got, err)
	}
}
