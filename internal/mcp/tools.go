package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
)

// The tools: each its declaration (name, description, input schema) and
// its method, the handler of its calls.

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

// Bounds of the Knowledge tools' arguments.
const (
	maxQueryLength = 1000
	maxToolTags    = 20
)

// str is a string argument's schema.
func str(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

var submitReportTool = &sdk.Tool{
	Name: "submit_report",
	Description: "Submit this stage's report, once, at the end: outcome done (the stage's work is complete), failed " +
		"(it cannot be done as asked, or the work reviewed is not acceptable) or blocked (you cannot go on), and a summary for the next stage.",
	InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"outcome", "summary"}, Properties: map[string]*jsonschema.Schema{
		"outcome": {Type: "string", Enum: []any{run.OutcomeDone, run.OutcomeFailed, run.OutcomeBlocked}, Description: "how the stage ended"},
		"summary": str("what was done and what the next stage needs to know"),
	}},
}

// submitReport records the stage's report (run.Service.Report).
func (h *Tools) submitReport(ctx context.Context, req *sdk.CallToolRequest, in reportArgs) (*sdk.CallToolResult, any, error) {
	id, err := h.runOf(req)
	if err != nil {
		return nil, nil, err
	}
	if _, err := h.Runs.Report(ctx, id, run.ReportInput{Outcome: in.Outcome, Summary: in.Summary}); err != nil {
		return nil, nil, h.toolError(err, nil)
	}
	return toolText(fmt.Sprintf("Report recorded: %s.", in.Outcome)), nil, nil
}

var askQuestionTool = &sdk.Tool{
	Name:        "ask_question",
	Description: "Ask the people behind the ticket a question. blocking true: you cannot go on without the answer; end the session then, and the stage runs again with the answer.",
	InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"question", "blocking"}, Properties: map[string]*jsonschema.Schema{
		"question": str("the question"),
		"blocking": {Type: "boolean", Description: "true: the stage cannot go on without the answer"},
	}},
}

// askQuestion asks on the run's ticket (run.Service.AskQuestion).
func (h *Tools) askQuestion(ctx context.Context, req *sdk.CallToolRequest, in questionArgs) (*sdk.CallToolResult, any, error) {
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
}

var getTicketTool = &sdk.Tool{
	Name:        "get_ticket",
	Description: "The ticket (key, type, title, description, acceptance criteria), its answered questions and the previous stage's report.",
	InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}},
}

// TicketView is what get_ticket answers, in the lease's session's terms:
// the ticket and its answered questions as they are now (a question
// answered during the session shows), and the previous stage's report the
// run was created with.
type TicketView struct {
	Ticket            runproto.SessionTicket   `json:"ticket"`
	AnsweredQuestions []runproto.SessionAnswer `json:"answered_questions"`
	PreviousReport    *runproto.SessionReport  `json:"previous_report"`
}

// getTicket answers the run's ticket as it is now (ticket).
func (h *Tools) getTicket(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
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
}

// ticket is what get_ticket answers for run r.
func (h *Tools) ticket(ctx context.Context, r run.Run) (TicketView, error) {
	var a flow.Artifacts
	if err := json.Unmarshal(r.Artifacts, &a); err != nil {
		return TicketView{}, fmt.Errorf("run %s artifacts: %w", r.ID, err)
	}
	it, err := h.Tickets.FindItem(ctx, r.ItemID)
	if err != nil {
		return TicketView{}, err
	}
	qs, err := h.Tickets.ListQuestions(ctx, r.ItemID)
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

// The Knowledge tools read the run's organization's entries with the
// service credential. When the service is down they answer a tool error
// saying so; the session goes on.

var spaceArg = str("the space (default: \"default\", the organization's own space)")

var searchKnowledgeTool = &sdk.Tool{
	Name: "search_knowledge",
	Description: "Search the team's knowledge (conventions, architecture notes, past decisions) of this ticket's organization, " +
		"in one space (\"default\" unless you name another): the current entries matching the words, best first, each with its " +
		"slug and a snippet (<mark>…</mark> around the hits). Read a whole entry with read_entry.",
	InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"query"}, Properties: map[string]*jsonschema.Schema{
		"query": str("the words to search for"),
		"space": spaceArg,
		"tags":  {Type: "array", Items: &jsonschema.Schema{Type: "string"}, Description: "only entries with every one of these tags"},
	}},
}

// searchKnowledge searches the run's organization's knowledge.
func (h *Tools) searchKnowledge(ctx context.Context, req *sdk.CallToolRequest, in searchArgs) (*sdk.CallToolResult, any, error) {
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
}

var readEntryTool = &sdk.Tool{
	Name:        "read_entry",
	Description: "Read an entry of the team's knowledge by its slug (as search_knowledge answers it): its title, Markdown body, tags and version.",
	InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"slug"}, Properties: map[string]*jsonschema.Schema{
		"slug":    str("the entry's slug, e.g. conventions/go"),
		"space":   spaceArg,
		"version": {Type: "integer", Minimum: jsonschema.Ptr(0.0), Description: "an earlier version (default: the current one)"},
	}},
}

// readEntry reads one entry of the run's organization's knowledge.
func (h *Tools) readEntry(ctx context.Context, req *sdk.CallToolRequest, in entryArgs) (*sdk.CallToolResult, any, error) {
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
}

// knowledgeOrg returns the slug of the organization of the tool call's
// run: the only one its Knowledge calls reach.
func (h *Tools) knowledgeOrg(ctx context.Context, req *sdk.CallToolRequest) (string, error) {
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
func (h *Tools) knowledgeError(err error) error {
	if errors.Is(err, client.ErrUnavailable) {
		h.Log.Warn("MCP knowledge tool: the Knowledge service is unavailable", "err", err)
		return errors.New("the team's knowledge is unavailable right now (the Knowledge service does not answer): go on without it, or try again later")
	}
	return h.toolError(err, nil)
}

// jsonText answers v as the tool's JSON text.
func jsonText(v any) (*sdk.CallToolResult, any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the answer: %w", err)
	}
	return toolText(string(b)), nil, nil
}

func toolText(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}
