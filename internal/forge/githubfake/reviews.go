package githubfake

import (
	"net/http"
	"time"
)

// Review is a pull request review.
type Review struct {
	ID                int64  `json:"id"`
	User              string `json:"-"`
	Body              string `json:"body"`
	State             string `json:"state"` // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	AuthorAssociation string `json:"author_association"`
	CommitID          string `json:"commit_id"`
	submitted         time.Time
}

func (s *Server) listReviews(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	out := make([]map[string]any, 0, len(p.reviews))
	for _, rv := range p.reviews {
		out = append(out, map[string]any{
			"id": rv.ID, "user": map[string]any{"login": rv.User}, "body": rv.Body, "state": rv.State,
			"author_association": rv.AuthorAssociation, "commit_id": rv.CommitID,
			"submitted_at": rv.submitted.UTC().Format(time.RFC3339),
		})
	}
	writePage(w, req, out)
}

// AddReview submits a review of pull request n by user, whose
// author_association (OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE…) is
// association, with state APPROVED, CHANGES_REQUESTED or COMMENTED. It
// returns the review's id.
func (s *Server) AddReview(owner, name string, n int, user, association, state, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(s.repo(owner, name), n)
	id := int64(n*1000 + len(p.reviews) + 1)
	p.reviews = append(p.reviews, &Review{ID: id, User: user, Body: body, State: state, AuthorAssociation: association, CommitID: p.HeadSHA, submitted: s.clock.Now()})
	return id
}

// DismissReview dismisses review id of pull request n: its state becomes
// DISMISSED.
func (s *Server) DismissReview(owner, name string, n int, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rv := range s.pull(s.repo(owner, name), n).reviews {
		if rv.ID == id {
			rv.State = "DISMISSED"
		}
	}
}
