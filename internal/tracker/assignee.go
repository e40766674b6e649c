package tracker

import (
	"context"
	"fmt"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/text"
)

// MaxAssignee bounds an assignee's subject, as a member's.
const MaxAssignee = 255

// validAssignee checks the form of an assignee's subject.
func validAssignee(subject string) error {
	if len(subject) > MaxAssignee {
		return fmt.Errorf("must be at most %d characters", MaxAssignee)
	}
	return text.Line(subject)
}

// checkAssignee checks that subject ("" for none) may be a ticket's
// assignee in the project: a person whose role there lets them act on
// the ticket (tracker.write: answer its questions, approve its stages).
func (s *Service) checkAssignee(ctx context.Context, orgID, projectID, subject string) error {
	if subject == "" {
		return nil
	}
	if err := validAssignee(subject); err != nil {
		return apperr.Fields([]apperr.FieldError{{Field: "assignee", Message: err.Error()}})
	}
	role, err := (&access.Resolver{Store: s.Store}).SubjectRole(ctx, subject, orgID, projectID)
	if err != nil {
		return err
	}
	if !access.Grants(role, access.TrackerWrite) {
		return apperr.Fields([]apperr.FieldError{{Field: "assignee",
			Message: fmt.Sprintf("%q is not a member of this project who may work on its tickets (tracker.write)", subject)}})
	}
	return nil
}
