package server

import (
	"net/http"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/tracker"
)

// Runs serves the runner protocol and the runs of a ticket. Runner routes
// (/runners…) take only runner tokens: any other credential gets 403, and
// a runner registered by another token is not found. Run routes
// (/runs/{run}/…) take only the run token of that run: any other kind of
// credential gets 403, the token of another run 404. Humans and API tokens
// read runs with tracker.read.
type Runs struct {
	S      *run.Service
	Skills *skill.Service
}

// RunnerRegister is the body of POST /runners.
type RunnerRegister struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// ReportIn is the body of POST /runs/{run}/report: the session's stage
// report.
type ReportIn struct {
	Outcome string `json:"outcome"` // done, failed or blocked
	Summary string `json:"summary"`
}

// FinishIn is the body of POST /runs/{run}/finish: how the session ended.
type FinishIn struct {
	ExitStatus *int       `json:"exit_status"` // required
	Usage      *run.Usage `json:"usage,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// RunList is the body of GET /items/{item}/runs.
type RunList struct {
	Runs []run.Run `json:"runs"`
}

// LeaseRequest is the optional body of POST /runners/{runner}/lease.
type LeaseRequest struct {
	WaitSeconds int `json:"wait_seconds,omitempty"` // 0–60: how long to wait for a run
}

// noRun answers a lease that found nothing: 204, no body.
type noRun struct{}

// HTTPStatus is the status of an empty lease.
func (noRun) HTTPStatus() int { return http.StatusNoContent }

// Routes returns the run endpoints.
func (h *Runs) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/runners", Perm: run.PermRunner, Summary: "Register a runner (runner tokens; the runner is bound to the token)",
			Request: RunnerRegister{}, Response: run.Runner{}, Status: http.StatusCreated, Handle: h.register},
		{Method: "POST", Path: "/api/v1/runners/{runner}/lease",
			Perm:    run.PermRunner,
			Summary: "Lease the oldest queued run, waiting up to wait_seconds (0–60) for one: 200 with the run and its run token (shown once), 204 when none came",
			Request: LeaseRequest{}, OptionalBody: true, Response: run.Leased{}, Also: []int{http.StatusNoContent}, Hold: run.MaxLeaseWait, Handle: h.lease},
		{Method: "POST", Path: "/api/v1/runners/{runner}/heartbeat", Perm: run.PermRunner, Summary: "Record that the runner is alive",
			Response: run.Runner{}, Handle: h.runnerHeartbeat},
		{Method: "POST", Path: "/api/v1/runs/{run}/heartbeat", Perm: run.PermRun,
			Summary: "Record that the run's session is alive; cancelled: true asks it to stop and finish", Response: run.HeartbeatReply{}, Handle: h.heartbeat},
		{Method: "GET", Path: "/api/v1/runs/{run}/skills", Perm: run.PermRun,
			Summary:  "The project skills the run's session receives (the stage's allowed skills; all when it names none)",
			Response: SkillList{}, Handle: h.skills},
		{Method: "POST", Path: "/api/v1/runs/{run}/report", Perm: run.PermRun,
			Summary: "Submit the stage report: outcome done, failed or blocked, and a summary (a repeat is a no-op; a different second report 409)",
			Request: ReportIn{}, Response: run.Run{}, Handle: h.report},
		{Method: "POST", Path: "/api/v1/runs/{run}/questions", Perm: run.PermRun, Summary: "Ask a question on the run's ticket (blocking or not)",
			Request: QuestionAsk{}, Response: tracker.Question{}, Status: http.StatusCreated, Handle: h.ask},
		{Method: "POST", Path: "/api/v1/runs/{run}/finish", Perm: run.PermRun,
			Summary: "End the run with the session's exit status, usage and error; revokes the run token (finishing a finished run is a no-op)",
			Request: FinishIn{}, Response: run.Run{}, Handle: h.finish},
		{Method: "GET", Path: "/api/v1/runs/{run}", Perm: access.TrackerRead, Summary: "Get a run",
			Response: run.Run{}, Handle: h.get},
		{Method: "GET", Path: "/api/v1/items/{item}/runs", Perm: access.TrackerRead, Summary: "List a ticket's runs, oldest first",
			Response: RunList{}, Handle: h.list},
	}
}

// asRunner lets only runner tokens through.
func (h *Runs) asRunner(r *Request) error {
	if err := run.AuthorizeRunner(r.Principal); err != nil {
		return err
	}
	r.Checked() // the scope is the caller's own runner, looked up by its token
	return nil
}

// asRun lets only the path run's own run token through.
func (h *Runs) asRun(r *Request) (string, error) {
	id := r.PathValue("run")
	if err := run.AuthorizeRun(r.Principal, id); err != nil {
		return "", err
	}
	r.Checked() // the token is scoped to exactly this run
	return id, nil
}

// decodeOptional decodes a body that may be absent.
func decodeOptional(r *Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return r.Decode(v)
}

func (h *Runs) register(r *Request) (any, error) {
	if err := h.asRunner(r); err != nil {
		return nil, err
	}
	var in RunnerRegister
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.RegisterRunner(r.Context(), r.Principal, run.RunnerInput(in))
}

func (h *Runs) lease(r *Request) (any, error) {
	if err := h.asRunner(r); err != nil {
		return nil, err
	}
	var in LeaseRequest
	if err := decodeOptional(r, &in); err != nil {
		return nil, err
	}
	if max := int(run.MaxLeaseWait / time.Second); in.WaitSeconds < 0 || in.WaitSeconds > max {
		return nil, apperr.Fields([]apperr.FieldError{{Field: "wait_seconds", Message: "must be from 0 to 60"}})
	}
	l, ok, err := h.S.Lease(r.Context(), r.Principal, r.PathValue("runner"), time.Duration(in.WaitSeconds)*time.Second)
	if err != nil {
		return nil, err
	}
	if !ok {
		return noRun{}, nil
	}
	return l, nil
}

func (h *Runs) runnerHeartbeat(r *Request) (any, error) {
	if err := h.asRunner(r); err != nil {
		return nil, err
	}
	return h.S.RunnerHeartbeat(r.Context(), r.Principal, r.PathValue("runner"))
}

func (h *Runs) heartbeat(r *Request) (any, error) {
	id, err := h.asRun(r)
	if err != nil {
		return nil, err
	}
	return h.S.Heartbeat(r.Context(), r.Principal, id)
}

func (h *Runs) skills(r *Request) (any, error) {
	id, err := h.asRun(r)
	if err != nil {
		return nil, err
	}
	rn, err := h.S.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	sk, err := h.Skills.ForRun(r.Context(), rn.ProjectID, rn.Skills)
	if sk == nil {
		sk = []skill.Skill{}
	}
	return SkillList{Skills: sk}, err
}

func (h *Runs) report(r *Request) (any, error) {
	id, err := h.asRun(r)
	if err != nil {
		return nil, err
	}
	var in ReportIn
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Report(r.Context(), r.Principal, id, run.ReportInput(in))
}

func (h *Runs) ask(r *Request) (any, error) {
	id, err := h.asRun(r)
	if err != nil {
		return nil, err
	}
	var in QuestionAsk
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.AskQuestion(r.Context(), r.Principal, id, in.Text, in.Blocking)
}

func (h *Runs) finish(r *Request) (any, error) {
	id, err := h.asRun(r)
	if err != nil {
		return nil, err
	}
	var in FinishIn
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Finish(r.Context(), r.Principal, id, run.FinishInput(in))
}

func (h *Runs) get(r *Request) (any, error) {
	id := r.PathValue("run")
	rn, err := h.S.Get(r.Context(), id)
	if err := r.Visible("run", id, err, rn.OrganizationID, rn.ProjectID); err != nil {
		return nil, err
	}
	return rn, nil
}

func (h *Runs) list(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	runs, err := h.S.List(r.Context(), it.ID)
	if err != nil {
		return nil, err
	}
	return RunList{Runs: runs}, nil
}
