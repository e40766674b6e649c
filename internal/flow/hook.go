package flow

import (
	"context"

	"github.com/ballet/ballet/internal/forge"
)

// MergeChecks returns the dedupe keys of the flow.merge jobs of a project's
// flows that wait in a merge stage for a pull request the forge's webhook
// delivery names (by number, head branch or head commit, as the flow
// recorded it), for the job queue to wake (job.Orchestrator.Wake). Flows
// of other projects are never among them. A flow that has not recorded its
// pull request yet has its first check due already.
func (s *Service) MergeChecks(ctx context.Context, projectID string, h forge.Hook) ([]string, error) {
	flows, err := s.own(ctx, "list flows waiting in a merge stage", `SELECT `+flowColumns+` FROM flows
WHERE project_id = ? AND pull_request IS NOT NULL AND ((status = 'running' AND waiting = 'checks') OR (status = 'waiting' AND waiting IN ('review', 'merge')))`,
		projectID)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, f := range flows {
		if f.PullRequest == nil || !h.Names(*f.PullRequest) {
			continue
		}
		if a, ok := ExpectedStep(f); ok && Accepts(f.State(), InMergeState) {
			keys = append(keys, a.Args.DedupeKey())
		}
	}
	return keys, nil
}
