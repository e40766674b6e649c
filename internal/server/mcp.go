package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// MCPPath is where Core serves MCP to agent sessions.
const MCPPath = "/api/v1/mcp"

// MCP serves the agent session's side of a run (runner protocol v2, item
// 8): an MCP server (streamable HTTP, the official Go SDK) at MCPPath,
// authenticated by the run's token, with the tools submit_report,
// ask_question and get_ticket, and search_knowledge and read_entry over
// the Knowledge service, scoped to the run's organization. They call the run service the REST routes
// /runs/{run}/report and /runs/{run}/questions call, and act on the
// token's own run only; once the run is finished or its cancellation was
// requested they refuse (a tool error). The server is stateless: every
// POST stands alone, so any Core instance serves any session, and nothing
// waits (JSON answers, no event stream).
type MCP struct {
	Runs    *run.Service
	Tracker *tracker.Service
	// Orgs finds the run's organization, whose slug scopes the Knowledge
	// calls (tenancy.Service).
	Orgs interface {
		FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
	}
	// Knowledge answers search_knowledge and read_entry with the service
	// credential (the Knowledge client).
	Knowledge KnowledgeReader
	Log       *slog.Logger // a tool's internal errors, Knowledge unavailable

	handler http.Handler
}

// MCPMessage is a JSON-RPC 2.0 message of MCP (the body of POST
// /api/v1/mcp and of its answer).
type MCPMessage struct{}

// JSONSchema describes any JSON-RPC message.
func (MCPMessage) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "description": "a JSON-RPC 2.0 message of the Model Context Protocol"}
}

// The tools' arguments.
type (
	reportArgs struct {
		Outcome string `json:"outcome"`
		Summary string `json:"summary"`
	}
	questionArgs struct {
		Question string `json:"question"`
		Blocking bool   `json:"blocking"`
	}
	searchArgs struct {
		Query string   `json:"query"`
		Space string   `json:"space,omitempty"`
		Tags  []string `json:"tags,omitempty"`
	}
	entryArgs struct {
		Slug    string `json:"slug"`
		Space   string `json:"space,omitempty"`
		Version int64  `json:"version,omitempty"`
	}
)

// KnowledgeReader is the Knowledge service as the MCP tools and a stage's
// entries need it (the Knowledge client).
type KnowledgeReader interface {
	Search(ctx context.Context, org string, q client.Query) ([]client.Result, error)
	Entry(ctx context.Context, org, space, slug string, version int64) (client.Entry, error)
}

// Bounds of the Knowledge tools' arguments.
const (
	maxQueryLength = 1000
	maxToolTags    = 20
)

// TicketView is what get_ticket answers, in the lease's session's terms:
// the ticket and its answered questions as they are now (a question
// answered during the session shows), and the previous stage's report the
// run was created with.
type TicketView struct {
	Ticket            runproto.SessionTicket   `json:"ticket"`
	AnsweredQuestions []runproto.SessionAnswer `json:"answered_questions"`
	PreviousReport    *runproto.SessionReport  `json:"previous_report"`
}

// Routes returns the MCP endpoint.
func (h *MCP) Routes() []*Route {
	srv := h.server()
	h.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return []*Route{
		{Method: "POST", Path: MCPPath, Perm: run.PermRun,
			Summary: "MCP (streamable HTTP, stateless) for the run's agent session, with its run token: tools submit_report, ask_question, get_ticket, " +
				"search_knowledge, read_entry; 401 for any other credential",
			Request: MCPMessage{}, Response: MCPMessage{}, Also: []int{http.StatusAccepted, http.StatusUnsupportedMediaType},
			Serve: h.serve},
	}
}

type principalKey struct{}

// serve lets only run tokens through (401 for any other credential) and
// hands the request to the MCP handler with the token's run, resolved here
// once: the tools find it in their request's TokenInfo (runOf).
func (h *MCP) serve(r *Request) (http.Handler, error) {
	p := r.Principal
	id, ok := runOfToken(p)
	if !ok {
		return nil, apperr.New(apperr.Unauthenticated, "%s takes only a run token (Authorization: Bearer <the run token of the lease>)", MCPPath)
	}
	r.Checked() // the tools act on the token's own run only
	verify := func(context.Context, string, *http.Request) (*sdkauth.TokenInfo, error) {
		return &sdkauth.TokenInfo{UserID: p.TokenID, Expiration: p.ExpiresAt, Extra: map[string]any{runKey: id}}, nil
	}
	return sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h.handler), nil
}

// runOfToken returns the run a run token acts on.
func runOfToken(p *auth.Principal) (string, bool) {
	if p.TokenKind != auth.KindRun {
		return "", false
	}
	for _, s := range p.Scopes {
		if id, ok := strings.CutPrefix(s, "run:"); ok {
			return id, true
		}
	}
	return "", false
}

// server builds the MCP server with Ballet's tools.
func (h *MCP) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ballet", Title: "Ballet", Version: "v1"}, &mcp.ServerOptions{
		// The tools never change: with nothing to listen for, clients open
		// no long-lived stream (claude-code 2.1 holds a subscriptions/listen
		// request open, and waits for it, when list changes are announced).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Instructions: "Ballet's tools for this agent session: get_ticket, ask_question, search_knowledge and read_entry " +
			"(the team's knowledge), and submit_report once at the end."})
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	mcp.AddTool(s, &mcp.Tool{
		Name: "submit_report",
		Description: "Submit this stage's report, once, at the end: outcome done (the stage's work is complete), failed " +
			"(it cannot be done as asked, or the work reviewed is not acceptable) or blocked (you cannot go on), and a summary for the next stage.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"outcome", "summary"}, Properties: map[string]*jsonschema.Schema{
			"outcome": {Type: "string", Enum: []any{run.OutcomeDone, run.OutcomeFailed, run.OutcomeBlocked}, Description: "how the stage ended"},
			"summary": str("what was done and what the next stage needs to know"),
		}},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in reportArgs) (*mcp.CallToolResult, any, error) {
		id, err := h.runOf(req)
		if err != nil {
			return nil, nil, err
		}
		if _, err := h.Runs.Report(ctx, id, run.ReportInput{Outcome: in.Outcome, Summary: in.Summary}); err != nil {
			return nil, nil, h.toolError(err, nil)
		}
		return toolText(fmt.Sprintf("Report recorded: %s.", in.Outcome)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "ask_question",
		Description: "Ask the people behind the ticket a question. blocking true: you cannot go on without the answer; end the session then, and the stage runs again with the answer.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"question", "blocking"}, Properties: map[string]*jsonschema.Schema{
			"question": str("the question"),
			"blocking": {Type: "boolean", Description: "true: the stage cannot go on without the answer"},
		}},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in questionArgs) (*mcp.CallToolResult, any, error) {
		id, err := h.runOf(req)
		if err != nil {
			return nil, nil, err
		}
		if _, err := h.Runs.AskQuestion(ctx, id, in.Question, in.Blocking); err != nil {
			return nil, nil, h.toolError(err, map[string]string{"text": "question"})
		}
		if in.Blocking {
			return toolText("Question recorded. It blocks the stage: end the session now; the stage runs again with the answer."), nil, nil
		}
		return toolText("Question recorded. Go on with the work; get_ticket shows the answer once there is one."), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_ticket",
		Description: "The ticket (key, type, title, description, acceptance criteria), its answered questions and the previous stage's report.",
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		r, err := h.session(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		v, err := h.ticket(ctx, r)
		if err != nil {
			return nil, nil, h.toolError(err, nil)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, nil, fmt.Errorf("encode the ticket: %w", err)
		}
		return toolText(string(b)), nil, nil
	})
	h.knowledgeTools(s, str)
	return s
}

// knowledgeTools adds search_knowledge and read_entry: the run's
// organization's entries, read with the service credential. When the
// service is down they answer a tool error saying so; the session goes
// on.
func (h *MCP) knowledgeTools(s *mcp.Server, str func(string) *jsonschema.Schema) {
	space := str("the space (default: \"default\", the organization's own space)")
	mcp.AddTool(s, &mcp.Tool{
		Name: "search_knowledge",
		Description: "Search the team's knowledge (conventions, architecture notes, past decisions) of this ticket's organization, " +
			"in one space (\"default\" unless you name another): the current entries matching the words, best first, each with its " +
			"slug and a snippet (<mark>…</mark> around the hits). Read a whole entry with read_entry.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"query"}, Properties: map[string]*jsonschema.Schema{
			"query": str("the words to search for"),
			"space": space,
			"tags":  {Type: "array", Items: &jsonschema.Schema{Type: "string"}, Description: "only entries with every one of these tags"},
		}},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, any, error) {
		org, err := h.knowledgeOrg(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		switch q := strings.TrimSpace(in.Query); {
		case q == "":
			return nil, nil, errors.New("query: must not be empty")
		case len(in.Query) > maxQueryLength:
			return nil, nil, fmt.Errorf("query: at most %d bytes", maxQueryLength)
		case len(in.Tags) > maxToolTags:
			return nil, nil, fmt.Errorf("tags: at most %d", maxToolTags)
		}
		if in.Space == "" {
			in.Space = client.DefaultSpace
		}
		var v apperr.Validator
		knowledge.CheckSpaceSlug(&v, "space", in.Space)
		if err := v.Err(); err != nil {
			return nil, nil, h.toolError(err, nil)
		}
		rs, err := h.Knowledge.Search(ctx, org, client.Query{Text: in.Query, Space: in.Space, Tags: in.Tags})
		if err != nil {
			return nil, nil, h.knowledgeError(err)
		}
		return jsonText(map[string]any{"results": rs})
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "read_entry",
		Description: "Read an entry of the team's knowledge by its slug (as search_knowledge answers it): its title, Markdown body, tags and version.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"slug"}, Properties: map[string]*jsonschema.Schema{
			"slug":    str("the entry's slug, e.g. conventions/go"),
			"space":   space,
			"version": {Type: "integer", Minimum: jsonschema.Ptr(0.0), Description: "an earlier version (default: the current one)"},
		}},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in entryArgs) (*mcp.CallToolResult, any, error) {
		org, err := h.knowledgeOrg(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		if strings.TrimSpace(in.Slug) == "" {
			return nil, nil, errors.New("slug: must not be empty")
		}
		// Checked here, before any call: a slug such as ".." would name
		// another resource of the service.
		if in.Space == "" {
			in.Space = client.DefaultSpace
		}
		var v apperr.Validator
		knowledge.CheckSpaceSlug(&v, "space", in.Space)
		knowledge.CheckSlug(&v, "slug", in.Slug)
		if err := v.Err(); err != nil {
			return nil, nil, h.toolError(err, nil)
		}
		if in.Version != 0 { // 0: the current version
			if err := bounds.Version.Err("version", in.Version); err != nil {
				return nil, nil, h.toolError(err, nil)
			}
		}
		e, err := h.Knowledge.Entry(ctx, org, in.Space, in.Slug, in.Version)
		if err != nil {
			return nil, nil, h.knowledgeError(err)
		}
		return jsonText(e)
	})
}

// knowledgeOrg returns the slug of the organization of the tool call's
// run: the only one its Knowledge calls reach.
func (h *MCP) knowledgeOrg(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	r, err := h.session(ctx, req)
	if err != nil {
		return "", err
	}
	o, err := h.Orgs.FindOrganization(ctx, r.OrganizationID)
	if err != nil {
		return "", h.toolError(err, nil)
	}
	return o.Slug, nil
}

// knowledgeError is the tool error of a failed Knowledge call: what the
// service said of the request (an entry not found, a bad query), or, when
// it is unavailable, that the agent should go on without it (logged here).
func (h *MCP) knowledgeError(err error) error {
	if errors.Is(err, client.ErrUnavailable) {
		h.Log.Warn("MCP knowledge tool: the Knowledge service is unavailable", "err", err)
		return errors.New("the team's knowledge is unavailable right now (the Knowledge service does not answer): go on without it, or try again later")
	}
	return h.toolError(err, nil)
}

// jsonText answers v as the tool's JSON text.
func jsonText(v any) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the answer: %w", err)
	}
	return toolText(string(b)), nil, nil
}

// runKey names the run of a tool call's token in its TokenInfo.
const runKey = "run"

// runOf returns the run a tool call acts on, as serve resolved it from the
// run token.
func (h *MCP) runOf(req *mcp.CallToolRequest) (string, error) {
	var id string
	if ti := req.Extra.TokenInfo; ti != nil {
		id, _ = ti.Extra[runKey].(string)
	}
	if id == "" {
		return "", h.toolError(errors.New("a tool call without its run"), nil) // serve always sets it
	}
	return id, nil
}

// session returns the run a tool call acts on, which must still be open
// to its session (run.Service.SessionRun).
func (h *MCP) session(ctx context.Context, req *mcp.CallToolRequest) (run.Run, error) {
	id, err := h.runOf(req)
	if err != nil {
		return run.Run{}, err
	}
	r, err := h.Runs.SessionRun(ctx, id)
	if err != nil {
		return run.Run{}, h.toolError(err, nil)
	}
	return r, nil
}

// ticket is what get_ticket answers for run r.
func (h *MCP) ticket(ctx context.Context, r run.Run) (TicketView, error) {
	var a flow.Artifacts
	if err := json.Unmarshal(r.Artifacts, &a); err != nil {
		return TicketView{}, fmt.Errorf("run %s artifacts: %w", r.ID, err)
	}
	it, err := h.Tracker.FindItem(ctx, r.ItemID)
	if err != nil {
		return TicketView{}, err
	}
	qs, err := h.Tracker.ListQuestions(ctx, r.ItemID)
	if err != nil {
		return TicketView{}, err
	}
	v := TicketView{
		Ticket: runproto.SessionTicket{Key: it.Key, Type: it.Type, Title: it.Title, Description: it.Description,
			AcceptanceCriteria: it.AcceptanceCriteria},
		AnsweredQuestions: []runproto.SessionAnswer{},
		PreviousReport:    (*runproto.SessionReport)(a.PreviousReport),
	}
	for _, q := range flow.Answered(qs) {
		v.AnsweredQuestions = append(v.AnsweredQuestions, runproto.SessionAnswer(q))
	}
	return v, nil
}

func toolText(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// toolError is the error a tool answers for err: an application error's
// message, with every field problem (fields renamed to the tool's
// arguments); else "internal error", and err is logged (once, here).
func (h *MCP) toolError(err error, rename map[string]string) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		h.Log.Error("MCP tool", "err", err)
		return errors.New("internal error")
	}
	fe := ae.FieldErrors()
	if len(fe) == 0 {
		return errors.New(ae.Message)
	}
	msgs := make([]string, len(fe))
	for i, f := range fe {
		name := f.Field
		if n, ok := rename[name]; ok {
			name = n
		}
		msgs[i] = name + ": " + f.Message
	}
	return errors.New(strings.Join(msgs, "; "))
}
