// Package flow runs a ticket through its pipeline (spec pipelines.md
// "Running tickets"). The state machine is pure code (machine.go); every
// transition is one batch: the flow's optimistic update and guard, its
// event, and the jobs it causes. Each step is a durable job with a dedupe
// key (enter stage, handle finished run, check merge, resume, stop), and
// every handler is idempotent: it re-reads the flow and does nothing when
// the step it was queued for has passed.
package flow

import (
	"fmt"

	"github.com/ballet/ballet/internal/pipeline"
)

// Statuses (spec): running while Ballet works a stage (an agent session,
// entering a stage, waiting for checks), waiting while a human (or budget,
// or a pause) must act, and the three terminal ones.
const (
	StatusRunning = "running"
	StatusWaiting = "waiting"
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusStopped = "stopped"
)

// What a flow waits for.
const (
	WaitNone     = ""
	WaitRun      = "run"
	WaitApproval = "approval"
	WaitAnswer   = "answer"
	WaitChecks   = "checks"
	WaitReview   = "review"
	WaitMerge    = "merge"
	WaitBudget   = "budget"
	WaitPause    = "pause"
	WaitProvider = "provider" // a provider limit (rate limit, overload, quota) on the stage's credential
)

// Inputs drive the machine.
const (
	InEnter       = "enter"        // the enter-stage job runs
	InRunFinished = "run_finished" // the stage's run reached a final status
	InApprove     = "approve"      // a human approved the human stage
	InReject      = "reject"       // a human rejected it
	InAnswered    = "answered"     // the ticket's last blocking question was answered
	InMergeState  = "merge_state"  // a check of the pull request
	InStop        = "stop"         // the ticket was paused or cancelled
	InRelease     = "release"      // the pause ended or budget came back
	InLimitPassed = "limit_passed" // the provider limit the flow waited for has passed
)

// Inputs lists every input, for table tests.
var Inputs = []string{InEnter, InRunFinished, InApprove, InReject, InAnswered, InMergeState, InStop, InRelease, InLimitPassed}

// State is the part of a flow the machine decides on.
type State struct {
	Status  string
	Waiting string
}

// States lists every reachable state, for table tests.
var States = []State{
	{StatusRunning, WaitNone}, {StatusRunning, WaitRun}, {StatusRunning, WaitChecks},
	{StatusWaiting, WaitApproval}, {StatusWaiting, WaitAnswer}, {StatusWaiting, WaitReview}, {StatusWaiting, WaitMerge},
	{StatusWaiting, WaitBudget}, {StatusWaiting, WaitPause}, {StatusWaiting, WaitProvider},
	{StatusDone, WaitNone}, {StatusFailed, WaitNone}, {StatusStopped, WaitNone},
}

// Active reports whether a flow in this status may still change.
func Active(status string) bool { return status == StatusRunning || status == StatusWaiting }

// Accepts reports whether the machine takes input in state s. Anything it
// does not accept is a no-op for jobs (they came late) and a 409 for
// people.
func Accepts(s State, input string) bool {
	switch input {
	case InStop:
		return Active(s.Status)
	case InEnter:
		return s == State{StatusRunning, WaitNone}
	case InRunFinished:
		return s == State{StatusRunning, WaitRun}
	case InApprove, InReject:
		return s == State{StatusWaiting, WaitApproval}
	case InAnswered:
		return s == State{StatusWaiting, WaitAnswer}
	case InMergeState:
		return s == State{StatusRunning, WaitChecks} || s == State{StatusWaiting, WaitReview} || s == State{StatusWaiting, WaitMerge}
	case InRelease:
		return s == State{StatusWaiting, WaitBudget} || s == State{StatusWaiting, WaitPause}
	case InLimitPassed:
		return s == State{StatusWaiting, WaitProvider}
	}
	return false
}

// Entry is where entering a stage leaves the flow.
func Entry(kind string) State {
	switch kind {
	case pipeline.KindAgent:
		return State{StatusRunning, WaitRun}
	case pipeline.KindHuman:
		return State{StatusWaiting, WaitApproval}
	default: // platform merge
		return State{StatusRunning, WaitChecks}
	}
}

// MergeWait is the state for what a merge stage waits for.
func MergeWait(waiting string) State {
	if waiting == WaitChecks {
		return State{StatusRunning, WaitChecks} // checks occupy a slot
	}
	return State{StatusWaiting, waiting} // review, merge: a human acts
}

// Move kinds: where a finished stage leads.
const (
	MoveNext     = "next"     // another stage (a new iteration when it goes back)
	MoveDone     = "done"     // $done: flow and ticket done
	MoveFailed   = "failed"   // $failed: flow failed, ticket paused
	MoveQuestion = "question" // $question or the iteration limit: ask and wait for an answer
)

// Move is the decision after a stage ended with an outcome.
type Move struct {
	Kind      string
	Stage     string // MoveNext: the next stage
	Iteration int    // MoveNext: its iteration
	Reason    string // why, for events and the question
}

// Advance decides where outcome leads from stage in iteration: the
// pipeline's next target; going back to an earlier (or the same) stage
// starts a new iteration, and exceeding max_iterations raises a question.
func Advance(def pipeline.Definition, stage string, iteration int, outcome string) (Move, error) {
	target, err := def.Target(stage, outcome)
	if err != nil {
		return Move{}, fmt.Errorf("stage %s outcome %s: %w", stage, outcome, err)
	}
	switch target {
	case pipeline.TargetDone:
		return Move{Kind: MoveDone, Reason: fmt.Sprintf("stage %s ended %s", stage, outcome)}, nil
	case pipeline.TargetFailed:
		return Move{Kind: MoveFailed, Reason: fmt.Sprintf("stage %s ended %s, which fails the pipeline", stage, outcome)}, nil
	case pipeline.TargetQuestion:
		return Move{Kind: MoveQuestion, Reason: fmt.Sprintf("stage %s ended %s", stage, outcome)}, nil
	}
	from, to := def.Index(stage), def.Index(target)
	if to < 0 {
		return Move{}, fmt.Errorf("stage %s outcome %s: target %q is not a stage", stage, outcome, target)
	}
	next := iteration
	if to <= from {
		next++
		if next > def.MaxIter() {
			return Move{Kind: MoveQuestion, Reason: fmt.Sprintf("stage %s ended %s and would start iteration %d of at most %d", stage, outcome, next, def.MaxIter())}, nil
		}
	}
	return Move{Kind: MoveNext, Stage: target, Iteration: next, Reason: fmt.Sprintf("stage %s ended %s", stage, outcome)}, nil
}
