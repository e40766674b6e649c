package knowledge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

func TestUnified(t *testing.T) {
	lines := func(n int, f string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, f+"\n", i)
		}
		return b.String()
	}
	long := lines(20, "line %d")
	for _, c := range []struct{ name, a, b, want string }{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"from empty", "", "a\nb\n", "--- A\n+++ B\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\n", "", "--- A\n+++ B\n@@ -1 +0,0 @@\n-a\n"},
		{"middle", "a\nb\nc\n", "a\nx\nc\n", "--- A\n+++ B\n@@ -1,3 +1,3 @@\n a\n-b\n+x\n c\n"},
		{"two hunks", long, strings.Replace(strings.Replace(long, "line 2\n", "two\n", 1), "line 19\n", "nineteen\n", 1),
			"--- A\n+++ B\n@@ -1,5 +1,5 @@\n line 1\n-line 2\n+two\n line 3\n line 4\n line 5\n" +
				"@@ -16,5 +16,5 @@\n line 16\n line 17\n line 18\n-line 19\n+nineteen\n line 20\n"},
		{"close changes join", long, strings.Replace(strings.Replace(long, "line 5\n", "five\n", 1), "line 10\n", "ten\n", 1),
			"--- A\n+++ B\n@@ -2,12 +2,12 @@\n line 2\n line 3\n line 4\n-line 5\n+five\n line 6\n line 7\n line 8\n line 9\n-line 10\n+ten\n line 11\n line 12\n line 13\n"},
		{"insert keeps common lines", "a\nc\n", "a\nb\nc\n", "--- A\n+++ B\n@@ -1,2 +1,3 @@\n a\n+b\n c\n"},
	} {
		if got := Unified("A", "B", c.a, c.b); got != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, c.want)
		}
	}
}

// TestDiffOfHugeDifferentBodiesIsBounded: past maxDiffCells the middle is
// replaced whole, still a correct diff.
func TestDiffOfHugeDifferentBodiesIsBounded(t *testing.T) {
	var a, b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	ops := diffLines(splitLines("head\n"+a.String()), splitLines("head\n"+b.String()))
	if len(ops) != 6001 || ops[0].kind != ' ' || ops[1].kind != '-' || ops[3001].kind != '+' {
		t.Fatalf("%d ops", len(ops))
	}
}

func TestDecideSave(t *testing.T) {
	cur := Entry{Slug: "s", Title: "T", Body: "B", Tags: []string{"x"}, Version: 3}
	if _, _, err := decideSave(cur, 2, Content{Title: "T2"}, "ann", t0()); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("stale: %v", err)
	}
	if next, same, err := decideSave(cur, 3, Content{Title: "T", Body: "B", Tags: []string{"x"}}, "ann", t0()); err != nil || !same || next.Version != 3 {
		t.Errorf("unchanged: %+v %v %v", next, same, err)
	}
	if next, same, err := decideSave(cur, 3, Content{Title: "T", Body: "B2", Tags: []string{"x"}, Note: "n"}, "ann", t0()); err != nil || same ||
		next.Version != 4 || next.UpdatedBy != "ann" || next.Note != "n" {
		t.Errorf("changed: %+v %v %v", next, same, err)
	}
	del := cur
	del.Deleted = true
	if _, _, err := decideSave(del, 3, Content{Title: "T2"}, "ann", t0()); err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("deleted: %v", err)
	}
	if _, same := decideDeleted(del, true, "ann", t0()); !same {
		t.Error("deleting a deleted entry changes it")
	}
	if next, same := decideDeleted(cur, true, "bob", t0()); same || !next.Deleted || next.Version != 3 || next.UpdatedBy != "bob" {
		t.Errorf("delete: %+v", next)
	}
}

func TestFuse(t *testing.T) {
	a := []Hit{{Slug: "x"}, {Slug: "y"}}
	b := []Hit{{Slug: "y", Snippet: "theirs"}, {Slug: "z"}}
	got := fuse([][]Hit{a, b}, 10)
	if len(got) != 3 || got[0].Slug != "y" || got[0].Snippet != "" || got[1].Slug != "x" || got[2].Slug != "z" {
		t.Fatalf("%+v", got)
	}
	if got := fuse([][]Hit{a, b}, 1); len(got) != 1 {
		t.Fatalf("limit: %+v", got)
	}
}

func TestFTSQueryQuotesEveryWord(t *testing.T) {
	q, err := ftsQuery(`deploy "x" OR NEAR(a, b)* col:`)
	if err != nil || q != `"deploy" "x" "OR" "NEAR" "a" "b" "col"` {
		t.Fatalf("%q %v", q, err)
	}
	if got := highlight("a \x02<b>\x03 & c"); got != "a <mark>&lt;b&gt;</mark> &amp; c" {
		t.Fatalf("highlight: %q", got)
	}
}

// TestSearchMatchesWithinItsScope: the index's scope tokens confine a
// match to an organization (or a space) before any join, and a user's
// word never matches a scope token.
func TestSearchMatchesWithinItsScope(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", Migrations)
	k := New(s, nil)
	ctx := t.Context()
	actor := event.Actor{Kind: event.ActorHuman, Sub: "ann"}
	for _, org := range []string{"acme", "acme-corp", "other"} {
		for i := range 3 {
			if _, err := k.CreateEntry(ctx, actor, org, "default", EntryInput{Slug: fmt.Sprintf("e%d", i),
				Content: Content{Title: "Zeppelin", Body: "zeppelin"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(match string) int64 {
		rows, err := s.Query(ctx, `SELECT count(*) FROM entry_search WHERE entry_search MATCH ?`, match)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		rows.Scan(0, &n)
		return n
	}
	if n := count(scoped(orgToken("acme"), `"zeppelin"`)); n != 3 {
		t.Errorf("acme's matches: %d, want 3", n)
	}
	if n := count(scoped(spaceToken("acme", "default"), `"zeppelin"`)); n != 3 {
		t.Errorf("acme's default space's matches: %d, want 3", n)
	}
	if n := count(scoped(spaceToken("acme", "ops"), `"zeppelin"`)); n != 0 {
		t.Errorf("acme's ops space's matches: %d, want 0", n)
	}
	if n := count(`"zeppelin"`); n != 9 {
		t.Errorf("unscoped: %d, want 9", n)
	}
	if n := count(scoped(orgToken("acme"), `"`+orgToken("acme")+`"`)); n != 0 {
		t.Errorf("a word that is a scope token matched %d entries", n)
	}
}

// TestSearchChecksTheEntrysOwnOrgAndSpace: the scope token is not the only
// guard. An index row that names the wrong scope (a stale or damaged
// index) still shows nothing of another organization or space, because the
// search checks the entry's own org and space columns too.
func TestSearchChecksTheEntrysOwnOrgAndSpace(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", Migrations)
	k := New(s, nil)
	ctx := t.Context()
	actor := event.Actor{Kind: event.ActorHuman, Sub: "ann"}
	if _, err := k.CreateSpace(ctx, actor, "acme", SpaceInput{Slug: "ops", Title: "Ops"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ org, space string }{{"acme", "default"}, {"acme", "ops"}, {"other", "default"}} {
		if _, err := k.CreateEntry(ctx, actor, c.org, c.space, EntryInput{Slug: "e-" + c.space,
			Content: Content{Title: "Zeppelin", Body: "zeppelin"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Damage the index: other's entry and acme's ops entry claim acme's
	// default space.
	if _, err := s.Exec(ctx, store.Stmt(`UPDATE entry_search SET scope = ? WHERE rowid IN
  (SELECT rowid FROM entries WHERE org = 'other' OR space = 'ops')`, orgToken("acme")+" "+spaceToken("acme", "default"))); err != nil {
		t.Fatal(err)
	}
	hits, err := k.Search(ctx, "acme", Query{Text: "zeppelin"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 {
		t.Errorf("acme's search: %+v, want its own 2 entries, not other's", hits)
	}
	hits, err = k.Search(ctx, "acme", Query{Text: "zeppelin", Space: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Space != "default" {
		t.Errorf("acme's default space's search: %+v, want its one entry", hits)
	}
}
