package knowledge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// words of the generated corpus: a team's vocabulary.
var words = strings.Fields(`service deploy release database migration index query cache queue worker retry timeout
backoff lease token secret config pipeline stage review merge branch commit test fixture benchmark metric alert
dashboard incident runbook rollback canary feature flag schema event stream consumer producer partition replica
leader follower snapshot backup restore latency throughput budget quota limit tenant organization project ticket
agent session prompt model sandbox workspace checkpoint artifact build lint format vet fuzz coverage mutation`)

// vocabulary is the corpus's words by frequency: the team's words first,
// then a long tail of made-up ones (5,000 in all), drawn Zipf-distributed
// as in natural text, so that a rare word matches a few entries and a
// common one most.
var vocabulary = func() []string {
	out := slices.Clone(words)
	syl := strings.Fields("ka lo mi ne tu ra shi vo pe da gri fen sul mor bex tav qui zen hol wix")
	r := rand.New(rand.NewPCG(7, 7))
	seen := map[string]bool{}
	for _, w := range out {
		seen[w] = true
	}
	for len(out) < 5000 {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}()

// corpusEntry is the n-th generated entry: a title of three words, a body
// of a few paragraphs, two tags; deterministic from n.
func corpusEntry(n int) knowledge.EntryInput {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	z := rand.NewZipf(r, 1.07, 2, uint64(len(vocabulary)-1))
	pick := func() string { return vocabulary[z.Uint64()] }
	title := fmt.Sprintf("%s %s %s", pick(), pick(), pick())
	var body strings.Builder
	for p := range 2 + r.IntN(3) {
		if p > 0 {
			body.WriteString("\n\n")
		}
		for w := range 20 + r.IntN(40) {
			if w > 0 {
				body.WriteByte(' ')
			}
			body.WriteString(pick())
		}
		body.WriteByte('.')
	}
	return knowledge.EntryInput{Slug: fmt.Sprintf("notes/%05d", n),
		Content: knowledge.Content{Title: title, Body: body.String(), Tags: []string{pick(), "gen"}}}
}

// seed writes entries [from, to) of the corpus into the organization's
// default space with a few writers.
func seed(t testing.TB, k *knowledge.Service, org string, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := from + w; n < to; n += 4 {
				if _, err := k.CreateEntry(context.Background(), ann, org, "default", corpusEntry(n)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func slugs(hits []knowledge.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Space+"/"+h.Slug)
	}
	return out
}

// TestSearchOnAGeneratedCorpus: 2,000 generated entries plus planted ones;
// ranking (title over body, frequency), snippets (escaped, highlighted),
// filters by space and tag, and the index after edits, deletes and
// undeletes — on both engines.
func TestSearchOnAGeneratedCorpus(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		k := knowledge.New(s, nil)
		seed(t, k, "acme", 0, 2000)
		seed(t, k, "other", 0, 50) // another organization: never in acme's results
		if _, err := k.CreateSpace(ctx, ann, "acme", knowledge.SpaceInput{Slug: "ops"}); err != nil {
			t.Fatal(err)
		}
		plant := func(space, slug, title, body string, tags ...string) {
			t.Helper()
			if _, err := k.CreateEntry(ctx, ann, "acme", space, knowledge.EntryInput{Slug: slug, Content: content(title, body, tags...)}); err != nil {
				t.Fatal(err)
			}
		}
		plant("default", "zeppelin/title", "Zeppelin mooring", "How to moor it.", "air")
		plant("default", "zeppelin/body", "Airships", "Once, a zeppelin was mentioned here among many other words about hangars and ropes and weather.", "air")
		plant("ops", "zeppelin/ops", "Hangar rota", "The zeppelin hangar rota <script>alert(1)</script> & more zeppelin zeppelin.", "rota")
		if _, err := k.CreateEntry(ctx, ann, "other", "default", knowledge.EntryInput{Slug: "zeppelin/theirs", Content: content("Zeppelin", "zeppelin")}); err != nil {
			t.Fatal(err)
		}

		hits, err := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin"})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(slugs(hits), " "); got != "default/zeppelin/title ops/zeppelin/ops default/zeppelin/body" {
			t.Fatalf("ranking: %s (a title hit first, then three body hits over one)", got)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Rank > hits[i-1].Rank {
				t.Errorf("ranks not descending: %+v", hits)
			}
		}
		ops := hits[1]
		if !strings.Contains(ops.Snippet, "<mark>zeppelin</mark> hangar rota &lt;script&gt;alert(1)&lt;/script&gt; &amp; more <mark>zeppelin</mark>") {
			t.Fatalf("snippet not escaped and highlighted: %q", ops.Snippet)
		}
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(ops.Snippet, "<mark>", ""), "</mark>", ""), "<") {
			t.Fatalf("a raw < in the snippet: %q", ops.Snippet)
		}
		// Stemming and case: "Zeppelins" finds them too.
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "Zeppelins"}); len(hits) != 3 {
			t.Fatalf("stemmed search: %v", slugs(hits))
		}
		// Filters.
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin", Space: "ops"}); strings.Join(slugs(hits), " ") != "ops/zeppelin/ops" {
			t.Fatalf("space filter: %v", slugs(hits))
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin", Tags: []string{"air"}}); len(hits) != 2 {
			t.Fatalf("tag filter: %v", slugs(hits))
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin", Tags: []string{"air", "rota"}}); len(hits) != 0 {
			t.Fatalf("two tags (both required): %v", slugs(hits))
		}
		// The generated corpus: every hit holds every word, and the limit holds.
		hits, err = k.Search(ctx, "acme", knowledge.Query{Text: "service deploy", Limit: 50})
		if err != nil || len(hits) != 50 {
			t.Fatalf("corpus search: %d hits, %v", len(hits), err)
		}
		for _, h := range hits {
			if !strings.HasPrefix(h.Slug, "notes/") || !strings.Contains(h.Snippet, "<mark>") {
				t.Fatalf("corpus hit %+v", h)
			}
		}
		// An edit: the old words go, the new come, in the same batch.
		e, _ := k.Entry(ctx, "acme", "default", "zeppelin/title")
		if _, err := k.Save(ctx, bob, "acme", "default", "zeppelin/title", e.Version, content("Blimp mooring", "How to moor a blimp.", "air")); err != nil {
			t.Fatal(err)
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin"}); strings.Join(slugs(hits), " ") != "ops/zeppelin/ops default/zeppelin/body" {
			t.Fatalf("after the edit, zeppelin: %v", slugs(hits))
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "blimp"}); len(hits) != 1 || hits[0].Version != 2 || hits[0].Title != "Blimp mooring" {
			t.Fatalf("after the edit, blimp: %+v", hits)
		}
		// A delete hides it; include_deleted and an undelete bring it back.
		if _, err := k.SetDeleted(ctx, bob, "acme", "ops", "zeppelin/ops", true); err != nil {
			t.Fatal(err)
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin"}); strings.Join(slugs(hits), " ") != "default/zeppelin/body" {
			t.Fatalf("after the delete: %v", slugs(hits))
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin", IncludeDeleted: true}); len(hits) != 2 {
			t.Fatalf("with deleted: %v", slugs(hits))
		}
		if _, err := k.SetDeleted(ctx, bob, "acme", "ops", "zeppelin/ops", false); err != nil {
			t.Fatal(err)
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin"}); len(hits) != 2 {
			t.Fatalf("after the undelete: %v", slugs(hits))
		}
		// A restore puts the old words back.
		if _, err := k.Restore(ctx, ann, "acme", "default", "zeppelin/title", 1, 2); err != nil {
			t.Fatal(err)
		}
		if hits, _ := k.Search(ctx, "acme", knowledge.Query{Text: "zeppelin"}); len(hits) != 3 || hits[0].Slug != "zeppelin/title" || hits[0].Version != 3 {
			t.Fatalf("after the restore: %+v", hits)
		}
		// FTS5 syntax in the query is just words.
		if _, err := k.Search(ctx, "acme", knowledge.Query{Text: `"zeppelin" OR NEAR(x y) * -title: ^`}); err != nil {
			t.Fatalf("FTS5 syntax in a query: %v", err)
		}
	})
}
