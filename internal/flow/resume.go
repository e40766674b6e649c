package flow

import (
	"context"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/transition"
)

// flow.resume: the ticket's last blocking question was answered.

// handleResume resumes a flow waiting for an answer once no blocking
// question of its ticket is open.
func (s *Service) handleResume(ctx context.Context, _ *job.Job, p ResumeArgs) error {
	return s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, ok, err := s.active(ctx, p.ItemID)
		if err != nil || !ok || !Accepts(f.State(), InAnswered) {
			return nil, err
		}
		it, err := s.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			return nil, err
		}
		open, err := s.Tracker.OpenBlockingQuestions(ctx, it.ID)
		if err != nil || open > 0 {
			return nil, err
		}
		now := s.now()
		if it.State != "waiting_for_answer" && it.State != "in_progress" {
			return s.Stopped(ctx, f, it, now)
		}
		return s.resume(f, it, now, "the last blocking question was answered")
	})
}
