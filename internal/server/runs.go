package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// Runs serves the runner protocol and the runs of a ticket. Runner routes
// (/runners…) and the runner's routes of a run it leased (heartbeat, log,
// usage, finish) take only runner tokens: any other credential gets 403
// (the agent session's run token included), and a runner or run of
// another token is not found. The agent session's routes of a run (skills,
// report, questions) take only the run token of that run: any other kind
// of credential gets 403, the token of another run 404. Each resolves the
// run once (heldRun, sessionRun) and hands the domain the run and an
// actor. Humans and API tokens read runs with tracker.read.
type Runs struct {
	S      *run.Service
	Skills *skill.Service
	// Orgs lists the organizations a person has a role in (for an
	// organization admin's GET /runners).
	Orgs OrgLister
}

// OrgLister lists a subject's organizations (tenancy.Service).
type OrgLister interface {
	ListOrganizations(ctx context.Context, subject string, all bool) ([]tenancy.Organization, error)
}

// RunnerList is the body of GET /runners.
type RunnerList struct {
	Runners []run.Runner `json:"runners"`
}

// ReportIn is the body of POST /runs/{run}/report: the session's stage
// report.
type ReportIn struct {
	Outcome string `json:"outcome"` // done, failed or blocked
	Summary string `json:"summary"`
}

// RunList is the body of GET /items/{item}/runs.
type RunList struct {
	Runs []run.Run `json:"runs"`
}

// noRun answers a lease that found nothing: 204, no body.
type noRun struct{}

// HTTPStatus is the status of an empty lease.
func (noRun) HTTPStatus() int { return http.StatusNoContent }

// Routes returns the run endpoints.
func (h *Runs) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/runners", Perm: run.PermRunner,
			Summary: "Register a runner (runner tokens; the runner is bound to the token; registering a name the token registered before updates that runner)",
			Request: runproto.RunnerRegister{}, Response: run.Runner{}, Status: http.StatusCreated, Handle: h.register},
		{Method: "GET", Path: "/api/v1/runners", Perm: access.ProjectUpdate,
			Summary: "List the runners: liveness, capacity, adapters, problem and sessions (platform admins: everything; organization admins: " +
				"only the sessions of their organizations' tickets, without token and labels)",
			Response: RunnerList{}, Handle: h.listRunners},
		{Method: "POST", Path: "/api/v1/runners/{runner}/drain", Perm: access.PlatformAdmin,
			Summary: "Drain a runner (platform admins): it leases no new run until undrained, the runs it holds finish; event runner.drained " +
				"(draining a drained runner changes nothing)",
			Response: run.Runner{}, Handle: h.drain(true)},
		{Method: "POST", Path: "/api/v1/runners/{runner}/undrain", Perm: access.PlatformAdmin,
			Summary:  "Put a drained runner back in service (platform admins); event runner.undrained (a runner not drained stays as it is)",
			Response: run.Runner{}, Handle: h.drain(false)},
		{Method: "POST", Path: "/api/v1/runners/{runner}/lease",
			Perm: run.PermRunner,
			Summary: "Lease the oldest queued run of the given adapters, waiting up to wait_seconds (0–60) for one: 200 with the run, its run token " +
				"(shown once) and its session, 204 when none came (always for a runner that drains or has a problem)",
			Request: runproto.LeaseRequest{}, OptionalBody: true, Response: run.Leased{}, Also: []int{http.StatusNoContent}, Hold: run.MaxLeaseWait, Handle: h.lease},
		{Method: "POST", Path: "/api/v1/runners/{runner}/heartbeat", Perm: run.PermRunner,
			Summary: "Record that the runner is alive, what it runs, whether it drains and its problem; cancel names the sessions to stop at once",
			Request: runproto.RunnerHeartbeatIn{}, OptionalBody: true, Response: run.RunnerBeat{}, Handle: h.runnerHeartbeat},
		{Method: "POST", Path: "/api/v1/runs/{run}/heartbeat", Perm: run.PermRunner,
			Summary:  "Record that the run's session is alive (the runner token whose runner leased it); cancelled: true asks it to stop and finish",
			Response: runproto.HeartbeatReply{}, Handle: h.heartbeat},
		{Method: "GET", Path: "/api/v1/runs/{run}/skills", Perm: run.PermRun,
			Summary:  "The project skills the run's session receives (the stage's allowed skills; all when it names none)",
			Response: SkillList{}, Also: []int{http.StatusConflict}, Handle: h.skills},
		{Method: "POST", Path: "/api/v1/runs/{run}/report", Perm: run.PermRun,
			Summary: "Submit the stage report: outcome done, failed or blocked, and a summary (a repeat is a no-op; a different second report 409)",
			Request: ReportIn{}, Response: run.Run{}, Handle: h.report},
		{Method: "POST", Path: "/api/v1/runs/{run}/questions", Perm: run.PermRun, Summary: "Ask a question on the run's ticket (blocking or not)",
			Request: QuestionAsk{}, Response: tracker.Question{}, Status: http.StatusCreated, Handle: h.ask},
		{Method: "POST", Path: "/api/v1/runs/{run}/log", Perm: run.PermRunner,
			Summary: "Append the session's output (the runner token whose runner leased the run) (raw bytes, at most 1 MiB) to the run's log at byte offset (query): a repeat is a no-op, a gap 409 naming the stored size; past [runs] log_limit the log is marked truncated and chunks are dropped",
			RawBody: "application/octet-stream", MaxBody: runproto.MaxLogChunk, Response: runproto.LogAppended{}, Handle: h.appendLog},
		{Method: "GET", Path: "/api/v1/runs/{run}/log", Perm: access.TrackerRead,
			Summary: "Read a run's log from byte offset (query, default 0) on, at most 1 MiB: data, next_offset, truncated, finished " +
				"(410 once [retention] run_logs has passed since the run ended: the log is deleted)",
			Response: run.LogPage{}, Also: []int{http.StatusGone}, Handle: h.readLog},
		{Method: "GET", Path: "/api/v1/runs/{run}/transcript", Perm: access.TrackerRead,
			Summary: "A run's session as a transcript, parsed from its log by its adapter's format: entries of kind text, tool_call (tool, input " +
				"cut at 2 KiB), tool_result (a summary cut at 1 KiB), question, report and usage, each with its time; at most 2,000 entries and " +
				"2 MiB of text (truncated: more followed); 410 once the run's log is deleted ([retention] run_logs)",
			Response: run.TranscriptPage{}, Also: []int{http.StatusGone}, Handle: h.transcript},
		{Method: "POST", Path: "/api/v1/runs/{run}/usage", Perm: run.PermRunner,
			Summary: "Report the session's usage so far (the runner token whose runner leased the run): a running total, counted whatever the run's status " +
				"(per figure the larger of the recorded and the reported; event run.usage_recorded when it grows)",
			Request: runproto.Usage{}, Response: run.Run{}, Handle: h.usage},
		{Method: "POST", Path: "/api/v1/runs/{run}/finish", Perm: run.PermRunner,
			Summary: "End the run with the session's exit status, usage and error (the runner token whose runner leased it; the run token is revoked; " +
				"a repeat answers the finished run, and counts usage beyond what was recorded)",
			Request: runproto.FinishIn{}, Response: run.Run{}, Handle: h.finish},
		{Method: "GET", Path: "/api/v1/runs/{run}", Perm: access.TrackerRead, Summary: "Get a run",
			Response: run.Run{}, Handle: h.get},
		{Method: "GET", Path: "/api/v1/items/{item}/runs", Perm: access.TrackerRead, Summary: "List a ticket's runs, oldest first",
			Response: RunList{}, Handle: h.list},
	}
}

// runnerCaller resolves the credential of a runner route: a runner token,
// or 403 for any other credential (a run token included: the agent
// session holds one).
func runnerCaller(r *Request) (run.RunnerCaller, error) {
	p := r.Principal
	if p.TokenKind != auth.KindRunner {
		return run.RunnerCaller{}, apperr.New(apperr.Forbidden, "only a runner token may do this")
	}
	r.Checked() // the scope is the caller's own runners and their runs, looked up by its token
	return run.RunnerCaller{TokenID: p.TokenID, Actor: p.Actor()}, nil
}

// heldRun resolves the path's {run} for a runner-only route (heartbeat,
// log, usage, finish), once: the runner token whose runner leased it, 403
// for any other kind of credential (the agent's run token included), 404
// for a run no runner of this token leased.
func (h *Runs) heldRun(r *Request) (run.RunnerCaller, run.Run, error) {
	c, err := runnerCaller(r)
	if err != nil {
		return c, run.Run{}, err
	}
	rn, err := h.S.Held(r.Context(), c, r.PathValue("run"))
	return c, rn, err
}

// sessionRun resolves the path's {run} for a route of the agent session
// (skills, report, questions), once: only the run token of that run (403
// for any other kind of credential, 404 for another run's token), and the
// run must be open to its session (run.Service.SessionRun).
func (h *Runs) sessionRun(r *Request) (run.Run, error) {
	id := r.PathValue("run")
	if err := authorizeRun(r.Principal, id); err != nil {
		return run.Run{}, err
	}
	r.Checked() // the token is scoped to exactly this run
	return h.S.SessionRun(r.Context(), id)
}

// authorizeRun lets only the run token of runID through: 403 for any
// other kind of credential, 404 for the token of another run (a run token
// sees no run but its own).
func authorizeRun(p *auth.Principal, runID string) error {
	if p.TokenKind != auth.KindRun {
		return apperr.New(apperr.Forbidden, "only the run's own run token may do this")
	}
	if id, _ := run.TokenRun(p); id != runID {
		return apperr.New(apperr.NotFound, "run %q not found", runID)
	}
	return nil
}

// decodeOptional decodes a body that may be absent.
func decodeOptional(r *Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return r.Decode(v)
}

func (h *Runs) register(r *Request) (any, error) {
	c, err := runnerCaller(r)
	if err != nil {
		return nil, err
	}
	var in runproto.RunnerRegister
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.RegisterRunner(r.Context(), c, run.RunnerInput{Name: in.Name, Labels: in.Labels, Capacity: in.Capacity,
		Adapters: in.Adapters, Version: in.Version, Problem: in.Problem, Sessions: in.Sessions})
}

func (h *Runs) lease(r *Request) (any, error) {
	c, err := runnerCaller(r)
	if err != nil {
		return nil, err
	}
	var in runproto.LeaseRequest
	if err := decodeOptional(r, &in); err != nil {
		return nil, err
	}
	if err := bounds.LeaseWait.Err("wait_seconds", int64(in.WaitSeconds)); err != nil {
		return nil, err
	}
	l, ok, err := h.S.Lease(r.Context(), c, r.PathValue("runner"), time.Duration(in.WaitSeconds)*time.Second, in.Adapters)
	if err != nil {
		return nil, err
	}
	if !ok {
		return noRun{}, nil
	}
	return l, nil
}

func (h *Runs) runnerHeartbeat(r *Request) (any, error) {
	c, err := runnerCaller(r)
	if err != nil {
		return nil, err
	}
	var in runproto.RunnerHeartbeatIn
	if err := decodeOptional(r, &in); err != nil {
		return nil, err
	}
	return h.S.RunnerHeartbeat(r.Context(), c, r.PathValue("runner"), run.HeartbeatInput(in))
}

// listRunners answers every runner to a platform admin; to an organization
// admin (project.update in an organization) the runners without token and
// labels, with only the sessions of its organizations' tickets.
func (h *Runs) listRunners(r *Request) (any, error) {
	ctx, p := r.Context(), r.Principal
	r.Checked() // checked here: the whole platform, or the caller's organizations
	var orgs []string
	if r.api.access.Check(ctx, p, access.PlatformAdmin, "", "") != nil {
		var candidates []string
		if g, token := p.TokenGrant(); token {
			candidates = append(candidates, g.OrgID)
		} else {
			all, err := h.Orgs.ListOrganizations(ctx, p.Subject, false)
			if err != nil {
				return nil, err
			}
			for _, o := range all {
				candidates = append(candidates, o.ID)
			}
		}
		orgs = []string{}
		for _, id := range candidates {
			if id != "" && r.api.access.Check(ctx, p, access.ProjectUpdate, id, "") == nil {
				orgs = append(orgs, id)
			}
		}
		if len(orgs) == 0 {
			return nil, apperr.New(apperr.Forbidden, "listing runners needs project.update in an organization (an organization admin) or platform.admin")
		}
	}
	runners, err := h.S.ListRunners(ctx, orgs)
	if err != nil {
		return nil, err
	}
	return RunnerList{Runners: runners}, nil
}

// drain drains (or undrains) the path's runner: platform admins only.
func (h *Runs) drain(on bool) func(r *Request) (any, error) {
	return func(r *Request) (any, error) {
		if err := r.Check("", ""); err != nil {
			return nil, err
		}
		if on {
			return h.S.DrainRunner(r.Context(), r.Principal.Actor(), r.PathValue("runner"))
		}
		return h.S.UndrainRunner(r.Context(), r.Principal.Actor(), r.PathValue("runner"))
	}
}

func (h *Runs) heartbeat(r *Request) (any, error) {
	_, rn, err := h.heldRun(r)
	if err != nil {
		return nil, err
	}
	return h.S.Heartbeat(r.Context(), rn)
}

func (h *Runs) skills(r *Request) (any, error) {
	rn, err := h.sessionRun(r)
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
	rn, err := h.sessionRun(r)
	if err != nil {
		return nil, err
	}
	var in ReportIn
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Report(r.Context(), rn.ID, run.ReportInput(in))
}

func (h *Runs) ask(r *Request) (any, error) {
	rn, err := h.sessionRun(r)
	if err != nil {
		return nil, err
	}
	var in QuestionAsk
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.AskQuestion(r.Context(), rn.ID, in.Text, in.Blocking)
}

// parseOffset reads a byte offset of a run's log, the query parameter
// offset: decimal digits only (no sign, no space), at most 18 of them.
// Absent, it is 0, or an error when required.
func parseOffset(s string, required bool) (int64, error) {
	bad := func(msg string) error { return apperr.Fields([]apperr.FieldError{{Field: "offset", Message: msg}}) }
	if s == "" {
		if required {
			return 0, bad("is required: the byte offset in the log where the body's bytes start")
		}
		return 0, nil
	}
	shown := s
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	if len(s) > 18 || strings.Trim(s, "0123456789") != "" {
		return 0, bad(fmt.Sprintf("must be a byte offset: a whole number from 0 (at most 18 digits), not %q", shown))
	}
	n, _ := strconv.ParseInt(s, 10, 64) // 18 digits always fit
	return n, nil
}

func (h *Runs) appendLog(r *Request) (any, error) {
	_, rn, err := h.heldRun(r)
	if err != nil {
		return nil, err
	}
	offset, err := parseOffset(r.URL.Query().Get("offset"), true)
	if err != nil {
		return nil, err
	}
	data, err := r.Raw()
	if err != nil {
		return nil, err
	}
	return h.S.AppendLog(r.Context(), rn.ID, offset, data)
}

func (h *Runs) readLog(r *Request) (any, error) {
	id := r.PathValue("run")
	rn, err := h.S.Get(r.Context(), id)
	if err := r.Visible("run", id, err, rn.OrganizationID, rn.ProjectID); err != nil {
		return nil, err
	}
	offset, err := parseOffset(r.URL.Query().Get("offset"), false)
	if err != nil {
		return nil, err
	}
	return h.S.ReadLog(r.Context(), rn, offset)
}

func (h *Runs) transcript(r *Request) (any, error) {
	id := r.PathValue("run")
	rn, err := h.S.Get(r.Context(), id)
	if err := r.Visible("run", id, err, rn.OrganizationID, rn.ProjectID); err != nil {
		return nil, err
	}
	return h.S.Transcript(r.Context(), rn)
}

func (h *Runs) finish(r *Request) (any, error) {
	c, rn, err := h.heldRun(r)
	if err != nil {
		return nil, err
	}
	var in runproto.FinishIn
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Finish(r.Context(), c.Actor, rn.ID, run.FinishInput(in))
}

func (h *Runs) usage(r *Request) (any, error) {
	c, rn, err := h.heldRun(r)
	if err != nil {
		return nil, err
	}
	var in runproto.Usage
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.RecordUsage(r.Context(), c.Actor, rn.ID, in)
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
