package flow

import (
	"context"
	"fmt"

	"github.com/ballet/ballet/internal/job"
)

// flow.close_pr: closing the pull request of a cancelled ticket.

// handleClosePR closes the pull request a stopped flow recorded (queued
// with the stop of a cancelled ticket, so after its batch). Closing a pull
// request that is closed or merged already is no error on any forge, so a
// second run changes nothing. A ticket started again meanwhile has an
// active flow that may have adopted the pull request: it is left open.
func (s *Service) handleClosePR(ctx context.Context, _ *job.Job, p ClosePRArgs) error {
	f, err := Read(ctx, s.Store, p.FlowID)
	if err != nil {
		return err
	}
	if f.Status != StatusStopped || f.PullRequest == nil {
		return nil
	}
	if _, again, err := s.active(ctx, f.ItemID); err != nil || again {
		return err
	}
	proj, err := s.Tenancy.FindProject(ctx, f.ProjectID)
	if err != nil {
		return err
	}
	if proj.Repository == nil {
		return nil // nothing to close on
	}
	fg, err := s.Forges(proj.Repository.Forge)
	if err != nil {
		return job.Permanent(err)
	}
	repo, err := s.repoOf(ctx, proj)
	if err != nil {
		return err
	}
	err = fg.Close(ctx, repo, *f.PullRequest)
	if wait, limited := rateLimited(err, s.Clock.Now()); limited {
		return job.Snooze(wait)
	}
	if err != nil {
		return fmt.Errorf("close pull request #%d of flow %s: %w", f.PullRequest.Number, f.ID, err)
	}
	return nil
}
