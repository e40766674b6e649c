package flow

import (
	"context"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// A person approves or rejects the human stage a flow waits on.

// Decision is a person's approval or rejection of a human stage.
type Decision struct {
	Approve bool
	Comment string // the stage report; "" says who decided
	// Head is the head commit of the ticket's branch the person saw ("":
	// they named none, as an API client may); CurrentHead is the branch's
	// head as read just before deciding ("" when it does not exist). A
	// Head other than CurrentHead is refused: nobody approves code they
	// did not see.
	Head, CurrentHead string
}

// CheckHead refuses a decision on another head than the branch's current
// one (pure).
func CheckHead(branch string, d Decision) error {
	switch {
	case d.Head == "" || d.Head == d.CurrentHead:
		return nil
	case d.CurrentHead == "":
		return apperr.New(apperr.Conflict, "%s names the head %s, but the branch %s no longer exists: read the changes again before deciding",
			verb(d.Approve), short(d.Head), branch)
	default:
		return apperr.New(apperr.Conflict, "%s names the head %s, but the branch %s has moved to %s since: read the changes again before deciding",
			verb(d.Approve), short(d.Head), branch, short(d.CurrentHead))
	}
}

func verb(approve bool) string {
	if approve {
		return "the approval"
	}
	return "the rejection"
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// Decide approves (done) or rejects (failed) the human stage a flow waits
// on; the comment becomes the stage report, the head the person saw is
// recorded in the stage's event (CheckHead refuses another head than the
// current one).
//
// it is the item as the caller read it (the door resolves it once, to
// authorize): the first attempt decides with it, and only a retry after a
// lost race reads it again.
func (s *Service) Decide(ctx context.Context, actor event.Actor, it tracker.Item, d Decision) (Flow, error) {
	approve, comment := d.Approve, d.Comment
	var out Flow
	attempt := 0
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		if attempt++; attempt > 1 {
			var err error
			if it, err = s.Tracker.FindItem(ctx, it.ID); err != nil {
				return nil, err
			}
		}
		f, ok, err := s.active(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		input, outcome := InApprove, pipeline.OutcomeDone
		if !approve {
			input, outcome = InReject, pipeline.OutcomeFailed
		}
		if !ok || !Accepts(f.State(), input) {
			return nil, apperr.New(apperr.Conflict, "the flow does not wait for an approval")
		}
		if err := CheckHead(Branch(it.Key), d); err != nil {
			return nil, err
		}
		if comment == "" {
			comment = "approved by " + actor.Sub
			if !approve {
				comment = "rejected by " + actor.Sub
			}
		}
		// The decision is the human's: the flow's event carries them.
		t, err := s.advanceSeen(ctx, actor, f, it, outcome, comment, d.Head, s.now())
		if err != nil {
			return nil, err
		}
		out = f
		return t, nil
	})
	if err != nil {
		return Flow{}, err
	}
	f, err := s.Get(ctx, out.ID)
	return f, err
}
