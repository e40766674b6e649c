package server

import (
	"slices"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// Unattended serves what a person checks after walking away: budgets and
// the flows that need them.
type Unattended struct {
	T       *tracker.Service
	Tenancy *tenancy.Service
	F       *flow.Service
	B       *budget.Service
}

// Amount is a budget figure: limit (null: none), spent and remaining, with
// the usage behind the spend.
type Amount struct {
	LimitUSD     *budget.Dollars `json:"limit_usd"`
	SpentUSD     budget.Spent    `json:"spent_usd"`
	RemainingUSD *budget.Dollars `json:"remaining_usd"`
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	Runs         int64           `json:"runs"`
}

// ProjectBudget is GET /projects/{project}/budget.
type ProjectBudget struct {
	Project      string          `json:"project"`
	PerTicketUSD *budget.Dollars `json:"per_ticket_usd"`
	Today        Amount          `json:"today"`
	Day          string          `json:"day"`      // the budget day, YYYY-MM-DD
	Timezone     string          `json:"timezone"` // its time zone
}

// ItemBudget is GET /items/{item}/budget.
type ItemBudget struct {
	Ticket string `json:"ticket"`
	Amount
}

// FlowList is GET /projects/{project}/flows.
type FlowList struct {
	Flows []FlowView `json:"flows"`
}

// Routes returns the endpoints.
func (h *Unattended) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/projects/{project}/budget", Perm: access.TrackerRead,
			Summary: "The project's budgets: per ticket, and today's spend against the daily limit", Response: ProjectBudget{}, Handle: h.projectBudget},
		{Method: "GET", Path: "/api/v1/items/{item}/budget", Perm: access.TrackerRead,
			Summary: "A ticket's spend against the project's per-ticket budget", Response: ItemBudget{}, Handle: h.itemBudget},
		{Method: "GET", Path: "/api/v1/projects/{project}/flows", Perm: access.TrackerRead,
			Summary: "A project's flows, newest first; filter by status, waiting and attention (no_runner) to see who needs you", Response: FlowList{}, Handle: h.flows},
	}
}

// amount is exact: micro-USD throughout, no float rounding.
func amount(limit *budget.Dollars, u budget.Usage) Amount {
	a := Amount{LimitUSD: limit, SpentUSD: budget.Spent(u.CostMicros), InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Runs: u.Runs}
	if limit != nil {
		r := max(*limit-budget.Dollars(a.SpentUSD), 0)
		a.RemainingUSD = &r
	}
	return a
}

func (h *Unattended) projectBudget(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	now := h.B.Clock.Now()
	spent, err := h.B.DayUsage(r.Context(), p.ID, now)
	if err != nil {
		return nil, err
	}
	start, _ := h.B.Day(now)
	return ProjectBudget{Project: p.Key, PerTicketUSD: p.Budgets.PerTicketUSD, Today: amount(p.Budgets.PerDayUSD, spent),
		Day: start.Format(time.DateOnly), Timezone: start.Location().String()}, nil
}

func (h *Unattended) itemBudget(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	p, err := h.Tenancy.FindProject(r.Context(), it.ProjectID)
	if err != nil {
		return nil, err
	}
	spent, err := h.B.TicketUsage(r.Context(), it.ID)
	if err != nil {
		return nil, err
	}
	return ItemBudget{Ticket: it.Key, Amount: amount(p.Budgets.PerTicketUSD, spent)}, nil
}

var flowStatuses = []string{flow.StatusRunning, flow.StatusWaiting, flow.StatusDone, flow.StatusFailed, flow.StatusStopped}
var flowWaits = []string{flow.WaitRun, flow.WaitApproval, flow.WaitAnswer, flow.WaitChecks, flow.WaitReview, flow.WaitMerge, flow.WaitBudget, flow.WaitPause, flow.WaitProvider}

func (h *Unattended) flows(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	var v apperr.Validator
	status, waiting, attention := q.Get("status"), q.Get("waiting"), q.Get("attention")
	v.Check(status == "" || slices.Contains(flowStatuses, status), "status", "%q is not one of %v", status, flowStatuses)
	v.Check(waiting == "" || slices.Contains(flowWaits, waiting), "waiting", "%q is not one of %v", waiting, flowWaits)
	v.Check(attention == "" || slices.Contains(flow.Attentions, attention), "attention", "%q is not one of %v", attention, flow.Attentions)
	if err := v.Err(); err != nil {
		return nil, err
	}
	limit, err := r.QueryInt("limit", 100, 1, 1000)
	if err != nil {
		return nil, err
	}
	fs, err := h.F.List(r.Context(), p.ID, flow.ListFilter{Status: status, Waiting: waiting, Attention: attention, Limit: int(limit)})
	if err != nil {
		return nil, err
	}
	out := FlowList{Flows: []FlowView{}}
	for _, f := range fs {
		it, err := h.T.FindItem(r.Context(), f.ItemID)
		if err != nil {
			return nil, err
		}
		out.Flows = append(out.Flows, View(it, f))
	}
	return out, nil
}
