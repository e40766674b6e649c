package githubfake

import (
	"net/http"
	"slices"
)

// Status is a commit status (POST /repos/{o}/{r}/statuses/{sha}).
type Status struct {
	Context string `json:"context"`
	State   string `json:"state"` // error, failure, pending, success
	// TargetURL is the status's page (CI's log); may be "".
	TargetURL string `json:"target_url"`
}

// CheckRun is a check run of a commit.
type CheckRun struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Status     string `json:"status"`     // queued, in_progress, completed
	Conclusion string `json:"conclusion"` // when completed: success, failure, neutral, cancelled, skipped, timed_out, action_required, startup_failure
	HeadSHA    string `json:"head_sha"`
	DetailsURL string `json:"details_url"` // the run's page on CI; may be ""
}

// SetStatus sets the commit status context of sha to state (error,
// failure, pending, success), replacing the context's earlier one.
func (s *Server) SetStatus(owner, name, sha, context, state string) {
	s.SetStatusURL(owner, name, sha, context, state, "")
}

// SetStatusURL is SetStatus with the status's target URL.
func (s *Server) SetStatusURL(owner, name, sha, context, state, targetURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	st := slices.DeleteFunc(r.statuses[sha], func(x Status) bool { return x.Context == context })
	r.statuses[sha] = append(st, Status{Context: context, State: state, TargetURL: targetURL})
}

// SetCheckRun creates or updates the check run name of sha.
func (s *Server) SetCheckRun(owner, name, sha, run, status, conclusion string) {
	s.SetCheckRunURL(owner, name, sha, run, status, conclusion, "")
}

// SetCheckRunURL is SetCheckRun with the run's details URL.
func (s *Server) SetCheckRunURL(owner, name, sha, run, status, conclusion, detailsURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	for i, c := range r.checkRuns[sha] {
		if c.Name == run {
			r.checkRuns[sha][i].Status, r.checkRuns[sha][i].Conclusion, r.checkRuns[sha][i].DetailsURL = status, conclusion, detailsURL
			return
		}
	}
	id := int64(1)
	for _, cs := range r.checkRuns {
		id += int64(len(cs))
	}
	r.checkRuns[sha] = append(r.checkRuns[sha], CheckRun{ID: id, Name: run, Status: status, Conclusion: conclusion, HeadSHA: sha, DetailsURL: detailsURL})
}

func (s *Server) combinedStatus(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	sha := resolve(r, req.PathValue("ref"))
	statuses := r.statuses[sha]
	state := "success"
	if len(statuses) == 0 {
		state = "pending"
	}
	for _, st := range statuses {
		switch {
		case st.State == "failure" || st.State == "error":
			state = "failure"
		case st.State == "pending" && state != "failure":
			state = "pending"
		}
	}
	items := make([]map[string]any, 0, len(statuses))
	for _, st := range statuses {
		items = append(items, map[string]any{"context": st.Context, "state": st.State, "target_url": st.TargetURL})
	}
	page, link := paginate(req, items)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(statuses), "statuses": page})
}

func (s *Server) checkRuns(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	sha := resolve(r, req.PathValue("ref"))
	runs := r.checkRuns[sha]
	items := make([]map[string]any, 0, len(runs))
	for _, c := range runs {
		m := map[string]any{"id": c.ID, "name": c.Name, "status": c.Status, "conclusion": nil, "head_sha": c.HeadSHA, "details_url": c.DetailsURL}
		if c.Status == "completed" {
			m["conclusion"] = c.Conclusion
		}
		items = append(items, m)
	}
	page, link := paginate(req, items)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": page})
}
