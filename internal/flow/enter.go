package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// flow.enter: entering the stage of a step.

// handleEnter enters the stage of a step: an agent stage creates its run,
// a human stage waits for an approval, a merge stage starts checking the
// pull request.
func (s *Service) handleEnter(ctx context.Context, _ *job.Job, p EnterArgs) error {
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InEnter) }
	return s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		stage, ok := f.Definition.Stage(f.Stage)
		if !ok {
			return nil, job.Permanent(fmt.Errorf("flow %s: stage %q is not in its pipeline", f.ID, f.Stage))
		}
		// While the project or platform is paused, a flow waits before
		// entering its next stage.
		if why, err := s.pauseReason(ctx, f.ProjectID); err != nil {
			return nil, err
		} else if why != "" {
			return s.wait(f, WaitPause, why, now), nil
		}
		// An agent stage starts only within budget.
		if stage.Kind == pipeline.KindAgent {
			v, err := s.gate(ctx, f)
			if err != nil {
				return nil, err
			}
			switch v.Kind {
			case budget.TicketSpent:
				q := fmt.Sprintf("%s: %s. Raise the project's ticket budget, then answer to run stage %s.", it.Key, v.Reason, f.Stage)
				return s.waitForAnswer(f, it, now, v.Reason, &q)
			case budget.DaySpent:
				return s.wait(f, WaitBudget, v.Reason, now), nil
			}
			// Nor into a provider limit its credential is known to be under.
			adapter := stage.AdapterOrDefault()
			if l, limited, err := s.knownLimit(ctx, adapter, now); err != nil {
				return nil, err
			} else if limited {
				return s.waitForProvider(f, l.Until, fmt.Sprintf("the provider of %s is limited until %s (met by run %s): stage %s does not start into it",
					adapter, l.Until.Format(time.RFC3339), l.RunID, f.Stage), now), nil
			}
		}
		next := f
		st := Entry(stage.Kind)
		next.Status, next.Waiting, next.RunID = st.Status, st.Waiting, ""
		started := &StageStarted{Kind: stage.Kind, Waiting: st.Waiting}
		var parts []transition.Transition // what entering the stage starts
		switch stage.Kind {
		case pipeline.KindAgent:
			k, err := s.stageKnowledge(ctx, f, it, stage, now)
			if err != nil || k.flag != nil {
				return k.flag, err // never started without its entries
			}
			r, err := s.newRun(ctx, f, it, stage, k.entries, now)
			if err != nil {
				return nil, err
			}
			next.RunID = r.ID
			started.Run = r.ID
			timeout := job.New(TimeoutArgs{FlowID: f.ID, Step: f.Step}).At(now.Add(stage.Timeout()))
			parts = append(parts, run.Create(r, System, now), transition.Transition{Jobs: []job.Spec{timeout}})
		case pipeline.KindPlatform:
			// A new entry finds its pull request afresh (the forge adopts
			// the open one, or one merged or closed at the branch's head).
			next.PullRequest = nil
			parts = append(parts, transition.Transition{Jobs: []job.Spec{mergeJob(f, now)}})
		}
		t := &transition.Transition{Events: []event.Event{flowEvent(System, f, started)}}
		return t.Add(parts...).Add(transition.Transition{Guarded: []store.Statement{update(f, next, now)}}), nil
	})
}

// Artifacts are what a run's prompt is built from.
type Artifacts struct {
	Ticket            TicketArtifact     `json:"ticket"`
	Branch            string             `json:"branch"`
	PreviousReport    *ReportArtifact    `json:"previous_report,omitempty"`
	AnsweredQuestions []QuestionArtifact `json:"answered_questions"`
	// Knowledge are the entries the stage names, as fetched when the run
	// was created.
	Knowledge []KnowledgeArtifact `json:"knowledge,omitempty"`
}

// TicketArtifact is the ticket as the agent sees it.
type TicketArtifact struct {
	Key                string `json:"key"`
	Type               string `json:"type"`
	Title              string `json:"title"`
	Description        string `json:"description"`
	AcceptanceCriteria string `json:"acceptance_criteria"`
}

// ReportArtifact is the previous stage's report.
type ReportArtifact struct {
	Stage   string `json:"stage"`
	Outcome string `json:"outcome"`
	Report  string `json:"report"`
}

// QuestionArtifact is an answered question handed over.
type QuestionArtifact struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// Answered returns the answered questions among qs, in their order, as
// a run's artifacts hand them over (never nil).
func Answered(qs []tracker.Question) []QuestionArtifact {
	out := []QuestionArtifact{}
	for _, q := range qs {
		if q.Answer != nil {
			out = append(out, QuestionArtifact{Question: q.Text, Answer: *q.Answer})
		}
	}
	return out
}

// Branch is the branch a ticket's work happens on.
func Branch(itemKey string) string { return "ballet/" + itemKey }

func (s *Service) newRun(ctx context.Context, f Flow, it tracker.Item, stage pipeline.Stage, knowledge []KnowledgeArtifact, now time.Time) (run.Run, error) {
	a := Artifacts{Ticket: TicketArtifact{Key: it.Key, Type: it.Type, Title: it.Title, Description: it.Description, AcceptanceCriteria: it.AcceptanceCriteria},
		Branch: Branch(it.Key), AnsweredQuestions: []QuestionArtifact{}, Knowledge: knowledge}
	if f.Outcome != "" || f.Report != "" {
		a.PreviousReport = &ReportArtifact{Stage: f.OutcomeStage, Outcome: f.Outcome, Report: f.Report}
	}
	qs, err := s.Tracker.ListQuestions(ctx, it.ID)
	if err != nil {
		return run.Run{}, err
	}
	a.AnsweredQuestions = Answered(qs)
	artifacts, _ := json.Marshal(a)
	skills := stage.Skills
	if skills == nil {
		skills = []string{}
	}
	return run.Run{ID: transition.NewID(), OrganizationID: f.OrganizationID, ProjectID: f.ProjectID, ItemID: f.ItemID, FlowID: f.ID,
		Stage: stage.ID, Iteration: f.Iteration, Step: f.Step, Adapter: stage.AdapterOrDefault(), StageModel: stage.Model,
		Instructions: stage.Instructions, Skills: skills, Artifacts: artifacts, Status: run.StatusQueued,
		CreatedAt: now, UpdatedAt: now, Version: 1}, nil
}
