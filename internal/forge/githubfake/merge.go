package githubfake

import (
	"fmt"
	"net/http"
)

func (s *Server) isMerged(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	if !p.Merged {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) merge(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	var in struct {
		SHA         string `json:"sha"`
		MergeMethod string `json:"merge_method"`
	}
	if !decode(w, req, &in) {
		return
	}
	switch {
	case in.MergeMethod != "" && in.MergeMethod != "merge" && in.MergeMethod != "squash" && in.MergeMethod != "rebase":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "merge_method", "code": "invalid"})
		return
	case p.Merged || p.State != "open":
		writeError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	case in.SHA != "" && in.SHA != p.HeadSHA:
		writeError(w, http.StatusConflict, "Head branch was modified. Review and try the merge again.")
		return
	case p.Conflict || p.MergeableState == "blocked" || r.blocked(p) || p.MergeableState == "behind" || p.MergeableState == "draft":
		writeError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	}
	s.doMerge(r, p)
	writeJSON(w, http.StatusOK, map[string]any{"sha": p.MergeCommitSHA, "merged": true, "message": "Pull Request successfully merged"})
}

// doMerge merges p: the base moves to a merge commit. Callers hold mu.
func (s *Server) doMerge(r *repo, p *pull) {
	p.Merged, p.MergedSHA, p.State = true, p.HeadSHA, "closed"
	p.Merges++
	p.MergedAt, p.ClosedAt = s.clock.Now(), s.clock.Now()
	p.MergeCommitSHA = SHA("merge " + r.branches[p.Base] + " " + p.HeadSHA)
	tree := treeOf(r, r.branches[p.Base])
	for k, v := range treeOf(r, p.HeadSHA) {
		tree[k] = v
	}
	s.record(r, p.MergeCommitSHA, []string{r.branches[p.Base], p.HeadSHA}, tree, fmt.Sprintf("Merge pull request #%d", p.Number), "GitHub", "noreply@github.com")
	r.branches[p.Base] = p.MergeCommitSHA
	for _, o := range r.pulls {
		if o.State == "open" && o.Base == p.Base {
			o.nullLeft = s.nullReads
		}
	}
}

// MergeByHand merges pull request n as a person on GitHub would.
func (s *Server) MergeByHand(owner, name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	s.doMerge(r, s.pull(r, n))
}
