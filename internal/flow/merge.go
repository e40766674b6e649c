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
	"github.com/ballet/ballet/internal/secret"
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
// time it has waited so far, between 5 s and 5 min. A pull request that
// waits a day costs 332 forge calls, 56 in its first hour and 12 an hour
// once it has waited 50 minutes (BenchmarkMergePollADay); a forge's webhook
// wakes the check at once whatever the pace.
func mergePoll(waited time.Duration) time.Duration {
	return min(max(waited/10, 5*time.Second), 5*time.Minute)
}

// mergeRecheck is how soon a merge stage checks again after the forge
// refused a merge for now (still checking mergeability, the head moved):
// the next check's state decides, never a blind second merge.
const mergeRecheck = 5 * time.Second

// mergeOutcome is what a check of a merge stage found and decided.
type mergeOutcome struct {
	d    forge.Decision
	st   forge.State        // the pull request's state, when it was read
	pr   *forge.PullRequest // the pull request found (nil: none)
	soon bool               // check again after mergeRecheck, not the pace of mergePoll
}

// handleMerge checks the pull request of a merge stage and acts on the
// project's merge policy: wait (for checks, a review or a human merge),
// merge, or end the stage done or failed. A forge that rate-limits Ballet
// snoozes the check until it allows calls again (not a failed attempt);
// other forge errors (5xx, timeouts) fail the attempt, which the job's
// backoff retries; a credentials_ref the platform's policy refuses fails
// the stage, its reason in the report.
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
	var o mergeOutcome
	if proj.Repository == nil {
		o.d = forge.Decision{Action: forge.ActionFailed, Reason: "the project has no repository to merge into"}
	} else {
		o, err = s.mergeDecision(ctx, proj, f, it, why == "")
		if wait, limited := rateLimited(err, s.Clock.Now()); limited {
			s.Log.Info("the forge rate-limits Ballet: checking the pull request later", "flow", f.ID, "ticket", it.Key, "wait", wait)
			return job.Snooze(wait)
		}
		if errors.Is(err, secret.ErrRefused) {
			// The platform's policy refuses the project's credentials_ref:
			// no retry would change that, and nothing was sent.
			o, err = mergeOutcome{d: forge.Decision{Action: forge.ActionFailed, Reason: err.Error()}}, nil
		}
		if err != nil {
			return err
		}
	}
	d, pr := o.d, o.pr
	report := d.Reason
	if d.Action == forge.ActionFailed && proj.Repository != nil {
		report = MergeReport(d, o.st, pr)
	}
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InMergeState) }
	err = s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		next := f
		if pr != nil {
			next.PullRequest = pr // kept when the stage ends: the ticket's pull request (closed if the ticket is cancelled)
		}
		switch d.Action {
		case actionPause:
			return s.wait(next, WaitPause, d.Reason, now), nil
		case forge.ActionDone:
			return s.advance(ctx, System, next, it, pipeline.OutcomeDone, report, now)
		case forge.ActionFailed:
			return s.advance(ctx, System, next, it, pipeline.OutcomeFailed, report, now)
		}
		want := f.State()
		if d.Action == forge.ActionWait {
			want = MergeWait(d.Waiting)
		}
		samePR := pr == nil || (f.PullRequest != nil && *pr == *f.PullRequest)
		if f.State() == want && samePR {
			return nil, nil
		}
		next.Status, next.Waiting = want.Status, want.Waiting
		return &transition.Transition{
			Events:  []event.Event{flowEvent(System, f, &FlowWaiting{Waiting: want.Waiting, Reason: d.Reason, PullRequest: next.PullRequest})},
			Guarded: []store.Statement{update(f, next, now)},
		}, nil
	})
	if err != nil {
		return err
	}
	switch {
	case d.Action == forge.ActionDone || d.Action == forge.ActionFailed || d.Action == actionPause:
		return nil
	case o.soon:
		return job.Snooze(mergeRecheck)
	}
	return job.Snooze(mergePoll(s.Clock.Now().Sub(time.UnixMilli(p.EnteredAt))))
}

// rateLimited reports whether err says the forge rate-limits Ballet, and
// how long to wait (at least a second).
func rateLimited(err error, now time.Time) (time.Duration, bool) {
	var rl *forge.RateLimitedError
	if !errors.As(err, &rl) {
		return 0, false
	}
	return max(rl.Until.Sub(now), time.Second), true
}

// actionPause: the merge would go ahead, but the project or platform is
// paused: the flow waits before merging.
const actionPause = "pause"

// mergeDecision reads the ticket's pull request, merges it when the policy
// allows, and says what the stage does next. The first check of an entry
// of the stage finds or opens the pull request (EnsurePullRequest: a pull
// request opened before a crash, or by hand, is adopted, never duplicated);
// once the flow has recorded it, the next checks read that one's state
// only, so a pull request a person closed fails the stage instead of a new
// one being opened, and a branch merged and deleted still counts as merged.
func (s *Service) mergeDecision(ctx context.Context, proj tenancy.Project, f Flow, it tracker.Item, mayMerge bool) (mergeOutcome, error) {
	fg, err := s.Forges(proj.Repository.Forge)
	if err != nil {
		return mergeOutcome{}, job.Permanent(err)
	}
	repo, err := s.repoOf(ctx, proj)
	if err != nil {
		return mergeOutcome{}, err
	}
	policy := forge.Policy(proj.MergePolicy)
	branch := Branch(it.Key)
	var pr forge.PullRequest
	if f.PullRequest != nil {
		pr = *f.PullRequest
	} else {
		body := PRBody(PRBodyInput{Key: it.Key, Title: it.Title, Description: it.Description, AcceptanceCriteria: it.AcceptanceCriteria,
			FlowID: f.ID, Pipeline: f.Pipeline, PipelineVersion: f.PipelineVersion, Stage: f.Stage, Iteration: f.Iteration,
			ReportStage: f.OutcomeStage, Report: f.Report})
		pr, err = fg.EnsurePullRequest(ctx, repo, branch, PRTitle(it.Key, it.Title), body)
		switch {
		case errors.Is(err, forge.ErrBranchNotPushed):
			st := forge.State{Branch: branch, Base: repo.DefaultBranch}
			return mergeOutcome{d: forge.Decide(policy, fg.CanMerge(), st), st: st}, nil
		case err != nil:
			return mergeOutcome{}, fmt.Errorf("find the pull request of %s: %w", branch, err)
		}
	}
	st, err := fg.State(ctx, repo, pr)
	if err != nil {
		return mergeOutcome{}, fmt.Errorf("read the pull request of %s: %w", branch, err)
	}
	if st.HeadSHA != "" {
		pr.HeadSHA = st.HeadSHA
	}
	o := mergeOutcome{d: forge.Decide(policy, fg.CanMerge(), st), st: st, pr: &pr}
	if o.d.Action != forge.ActionMerge {
		return o, nil
	}
	if !mayMerge {
		o.d = forge.Decision{Action: actionPause, Reason: "the pull request is ready, but merging waits for the pause to end"}
		return o, nil
	}
	// The merge carries the head judged: a push since makes the forge
	// refuse. Whatever happens, the next check's state decides: a merge
	// that went through is seen merged, never merged twice.
	err = fg.Merge(ctx, repo, pr)
	switch {
	case err == nil:
	case errors.Is(err, forge.ErrNotMergeable) || errors.Is(err, forge.ErrOutOfDate):
		o.d = forge.Decision{Action: forge.ActionWait, Waiting: WaitChecks, Reason: fmt.Sprintf("the merge did not go through yet: %v", err)}
		o.soon = true
	case errors.Is(err, forge.ErrCannotMerge):
		o.d = forge.Decision{Action: forge.ActionWait, Waiting: WaitMerge,
			Reason: fmt.Sprintf("waiting for a human to merge %s into %s: the forge does not let Ballet merge (%v)", branch, st.Base, err)}
	default:
		return mergeOutcome{}, fmt.Errorf("merge the pull request of %s: %w", branch, err)
	}
	return o, nil
}

// repoOf is where a project's code lives, as its forge needs it, with the
// organization its credentials_ref resolves for.
func (s *Service) repoOf(ctx context.Context, proj tenancy.Project) (forge.Repo, error) {
	org, err := s.Tenancy.FindOrganization(ctx, proj.OrganizationID)
	if err != nil {
		return forge.Repo{}, fmt.Errorf("read the organization of project %s: %w", proj.Key, err)
	}
	r := proj.Repository
	return forge.Repo{URL: r.URL, DefaultBranch: r.DefaultBranch, APIURL: r.APIURL, CredentialsRef: r.CredentialsRef, Organization: org.Slug}, nil
}
