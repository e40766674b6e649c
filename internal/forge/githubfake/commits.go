package githubfake

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The commits the fake knows, for GET /repos/{o}/{r}/compare/{base}...{head}
// ("Compare two commits"): each commit has its parents and the whole tree
// (path → content). Push records a commit it does not know as a child of
// the branch's head (of the default branch for a new branch) with the same
// tree; CommitFile records one that writes a file; a merge records a merge
// commit of both heads.
//
// The compare answers as GitHub documents it, asked without paging: the
// commits the head has that the base has not, oldest first, the newest
// 250 of them; ahead_by, behind_by and total_commits; the merge base; and
// at most 300 files changed from the merge base to the head, sorted by
// path, each with status added, removed or modified, its line counts and
// its patch (the hunks only). Simplified: a modified file's patch replaces
// every line (GitHub's is minimal), renames are not detected, and the
// patch is never left out for its size.

type commit struct {
	sha     string
	parents []string
	message string
	name    string // the author's
	email   string
	time    time.Time
	tree    map[string]string
	seq     int // the order of recording: chronological
}

// Commit is what CommitFile records.
type Commit struct {
	Message, AuthorName, AuthorEmail string
	Path, Content                    string // the file written (the whole new content)
}

// record adds a commit of r unless it is known. Callers hold mu.
func (s *Server) record(r *repo, sha string, parents []string, tree map[string]string, message, name, email string) {
	if _, ok := r.commits[sha]; ok {
		return
	}
	r.seq++
	r.commits[sha] = &commit{sha: sha, parents: parents, tree: tree, message: message, name: name, email: email,
		time: s.clock.Now().UTC().Truncate(time.Second), seq: r.seq}
}

// parentOf is the commit a push to branch builds on: its head, or the
// default branch's head for a new branch. Callers hold mu.
func parentOf(r *repo, branch string) string {
	if sha, ok := r.branches[branch]; ok {
		return sha
	}
	return r.branches[r.defaultBranch]
}

// treeOf is a copy of commit sha's tree (empty when unknown).
func treeOf(r *repo, sha string) map[string]string {
	out := map[string]string{}
	if c, ok := r.commits[sha]; ok {
		for k, v := range c.tree {
			out[k] = v
		}
	}
	return out
}

// CommitFile records a commit on branch (from the default branch when
// new) that writes c.Path with c.Content, pushes it, and returns its sha.
func (s *Server) CommitFile(owner, name, branch string, c Commit) string {
	s.mu.Lock()
	r := s.repo(owner, name)
	parent := parentOf(r, branch)
	tree := treeOf(r, parent)
	tree[c.Path] = c.Content
	sha := SHA(fmt.Sprintf("%s/%s %s %d %s", owner, name, branch, r.seq, c.Message))
	s.record(r, sha, []string{parent}, tree, c.Message, c.AuthorName, c.AuthorEmail)
	s.mu.Unlock()
	s.Push(owner, name, branch, sha)
	return sha
}

// ancestors is every commit reachable from sha, itself included.
func ancestors(r *repo, sha string) map[string]bool {
	seen := map[string]bool{}
	todo := []string{sha}
	for len(todo) > 0 {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[c] {
			continue
		}
		seen[c] = true
		if k, ok := r.commits[c]; ok {
			todo = append(todo, k.parents...)
		}
	}
	return seen
}

func (s *Server) compare(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	base, head, ok := strings.Cut(req.PathValue("basehead"), "...")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	base, head = resolve(r, base), resolve(r, head)
	if r.commits[base] == nil || r.commits[head] == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	inBase, inHead := ancestors(r, base), ancestors(r, head)
	var ahead []*commit
	behind := 0
	mergeBase := (*commit)(nil)
	for sha := range inHead {
		c := r.commits[sha]
		if c == nil {
			continue
		}
		if !inBase[sha] {
			ahead = append(ahead, c)
		} else if mergeBase == nil || c.seq > mergeBase.seq {
			mergeBase = c
		}
	}
	for sha := range inBase {
		if !inHead[sha] && r.commits[sha] != nil {
			behind++
		}
	}
	slices.SortFunc(ahead, func(a, b *commit) int { return a.seq - b.seq })
	total := len(ahead)
	if len(ahead) > 250 {
		ahead = ahead[len(ahead)-250:]
	}
	commits := make([]map[string]any, 0, len(ahead))
	for _, c := range ahead {
		commits = append(commits, commitJSON(c))
	}
	status := "ahead"
	switch {
	case total == 0 && behind == 0:
		status = "identical"
	case total == 0:
		status = "behind"
	case behind > 0:
		status = "diverged"
	}
	from := map[string]string{}
	out := map[string]any{"status": status, "ahead_by": total, "behind_by": behind, "total_commits": total,
		"commits": commits, "base_commit": commitJSON(r.commits[base])}
	if mergeBase != nil {
		from = mergeBase.tree
		out["merge_base_commit"] = commitJSON(mergeBase)
	}
	out["files"] = treeDiff(from, r.commits[head].tree)
	writeJSON(w, http.StatusOK, out)
}

func commitJSON(c *commit) map[string]any {
	parents := make([]map[string]any, 0, len(c.parents))
	for _, p := range c.parents {
		parents = append(parents, map[string]any{"sha": p})
	}
	login := c.name
	if login == "" {
		login = "a-person"
	}
	return map[string]any{"sha": c.sha, "parents": parents, "author": map[string]any{"login": login},
		"commit": map[string]any{"message": c.message,
			"author": map[string]any{"name": c.name, "email": c.email, "date": c.time.Format(time.RFC3339)}}}
}

// treeDiff lists the files that differ from one tree to the other, by
// path, at most 300.
func treeDiff(from, to map[string]string) []map[string]any {
	var paths []string
	for p := range from {
		if from[p] != to[p] {
			paths = append(paths, p)
		}
	}
	for p := range to {
		if _, ok := from[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	out := []map[string]any{}
	for _, p := range paths[:min(len(paths), 300)] {
		old, had := from[p]
		now, has := to[p]
		status := "modified"
		switch {
		case !had:
			status = "added"
		case !has:
			status = "removed"
		}
		del, add := lines(old), lines(now)
		var hunk strings.Builder
		fmt.Fprintf(&hunk, "@@ -%s +%s @@\n", span(len(del)), span(len(add)))
		for _, l := range del {
			hunk.WriteString("-" + l + "\n")
		}
		for _, l := range add {
			hunk.WriteString("+" + l + "\n")
		}
		out = append(out, map[string]any{"sha": SHA(now), "filename": p, "status": status, "additions": len(add),
			"deletions": len(del), "changes": len(add) + len(del),
			"patch": strings.TrimSuffix(hunk.String(), "\n")}) // GitHub's patch ends without a newline
	}
	return out
}

// lines splits a file's content into its lines (none for "").
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// span is a hunk's range of n lines from the first ("0,0" for none).
func span(n int) string {
	if n == 0 {
		return "0,0"
	}
	return fmt.Sprintf("1,%d", n)
}
