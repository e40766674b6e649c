package flow

import (
	"strconv"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/run"
)

// The flow engine's jobs. Every flow.* kind is the flow engine's: its
// arguments are one of the types below (job.Args), written as the job's
// payload and read back as the same type by the handler registered for the
// kind (Register). The kinds, the payloads' field names and the dedupe keys
// are stored in the jobs table: they must not change, so that jobs queued
// by an older Core still run.

// Job kinds of the flow engine.
const (
	JobEnter       = "flow.enter"        // enter the stage of a step
	JobRunFinished = "flow.run_finished" // the stage's run reached a final status
	JobMerge       = "flow.merge"        // check (and merge) the pull request of a merge stage
	JobResume      = "flow.resume"       // the ticket's last blocking question was answered
	JobStop        = "flow.stop"         // a person paused or cancelled the ticket
	JobTimeout     = "flow.timeout"      // a stage's run reached the stage's timeout
	JobRelease     = "flow.release"      // a pause ended or budget came back: release waiting flows
	JobKill        = "flow.kill"         // the kill switch: cancel every running stage
	JobClosePR     = "flow.close_pr"     // close the pull request of a cancelled ticket's flow
	// JobProviderWait: the provider limit a flow waits for has passed.
	JobProviderWait = "flow.provider_wait"
	// JobProviderHold: a provider limit was met: the flows whose runs of
	// that credential are still queued wait for the provider instead.
	JobProviderHold = "flow.provider_hold"
)

// stepKey is the dedupe key of a job of one step of a flow:
// flow:<flow>:<what>:<step>.
func stepKey(flowID, what string, step int) string {
	return "flow:" + flowID + ":" + what + ":" + strconv.Itoa(step)
}

// EnterArgs enter the stage of a flow's step.
type EnterArgs struct {
	FlowID string `json:"flow_id"`
	Step   int    `json:"step"`
}

// Kind implements job.Args.
func (EnterArgs) Kind() string { return JobEnter }

// DedupeKey implements job.Deduped: flow:<flow>:enter:<step>.
func (a EnterArgs) DedupeKey() string { return stepKey(a.FlowID, "enter", a.Step) }

// RunFinishedArgs take the outcome of a step's run that reached a final
// status.
type RunFinishedArgs struct {
	FlowID string `json:"flow_id"`
	RunID  string `json:"run_id"`
	Step   int    `json:"step"`
}

// Kind implements job.Args.
func (RunFinishedArgs) Kind() string { return JobRunFinished }

// DedupeKey implements job.Deduped: flow:<flow>:run_finished:<step>, so
// that enqueueing it again (the reconciler) is a no-op while one is pending
// or running.
func (a RunFinishedArgs) DedupeKey() string { return stepKey(a.FlowID, "run_finished", a.Step) }

// MergeArgs check the pull request of a merge stage; EnteredAt (unix ms),
// when the stage was entered, paces the checks.
type MergeArgs struct {
	FlowID    string `json:"flow_id"`
	Step      int    `json:"step"`
	EnteredAt int64  `json:"entered_at"`
}

// Kind implements job.Args.
func (MergeArgs) Kind() string { return JobMerge }

// DedupeKey implements job.Deduped: flow:<flow>:merge:<step>.
func (a MergeArgs) DedupeKey() string { return stepKey(a.FlowID, "merge", a.Step) }

// ResumeArgs resume the flow of a ticket whose last blocking question was
// answered.
type ResumeArgs struct {
	ItemID string `json:"item_id"`
}

// Kind implements job.Args.
func (ResumeArgs) Kind() string { return JobResume }

// DedupeKey implements job.Deduped: flow-resume:<ticket>.
func (a ResumeArgs) DedupeKey() string { return "flow-resume:" + a.ItemID }

// StopArgs stop the flow of a ticket a person paused or cancelled.
type StopArgs struct {
	ItemID string `json:"item_id"`
}

// Kind implements job.Args.
func (StopArgs) Kind() string { return JobStop }

// DedupeKey implements job.Deduped: flow-stop:<ticket>.
func (a StopArgs) DedupeKey() string { return "flow-stop:" + a.ItemID }

// TimeoutArgs enforce the timeout of a step's stage (due when it is up).
type TimeoutArgs struct {
	FlowID string `json:"flow_id"`
	Step   int    `json:"step"`
}

// Kind implements job.Args.
func (TimeoutArgs) Kind() string { return JobTimeout }

// DedupeKey implements job.Deduped: flow:<flow>:timeout:<step>.
func (a TimeoutArgs) DedupeKey() string { return stepKey(a.FlowID, "timeout", a.Step) }

// ReleaseArgs release the flows of a project ("": of every project) that
// wait for a pause or budget.
type ReleaseArgs struct {
	ProjectID string `json:"project_id"`
}

// Kind implements job.Args.
func (ReleaseArgs) Kind() string { return JobRelease }

// DedupeKey implements job.Deduped: flow-release:<project>.
func (a ReleaseArgs) DedupeKey() string { return "flow-release:" + a.ProjectID }

// KillArgs cancel every running stage (the kill switch).
type KillArgs struct{}

// Kind implements job.Args.
func (KillArgs) Kind() string { return JobKill }

// DedupeKey implements job.Deduped: flow-kill.
func (KillArgs) DedupeKey() string { return "flow-kill" }

// ClosePRArgs close the pull request a flow recorded, once its ticket was
// cancelled.
type ClosePRArgs struct {
	FlowID string `json:"flow_id"`
}

// Kind implements job.Args.
func (ClosePRArgs) Kind() string { return JobClosePR }

// DedupeKey implements job.Deduped: flow:<flow>:close_pr.
func (a ClosePRArgs) DedupeKey() string { return "flow:" + a.FlowID + ":close_pr" }

// ProviderWaitArgs run the stage of a flow waiting for the provider again
// once the limit has passed (queued to run then).
type ProviderWaitArgs struct {
	FlowID string `json:"flow_id"`
	Step   int    `json:"step"`
}

// Kind implements job.Args.
func (ProviderWaitArgs) Kind() string { return JobProviderWait }

// DedupeKey implements job.Deduped: flow:<flow>:provider_wait:<step>.
func (a ProviderWaitArgs) DedupeKey() string { return stepKey(a.FlowID, "provider_wait", a.Step) }

// ProviderHoldArgs make the flows whose queued runs use a credential that
// met a provider limit wait for the provider.
type ProviderHoldArgs struct {
	Credential string `json:"credential"`
}

// Kind implements job.Args.
func (ProviderHoldArgs) Kind() string { return JobProviderHold }

// DedupeKey implements job.Deduped: flow-provider-hold:<credential>.
func (a ProviderHoldArgs) DedupeKey() string { return "flow-provider-hold:" + a.Credential }

// Register installs the flow engine's job handlers.
func (s *Service) Register(r job.Registry) {
	job.Register(r, s.handleEnter)
	job.Register(r, s.handleRunFinished)
	job.Register(r, s.handleMerge)
	job.Register(r, s.handleResume)
	job.Register(r, s.handleStop)
	job.Register(r, s.handleTimeout)
	job.Register(r, s.handleRelease)
	job.Register(r, s.handleKill)
	job.Register(r, s.handleClosePR)
	job.Register(r, s.handleProviderWait)
	job.Register(r, s.handleProviderHold)
}

// OnRunFinished is the run package's finish hook (run.FinishHook): a run
// that reached a final status enqueues flow.run_finished for its flow, in
// the same batch.
func OnRunFinished(r run.Run) []job.Spec {
	return []job.Spec{job.New(RunFinishedArgs{FlowID: r.FlowID, RunID: r.ID, Step: r.Step})}
}

// Awaited is the step job a flow waits for.
type Awaited struct {
	Args job.Deduped // the job's arguments, with its kind and dedupe key
	What string      // what the step does, for reasons: "entering stage implement"
}

// ExpectedStep returns the step job flow f (as read) waits for: entering
// its stage (running, waiting for nothing), handling its run's finish
// (waiting for its run), checking its pull request (checks, review, a human
// merge), resuming after the answers (waiting for an answer), or running
// its stage again after a provider limit (waiting for the provider: the job
// snoozes until the flow's WaitUntil when it runs early). The job is
// due only once the run is final, or once no blocking question of the
// ticket is open: that is for the caller to read. ok=false: f waits for a
// person's approval, a pause or budget, or it has ended.
func ExpectedStep(f Flow) (Awaited, bool) {
	switch st := f.State(); {
	case st == State{Status: StatusRunning, Waiting: WaitNone}:
		return Awaited{Args: EnterArgs{FlowID: f.ID, Step: f.Step}, What: "entering stage " + f.Stage}, true
	case st == State{Status: StatusRunning, Waiting: WaitRun}:
		return Awaited{Args: RunFinishedArgs{FlowID: f.ID, RunID: f.RunID, Step: f.Step},
			What: "handling the finished session of stage " + f.Stage}, true
	case Accepts(st, InMergeState):
		return Awaited{Args: MergeArgs{FlowID: f.ID, Step: f.Step, EnteredAt: f.UpdatedAt.UnixMilli()},
			What: "checking the pull request of stage " + f.Stage}, true
	case st == State{Status: StatusWaiting, Waiting: WaitAnswer}:
		return Awaited{Args: ResumeArgs{ItemID: f.ItemID}, What: "resuming stage " + f.Stage + " after the answers"}, true
	case st == State{Status: StatusWaiting, Waiting: WaitProvider}:
		return Awaited{Args: ProviderWaitArgs{FlowID: f.ID, Step: f.Step}, What: "running stage " + f.Stage + " again after the provider's limit"}, true
	}
	return Awaited{}, false
}
