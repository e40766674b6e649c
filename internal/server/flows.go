package server

import (
	"context"
	"regexp"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/tracker"
)

// Flows serves a ticket's flow (spec pipelines.md "REST").
type Flows struct {
	F *flow.Service
	// Head reads the current head commit of a ticket's branch ("" when it
	// does not exist), for a decision that names the head it saw.
	Head func(ctx context.Context, it tracker.Item) (string, error)
}

// FlowView is GET /items/{item}/flow, field for field as the spec lists,
// plus attention: what the flow needs from a person beyond what it waits
// for, omitted when nothing — "no_runner" while its agent run has waited for
// a runner longer than [runs] unclaimed_after (flow.Attentions).
type FlowView struct {
	Ticket          string      `json:"ticket"`
	Pipeline        string      `json:"pipeline"`
	PipelineVersion int64       `json:"pipeline_version"`
	Stages          []StageView `json:"stages"`
	Stage           string      `json:"stage"`
	Iteration       int         `json:"iteration"`
	MaxIterations   int         `json:"max_iterations"`
	Status          string      `json:"status"`
	Waiting         string      `json:"waiting,omitempty"`
	Run             string      `json:"run,omitempty"`
	Outcome         string      `json:"outcome,omitempty"`
	Report          string      `json:"report,omitempty"`
	Attention       string      `json:"attention,omitempty"` // see FlowView's doc
	// BranchAhead: the commits the ticket's branch had ahead of the default
	// branch after the latest agent stage (omitted: not known yet).
	BranchAhead *int `json:"branch_ahead,omitempty"`
	// NothingToApprove: the flow waits for an approval on a branch with no
	// commit ahead of the default branch (the UI shows "nothing to
	// approve" instead of Approve).
	NothingToApprove bool      `json:"nothing_to_approve,omitempty"`
	StartedAt        time.Time `json:"started_at"`
	UpdatedAt        time.Time `json:"updated_at"`
	Version          int64     `json:"version"`
	// EscalatedAt: the approval the flow waits for was escalated to the
	// project's admins then, having waited longer than the project's
	// escalate_after (omitted: no approval waits, or not escalated).
	EscalatedAt *time.Time `json:"escalated_at,omitempty"`
	// Until: waiting for the provider (a rate limit, an overload or a spent
	// quota on the stage's credential), when the limit is expected to have
	// passed and the stage runs again by itself (omitted otherwise).
	Until *time.Time `json:"until,omitempty"`
}

// StageView is one stage of the pinned pipeline.
type StageView struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Kind string `json:"kind"`
}

// Decision is the body of approve and reject.
type Decision struct {
	// Head is the head commit of the ticket's branch the person saw (GET
	// /items/{item}/changes' head): another than the branch's current head
	// is refused with 409. Optional for API clients; the UI always sends it.
	Head    string `json:"head,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// Routes returns the flow endpoints.
func (h *Flows) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/items/{item}/flow", Perm: access.TrackerRead, Summary: "The ticket's flow (404 before it started)",
			Response: FlowView{}, Handle: h.get},
		{Method: "POST", Path: "/api/v1/items/{item}/flow/start", Perm: access.RunManage,
			Summary: "Start the pipeline of a ready ticket (409 when it is not ready, its flow is still active, or an open item blocks it or its epic, naming each)", Response: FlowView{}, Handle: h.start},
		{Method: "POST", Path: "/api/v1/items/{item}/flow/approve", Perm: access.TrackerWrite,
			Summary: "Approve the human stage the flow waits on (409 when it does not wait for an approval, or when head is not the branch's current head)", Request: Decision{}, OptionalBody: true, Response: FlowView{}, Handle: h.decide(true)},
		{Method: "POST", Path: "/api/v1/items/{item}/flow/reject", Perm: access.TrackerWrite,
			Summary: "Reject the human stage the flow waits on (409 when it does not wait for an approval, or when head is not the branch's current head)", Request: Decision{}, OptionalBody: true, Response: FlowView{}, Handle: h.decide(false)},
	}
}

// View renders a flow as the API shows it.
func View(it tracker.Item, f flow.Flow) FlowView {
	v := FlowView{Ticket: it.Key, Pipeline: f.Pipeline, PipelineVersion: f.PipelineVersion, Stages: []StageView{}, Stage: f.Stage,
		Iteration: f.Iteration, MaxIterations: f.MaxIterations, Status: f.Status, Waiting: f.Waiting, Run: f.RunID,
		Outcome: f.Outcome, Report: f.Report, Attention: f.Attention, BranchAhead: f.BranchAhead, StartedAt: f.StartedAt, UpdatedAt: f.UpdatedAt, Version: f.Version}
	v.EscalatedAt, v.Until = f.EscalatedAt, f.WaitUntil
	v.NothingToApprove = f.Status == flow.StatusWaiting && f.Waiting == flow.WaitApproval && f.BranchAhead != nil && *f.BranchAhead == 0
	for _, s := range f.Definition.Stages {
		v.Stages = append(v.Stages, StageView{ID: s.ID, Name: s.Name, Kind: s.Kind})
	}
	return v
}

func (h *Flows) get(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	f, ok, err := h.F.Latest(r.Context(), it.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apperr.New(apperr.NotFound, "%s has no flow: it has not started", it.Key)
	}
	return View(it, f), nil
}

func (h *Flows) start(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	f, err := h.F.Start(r.Context(), r.Principal.Actor(), it.ID)
	if err != nil {
		return nil, err
	}
	return View(it, f), nil
}

func (h *Flows) decide(approve bool) func(*Request) (any, error) {
	return func(r *Request) (any, error) {
		it, err := r.Item()
		if err != nil {
			return nil, err
		}
		var in Decision
		if r.ContentLength != 0 {
			if err := r.Decode(&in); err != nil {
				return nil, err
			}
		}
		var v apperr.Validator
		v.Check(len(in.Comment) <= 64<<10, "comment", "must be at most 65536 bytes")
		v.CheckErr("comment", text.Multiline(in.Comment))
		v.Check(in.Head == "" || shaRE.MatchString(in.Head), "head", "must be a commit id: 40 or 64 lowercase hexadecimal digits")
		if err := v.Err(); err != nil {
			return nil, err
		}
		d := flow.Decision{Approve: approve, Comment: in.Comment, Head: in.Head}
		if in.Head != "" {
			if d.CurrentHead, err = h.Head(r.Context(), it); err != nil {
				return nil, err
			}
		}
		f, err := h.F.Decide(r.Context(), r.Principal.Actor(), it, d)
		if err != nil {
			return nil, err
		}
		return View(it, f), nil
	}
}

// shaRE is a commit id (SHA-1 or SHA-256), as git prints it.
var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
