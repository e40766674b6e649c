package knowledge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"slices"
	"strings"
	"unicode"

	"github.com/ballet/ballet/internal/apperr"
)

// Query is a search.
type Query struct {
	Text           string   // words; every one must occur (stemmed, case and accents folded)
	Space          string   // "": every space of the organization
	Tags           []string // every one must be on the entry
	IncludeDeleted bool     // deleted entries too (their last version)
	Limit          int      // 20 when 0, at most MaxResults
}

// MaxResults bounds a search's answer.
const MaxResults = 100

// Hit is one search result: an entry's current version, where it matched.
// Core's client reads it as knowledge/client.Result, a type of its own on
// purpose: Core does not import the service's domain.
type Hit struct {
	Space   string   `json:"space"`
	Slug    string   `json:"slug"`
	Title   string   `json:"title"`
	Version int64    `json:"version"`
	Tags    []string `json:"tags"`
	// Snippet is HTML: the text around the best match, escaped, with each
	// hit in <mark>…</mark>.
	Snippet string `json:"snippet"`
	// Rank orders the results, higher first (the negated bm25 score for
	// full-text hits; fused ranks when a Retriever is added).
	Rank float64 `json:"rank"`
}

// Retriever finds an organization's entries for a query. The full-text
// index is one; embeddings (not built) would be another: the seam for
// them. Search fuses what each retriever finds.
type Retriever interface {
	Retrieve(ctx context.Context, org string, q Query) ([]Hit, error)
}

// Snippet markers: control characters, which no stored text holds
// (package text), so they can only come from snippet().
const (
	markOpen  = "\x02"
	markClose = "\x03"
)

// orgToken and spaceToken are the index's scope tokens of an organization
// and of one of its spaces: a hash (so any slug is one token), ending in a
// digit (so that no stemmer changes it).
func orgToken(org string) string { return scopeToken("o", org) }

func spaceToken(org, space string) string { return scopeToken("s", org+"/"+space) }

func scopeToken(kind, s string) string {
	h := sha256.Sum256([]byte(s))
	return kind + hex.EncodeToString(h[:10]) + "z9"
}

// scoped restricts an FTS5 query of words to the title, body and tags of
// the entries within a scope token.
func scoped(token, words string) string {
	return `scope : "` + token + `" AND {title body tags} : (` + words + `)`
}

// ftsQuery turns a user's words into an FTS5 query: each word a quoted
// string (so no user input is FTS5 syntax), all of them required.
func ftsQuery(s string) (string, error) {
	words := strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	if len(words) == 0 {
		return "", apperr.Fields([]apperr.FieldError{{Field: "q", Message: fmt.Sprintf("%q holds no word to search for", s)}})
	}
	if len(words) > 32 {
		return "", apperr.Fields([]apperr.FieldError{{Field: "q", Message: fmt.Sprintf("has %d words; at most 32", len(words))}})
	}
	for i, w := range words {
		words[i] = `"` + w + `"`
	}
	return strings.Join(words, " "), nil
}

// highlight turns snippet()'s output into HTML: the text escaped, the
// markers into <mark> elements.
func highlight(s string) string {
	s = html.EscapeString(s)
	return strings.NewReplacer(markOpen, "<mark>", markClose, "</mark>").Replace(s)
}

// FullText is the Retriever on the FTS5 index (bm25; title hits weigh 10,
// tag hits 4, body hits 1), within the organization (or the space) by its
// scope token; the entry's own columns are checked too.
type FullText struct{ s *Service }

// Retrieve implements Retriever.
func (f FullText) Retrieve(ctx context.Context, org string, q Query) ([]Hit, error) {
	words, err := ftsQuery(q.Text)
	if err != nil {
		return nil, err
	}
	match := scoped(orgToken(org), words)
	if q.Space != "" {
		match = scoped(spaceToken(org, q.Space), words)
	}
	// Rank every match first (bm25 is cheap), then make snippets for the
	// page only: snippet() reads and tokenizes a whole document, which for
	// every match of a common word would dominate the search.
	where := `entry_search MATCH ? AND e.org = ?`
	args := []any{match, org}
	if q.Space != "" {
		where += ` AND e.space = ?`
		args = append(args, q.Space)
	}
	if !q.IncludeDeleted {
		where += ` AND e.deleted = 0`
	}
	for _, t := range q.Tags {
		where += ` AND EXISTS (SELECT 1 FROM json_each(e.tags) WHERE value = ?)`
		args = append(args, t)
	}
	sql := `WITH top AS (
  SELECT e.rowid AS rid, bm25(entry_search, 10.0, 1.0, 4.0, 0.0) AS score
  FROM entry_search JOIN entries e ON e.rowid = entry_search.rowid
  WHERE ` + where + `
  ORDER BY score, e.slug LIMIT ?)
SELECT e.space, e.slug, e.title, e.version, e.tags,
  snippet(entry_search, -1, char(2), char(3), '…', 24), top.score
FROM top JOIN entry_search ON entry_search.rowid = top.rid JOIN entries e ON e.rowid = top.rid
WHERE entry_search MATCH ?
ORDER BY top.score, e.slug`
	args = append(args, q.Limit, match)
	rows, err := f.s.query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	out := make([]Hit, 0, rows.Len())
	for i := range rows.Len() {
		var h Hit
		var tags, snip string
		var score float64
		if err := rows.Scan(i, &h.Space, &h.Slug, &h.Title, &h.Version, &tags, &snip, &score); err != nil {
			return nil, err
		}
		if h.Tags, err = parseTags(tags); err != nil {
			return nil, err
		}
		h.Snippet, h.Rank = highlight(snip), -score
		out = append(out, h)
	}
	return out, nil
}

// Search finds the organization's entries for q, best first.
func (s *Service) Search(ctx context.Context, org string, q Query) ([]Hit, error) {
	var v apperr.Validator
	if q.Space != "" {
		CheckSpaceSlug(&v, "space", q.Space)
	}
	q.Tags = normTags(&v, "tag", q.Tags)
	if q.Limit <= 0 {
		q.Limit = 20
	}
	if q.Limit > MaxResults {
		v.Add("limit", "%d is more than %d", q.Limit, MaxResults)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if q.Space != "" {
		if _, err := s.Space(ctx, org, q.Space); err != nil {
			return nil, err
		}
	}
	retrievers := append([]Retriever{FullText{s}}, s.Retrievers...)
	var lists [][]Hit
	for _, r := range retrievers {
		hits, err := r.Retrieve(ctx, org, q)
		if err != nil {
			return nil, err
		}
		lists = append(lists, hits)
	}
	if len(lists) == 1 {
		return lists[0], nil
	}
	return fuse(lists, q.Limit), nil
}

// fuse merges ranked lists by reciprocal rank fusion (k = 60): an entry's
// rank is the sum of 1/(60 + its place) over the lists; the first list's
// hit (its snippet) represents it.
func fuse(lists [][]Hit, limit int) []Hit {
	type key struct{ space, slug string }
	score := map[key]float64{}
	first := map[key]Hit{}
	var order []key
	for _, l := range lists {
		for i, h := range l {
			k := key{h.Space, h.Slug}
			if _, ok := first[k]; !ok {
				first[k] = h
				order = append(order, k)
			}
			score[k] += 1 / (60 + float64(i+1))
		}
	}
	out := make([]Hit, 0, len(order))
	for _, k := range order {
		h := first[k]
		h.Rank = score[k]
		out = append(out, h)
	}
	slices.SortStableFunc(out, func(a, b Hit) int {
		switch {
		case a.Rank > b.Rank:
			return -1
		case a.Rank < b.Rank:
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
