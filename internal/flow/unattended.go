package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Unattended operation (spec pipelines.md "Budgets", "Project and platform
// pauses"): what keeps a stage from starting, and waiting without a human.

// pauseReason says why new stages may not start in a project now ("" when
// they may).
func (s *Service) pauseReason(ctx context.Context, projectID string) (string, error) {
	pl, err := s.Tenancy.GetPlatform(ctx)
	if err != nil {
		return "", err
	}
	if pl.Paused {
		return "the platform is paused (kill switch)", nil
	}
	p, err := s.Tenancy.FindProject(ctx, projectID)
	if err != nil {
		return "", err
	}
	if p.Paused {
		return fmt.Sprintf("project %s is paused", p.Key), nil
	}
	return "", nil
}

// limits returns the project's budgets.
func (s *Service) limits(ctx context.Context, projectID string) (budget.Limits, error) {
	p, err := s.Tenancy.FindProject(ctx, projectID)
	if err != nil {
		return budget.Limits{}, err
	}
	return budget.Limits{PerTicket: (*int64)(p.Budgets.PerTicketUSD), PerDay: (*int64)(p.Budgets.PerDayUSD)}, nil
}

// gate checks the budget of an agent stage about to start.
func (s *Service) gate(ctx context.Context, f Flow) (budget.Verdict, error) {
	if s.Budget == nil {
		return budget.Verdict{Kind: budget.OK}, nil
	}
	l, err := s.limits(ctx, f.ProjectID)
	if err != nil {
		return budget.Verdict{}, err
	}
	v, _, err := s.Budget.Gate(ctx, l, f.ProjectID, f.ItemID)
	return v, err
}

// wait makes the flow wait for budget or a pause (no human needed: it is
// released without one).
func (s *Service) wait(f Flow, waiting, reason string, now time.Time) *transition.Transition {
	next := f
	next.Status, next.Waiting, next.RunID = StatusWaiting, waiting, ""
	return &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, &FlowWaiting{Waiting: waiting, Reason: reason})},
		Guarded: []store.Statement{update(f, next, now)},
	}
}

// BudgetVerdict says whether an agent stage of ticket itemID could start
// now within its project's budgets (what a start's first agent stage would
// meet): schedule.BudgetGate, for the start holds a ticket's read shows.
func (s *Service) BudgetVerdict(ctx context.Context, projectID, itemID string) (budget.Verdict, error) {
	return s.gate(ctx, Flow{ProjectID: projectID, ItemID: itemID})
}
