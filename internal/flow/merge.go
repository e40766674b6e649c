package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// flow.merge: checking (and merging) the pull request of a merge stage.

// mergeJob is the first flow.merge job of f's merge stage, entered now.
func mergeJob(f Flow, now time.Time) job.Spec {
	return job.New(MergeArgs{FlowID: f.ID, Step: f.Step, EnteredAt: now.UnixMilli()})
}

// mergePoll is how long a merge stage waits between checks: a tenth of the
// time it has waited so far, between 5 s and 5 min.
func mergePoll(waited time.Duration) time.Duration {
	return min(max(waited/10, 5*time.Second), 5*time.Minute)
}

// handleMerge checks the pull request of a merge stage and acts on the
// project's merge policy: wait (for checks, a review or a human merge),
// merge, or end the stage done or failed.
func (s *Service) handleMerge(ctx context.Context, _ *job.Job, p MergeArgs) error {
	f, it, err := s.load(ctx, p.FlowID)
	if err != nil {
		return err
	}
	if f.Step != p.Step || !Accepts(f.State(), InMergeState) {
		return nil
	}
	proj, err := s.Tenancy.FindProject(ctx, f.ProjectID)
	if err != nil {
		return err
	}
	why, err := s.pauseReason(ctx, f.ProjectID)
	if err != nil {
		return err
	}
	var d forge.Decision
	var pr *forge.PullRequest
	if proj.Repository == nil {
		d = forge.Decision{Action: forge.ActionFailed, Reason: "the project has no repository to merge into"}
	} else {
		d, pr, err = s.mergeDecision(ctx, proj, it, f.PullRequest, why == "")
		if err != nil {
			return err
		}
	}
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InMergeState) }
	err = s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		switch d.Action {
		case actionPause:
			return s.wait(f, WaitPause, d.Reason, now), nil
		case forge.ActionDone:
			return s.advance(ctx, System, f, it, pipeline.OutcomeDone, d.Reason, now)
		case forge.ActionFailed:
			return s.advance(ctx, System, f, it, pipeline.OutcomeFailed, d.Reason, now)
		}
		want := f.State()
		if d.Action == forge.ActionWait {
			want = MergeWait(d.Waiting)
		}
		samePR := (pr == nil && f.PullRequest == nil) || (pr != nil && f.PullRequest != nil && *pr == *f.PullRequest)
		if f.State() == want && samePR {
			return nil, nil
		}
		next := f
		next.Status, next.Waiting, next.PullRequest = want.Status, want.Waiting, pr
		return &transition.Transition{
			Events:  []event.Event{flowEvent(System, f, "waiting", &FlowWaiting{Waiting: want.Waiting, Reason: d.Reason, PullRequest: pr})},
			Guarded: []store.Statement{update(f, next, now)},
		}, nil
	})
	if err != nil {
		return err
	}
	if d.Action == forge.ActionDone || d.Action == forge.ActionFailed || d.Action == actionPause {
		return nil
	}
	return job.Snooze(mergePoll(s.Clock.Now().Sub(time.UnixMilli(p.EnteredAt))))
}

// mergeDecision finds or opens the ticket's pull request (keeping the one
// found before, so that a branch a human merged and deleted still counts as
// merged), merges it when the policy allows, and says what the stage does
// next.
// actionPause: the merge would go ahead, but the project or platform is
// paused: the flow waits before merging.
const actionPause = "pause"

func (s *Service) mergeDecision(ctx context.Context, proj tenancy.Project, it tracker.Item, prev *forge.PullRequest, mayMerge bool) (forge.Decision, *forge.PullRequest, error) {
	fg, err := s.Forges(proj.Repository.Forge)
	if err != nil {
		return forge.Decision{}, nil, job.Permanent(err)
	}
	repo := forge.Repo{URL: proj.Repository.URL, DefaultBranch: proj.Repository.DefaultBranch, CredentialsRef: proj.Repository.CredentialsRef}
	branch := Branch(it.Key)
	pr, err := fg.EnsurePullRequest(ctx, repo, branch, it.Key+": "+it.Title, "Opened by Ballet for "+it.Key+".")
	switch {
	case errors.Is(err, forge.ErrBranchNotPushed) && prev != nil:
		pr = *prev // gone since: merged and deleted, or deleted unmerged
	case errors.Is(err, forge.ErrBranchNotPushed):
		d := forge.Decide(forge.Policy(proj.MergePolicy), fg.CanMerge(), forge.State{Branch: branch, Base: repo.DefaultBranch})
		return d, nil, nil
	case err != nil:
		return forge.Decision{}, nil, fmt.Errorf("find the pull request of %s: %w", branch, err)
	}
	st, err := fg.State(ctx, repo, pr)
	if err != nil {
		return forge.Decision{}, nil, fmt.Errorf("read the pull request of %s: %w", branch, err)
	}
	if st.HeadSHA != "" {
		pr.HeadSHA = st.HeadSHA
	}
	d := forge.Decide(forge.Policy(proj.MergePolicy), fg.CanMerge(), st)
	if d.Action == forge.ActionMerge && !mayMerge {
		return forge.Decision{Action: actionPause, Reason: "the pull request is ready, but merging waits for the pause to end"}, &pr, nil
	}
	if d.Action == forge.ActionMerge {
		if err := fg.Merge(ctx, repo, pr); err != nil {
			return forge.Decision{Action: forge.ActionWait, Waiting: WaitChecks, Reason: fmt.Sprintf("the merge did not go through yet: %v", err)}, &pr, nil
		}
		// The next check sees it merged.
	}
	return d, &pr, nil
}
