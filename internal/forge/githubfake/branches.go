package githubfake

import "net/http"

func (s *Server) getBranch(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	name := req.PathValue("branch")
	sha, ok := r.branches[name]
	if !ok {
		writeError(w, http.StatusNotFound, "Branch not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "commit": map[string]any{"sha": sha}, "protected": false})
}

// Push sets branch's head to sha (creating the branch), as a git push
// would. Open pull requests whose head or base it is recompute their
// mergeability.
func (s *Server) Push(owner, name, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	parent := parentOf(r, branch)
	s.record(r, sha, []string{parent}, treeOf(r, parent), "push to "+branch, "A person", "person@example.com")
	r.branches[branch] = sha
	for _, p := range r.pulls {
		if p.State != "open" {
			continue
		}
		if p.Head == branch {
			p.HeadSHA = sha
			p.nullLeft = s.nullReads
			r.dismissStale(p)
		}
		if p.Base == branch {
			p.nullLeft = s.nullReads
		}
	}
}

// Branch returns branch's head commit.
func (s *Server) Branch(owner, name, branch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha, ok := s.repo(owner, name).branches[branch]
	return sha, ok
}

// DeleteBranch deletes branch; GitHub closes the open pull requests whose
// head it was.
func (s *Server) DeleteBranch(owner, name, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	delete(r.branches, branch)
	for _, p := range r.pulls {
		if p.State == "open" && p.Head == branch {
			p.State, p.ClosedAt = "closed", s.clock.Now()
		}
	}
}

// resolve turns a ref (a branch name or a commit id) into a commit id.
func resolve(r *repo, ref string) string {
	if sha, ok := r.branches[ref]; ok {
		return sha
	}
	return ref
}
