package gitea

import (
	"context"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/clock"
)

// mergeableOf reads pull request 7's state and says what it tells of its
// mergeability: "yes", "conflict" or "unknown".
func mergeableOf(t *testing.T, f *Forge, g *fakeGitea) string {
	t.Helper()
	st, err := f.State(context.Background(), g.repo(), fakePR)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	switch {
	case st.Mergeable == nil:
		return "unknown"
	case *st.Mergeable:
		return "yes"
	}
	return "conflict"
}

// TestAConflictIsBelievedAfterConflictAfter: Gitea's "not mergeable" is
// a conflict only once the same head and base have stayed so for
// ConflictAfter (before, Gitea may be checking); exactly ConflictAfter is
// enough.
func TestAConflictIsBelievedAfterConflictAfter(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.scriptOpenPull(false)
	clk := clock.NewFake(fakeNow)
	f := g.forge(clk)
	if got := mergeableOf(t, f, g); got != "unknown" {
		t.Fatalf("first seen unmergeable: %s, want unknown", got)
	}
	clk.Advance(DefaultConflictAfter - time.Second)
	if got := mergeableOf(t, f, g); got != "unknown" {
		t.Fatalf("unmergeable for less than ConflictAfter: %s, want unknown", got)
	}
	clk.Advance(time.Second)
	if got := mergeableOf(t, f, g); got != "conflict" {
		t.Fatalf("unmergeable for exactly ConflictAfter: %s, want conflict", got)
	}
}

// TestANegativeConflictAfterBelievesGiteaAtOnce: ConflictAfter < 0 takes
// the first "not mergeable" for a conflict.
func TestANegativeConflictAfterBelievesGiteaAtOnce(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.scriptOpenPull(false)
	f := New(Options{Secrets: g.forge(nil).secrets, Clock: clock.NewFake(fakeNow), MergeableTries: 1, ConflictAfter: -1})
	if got := mergeableOf(t, f, g); got != "conflict" {
		t.Fatalf("ConflictAfter < 0: %s, want conflict at once", got)
	}
}

// TestAConflictsClockRestartsOnANewHeadOrBase: a push to the branch or to
// the base is new content for Gitea to check: "not mergeable" at the new
// heads is unknown again, however long the old ones were.
func TestAConflictsClockRestartsOnANewHeadOrBase(t *testing.T) {
	t.Parallel()
	for _, moved := range []string{"head", "base"} {
		t.Run(moved, func(t *testing.T) {
			t.Parallel()
			g := newFake(t)
			g.scriptOpenPull(false)
			clk := clock.NewFake(fakeNow)
			f := g.forge(clk)
			if got := mergeableOf(t, f, g); got != "unknown" {
				t.Fatalf("first seen unmergeable: %s", got)
			}
			clk.Advance(DefaultConflictAfter)
			p := pullJSON(7, sdk.StateOpen, false, false)
			const sha = "4444444444444444444444444444444444444444"
			if moved == "head" {
				p.Head.Sha = sha
				g.on("GET /repos/acme/app/branches/feature", 200, branchJSON("feature", sha))
				g.on("GET /repos/acme/app/compare/main..."+sha, 200, map[string]any{"total_commits": 1})
				g.on("GET /repos/acme/app/commits/"+sha+"/status", 200, map[string]any{"statuses": []any{}})
			} else {
				p.Base.Sha = sha
			}
			g.on("GET /repos/acme/app/pulls/7", 200, p)
			if got := mergeableOf(t, f, g); got != "unknown" {
				t.Fatalf("unmergeable at a new %s: %s, want unknown", moved, got)
			}
		})
	}
}

// TestMergeableForgetsAnEarlierUnmergeable: once Gitea calls the pull
// request mergeable, an earlier "not mergeable" at the same heads is
// forgotten: a later one starts the clock again.
func TestMergeableForgetsAnEarlierUnmergeable(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.scriptOpenPull(false)
	clk := clock.NewFake(fakeNow)
	f := g.forge(clk)
	if got := mergeableOf(t, f, g); got != "unknown" {
		t.Fatalf("first seen unmergeable: %s", got)
	}
	clk.Advance(DefaultConflictAfter / 2)
	g.on("GET /repos/acme/app/pulls/7", 200, pullJSON(7, sdk.StateOpen, true, false))
	if got := mergeableOf(t, f, g); got != "yes" {
		t.Fatalf("mergeable: %s", got)
	}
	clk.Advance(DefaultConflictAfter / 2)
	g.on("GET /repos/acme/app/pulls/7", 200, pullJSON(7, sdk.StateOpen, false, false))
	if got := mergeableOf(t, f, g); got != "unknown" {
		t.Fatalf("unmergeable again, ConflictAfter after the first time but just now after a mergeable: %s, want unknown", got)
	}
}

// TestTheUnmergeableRecordsAreBounded: State remembers at most
// maxUnmergeable pull requests; when full, it drops those older than a day
// and, if still full, one more — never the recent ones beyond that.
func TestTheUnmergeableRecordsAreBounded(t *testing.T) {
	t.Parallel()
	tg := target{base: "http://gitea.example", full: "acme/app"}
	pull := func(n int) *sdk.PullRequest {
		return &sdk.PullRequest{Index: int64(n), Head: &sdk.PRBranchInfo{Sha: headSHA}, Base: &sdk.PRBranchInfo{Sha: baseSHA}}
	}
	t.Run("full of recent ones", func(t *testing.T) {
		f := New(Options{Clock: clock.NewFake(fakeNow)})
		for n := range maxUnmergeable {
			f.since[key(tg, pull(n))] = fakeNow.Add(-time.Hour)
		}
		f.conflictFor(tg, pull(maxUnmergeable))
		if len(f.since) != maxUnmergeable {
			t.Fatalf("%d records after one more, want %d", len(f.since), maxUnmergeable)
		}
		if _, ok := f.since[key(tg, pull(maxUnmergeable))]; !ok {
			t.Fatal("the new record was not kept")
		}
	})
	t.Run("with old ones", func(t *testing.T) {
		f := New(Options{Clock: clock.NewFake(fakeNow)})
		const old = 10
		for n := range maxUnmergeable {
			at := fakeNow.Add(-time.Hour)
			switch {
			case n < old:
				at = fakeNow.Add(-25 * time.Hour)
			case n == old:
				at = fakeNow.Add(-24 * time.Hour) // a day old exactly: recent still
			}
			f.since[key(tg, pull(n))] = at
		}
		f.conflictFor(tg, pull(maxUnmergeable))
		missing := 0
		for n := range maxUnmergeable {
			_, ok := f.since[key(tg, pull(n))]
			switch {
			case n < old && ok:
				t.Errorf("a record of a day and an hour ago (#%d) was kept", n)
			case n >= old && !ok:
				missing++
			}
		}
		if missing > 1 {
			t.Errorf("%d recent records dropped, want at most one", missing)
		}
		if _, ok := f.since[key(tg, pull(maxUnmergeable))]; !ok {
			t.Error("the new record was not kept")
		}
	})
	// The bound is about memory only: a pull request seen again keeps
	// its first sighting.
	t.Run("seen again", func(t *testing.T) {
		clk := clock.NewFake(fakeNow)
		f := New(Options{Clock: clk})
		f.conflictFor(tg, pull(1))
		clk.Advance(DefaultConflictAfter)
		if !f.conflictFor(tg, pull(1)) {
			t.Fatalf("seen unmergeable for ConflictAfter: no conflict (%d records)", len(f.since))
		}
	})
}
