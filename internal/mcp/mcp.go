// Package mcp is Core's MCP door: the agent session's side of a run
// (runner protocol v2), an MCP server (streamable HTTP, the official Go
// SDK) at Path, authenticated by the run's token, with the tools
// submit_report, ask_question and get_ticket, and search_knowledge and
// read_entry over the Knowledge service, scoped to the run's
// organization. It stands beside the REST routes (it is one route of
// Core's table) and beside realtime; it declares what it needs of the
// domains (Runs, Tickets, Orgs, Knowledge) and each tool is a named
// method (tools.go).
package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// Path is where Core serves MCP to agent sessions.
const Path = "/api/v1/mcp"

// Runs is the run service as the tools need it (run.Service): a session's
// run, read for it, its report and its questions. Each takes the run id
// the door resolved from the run token, once.
type Runs interface {
	SessionRun(ctx context.Context, runID string) (run.Run, error)
	Report(ctx context.Context, runID string, in run.ReportInput) (run.Run, error)
	AskQuestion(ctx context.Context, runID, text string, blocking bool) (tracker.Question, error)
}

// Tickets reads a run's ticket and its questions (tracker.Service).
type Tickets interface {
	FindItem(ctx context.Context, ref string) (tracker.Item, error)
	ListQuestions(ctx context.Context, itemID string) ([]tracker.Question, error)
}

// Orgs finds the run's organization, whose slug scopes the Knowledge
// calls (tenancy.Service).
type Orgs interface {
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
}

// Knowledge is the Knowledge service as the tools read it, with the
// service credential (the Knowledge client).
type Knowledge interface {
	Search(ctx context.Context, org string, q client.Query) ([]client.Result, error)
	Entry(ctx context.Context, org, space, slug string, version int64) (client.Entry, error)
}

// Tools serves MCP to the agent sessions. The tools call the run service
// the REST routes /runs/{run}/report and /runs/{run}/questions call, and
// act on the token's own run only; once the run is finished or its
// cancellation was requested they refuse (a tool error). The server is
// stateless: every POST stands alone, so any Core instance serves any
// session, and nothing waits (JSON answers, no event stream).
type Tools struct {
	Runs      Runs
	Tickets   Tickets
	Orgs      Orgs
	Knowledge Knowledge
	Log       *slog.Logger // a tool's internal errors, Knowledge unavailable

	handler http.Handler
}

// Message is a JSON-RPC 2.0 message of MCP (the body of POST Path and of
// its answer).
type Message struct{}

// JSONSchema describes any JSON-RPC message.
func (Message) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "description": "a JSON-RPC 2.0 message of the Model Context Protocol"}
}

// Routes returns the MCP endpoint, for Core's route table.
func (h *Tools) Routes() []*server.Route {
	srv := h.server()
	h.handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return []*server.Route{
		{Method: "POST", Path: Path, Perm: run.PermRun,
			Summary: "MCP (streamable HTTP, stateless) for the run's agent session, with its run token: tools submit_report, ask_question, get_ticket, " +
				"search_knowledge, read_entry; 401 for any other credential",
			Request: Message{}, Response: Message{}, Also: []int{http.StatusAccepted, http.StatusUnsupportedMediaType},
			Serve: h.serve},
	}
}

// serve lets only run tokens through (401 for any other credential) and
// hands the request to the MCP handler with the token's run, resolved here
// once: the tools find it in their request's TokenInfo (runOf).
func (h *Tools) serve(r *server.Request) (http.Handler, error) {
	p := r.Principal
	id, ok := run.TokenRun(p)
	if !ok {
		return nil, apperr.New(apperr.Unauthenticated, "%s takes only a run token (Authorization: Bearer <the run token of the lease>)", Path)
	}
	r.Checked() // the tools act on the token's own run only
	verify := func(context.Context, string, *http.Request) (*sdkauth.TokenInfo, error) {
		return &sdkauth.TokenInfo{UserID: p.TokenID, Expiration: p.ExpiresAt, Extra: map[string]any{runKey: id}}, nil
	}
	return sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(oneMessage(h.handler)), nil
}

// oneMessage refuses a JSON-RPC batch (a JSON array) with 400 and the
// JSON-RPC error "invalid request" before next sees it: MCP's streamable
// HTTP transport carries one message per POST since protocol version
// 2025-06-18, and a batch's answer (an array) is not the message this
// endpoint documents. The body (already bounded by the door) is read
// whole and handed on unchanged.
func oneMessage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			code := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				code = http.StatusRequestEntityTooLarge // the door's body limit
			}
			http.Error(w, "reading the request body: "+err.Error(), code)
			return
		}
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(batchRefused))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// batchRefused is the JSON-RPC answer to a batch: invalid request (-32600).
const batchRefused = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a JSON-RPC batch (array) is not accepted: send one message per request"}}` + "\n"

// server builds the MCP server with Ballet's tools (tools.go).
func (h *Tools) server() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "ballet", Title: "Ballet", Version: "v1"}, &sdk.ServerOptions{
		// The tools never change: with nothing to listen for, clients open
		// no long-lived stream (claude-code 2.1 holds a subscriptions/listen
		// request open, and waits for it, when list changes are announced).
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
		Instructions: "Ballet's tools for this agent session: get_ticket, ask_question, search_knowledge and read_entry " +
			"(the team's knowledge), and submit_report once at the end."})
	sdk.AddTool(s, submitReportTool, h.submitReport)
	sdk.AddTool(s, askQuestionTool, h.askQuestion)
	sdk.AddTool(s, getTicketTool, h.getTicket)
	sdk.AddTool(s, searchKnowledgeTool, h.searchKnowledge)
	sdk.AddTool(s, readEntryTool, h.readEntry)
	return s
}

// runKey names the run of a tool call's token in its TokenInfo.
const runKey = "run"

// runOf returns the run a tool call acts on, as serve resolved it from the
// run token.
func (h *Tools) runOf(req *sdk.CallToolRequest) (string, error) {
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
func (h *Tools) session(ctx context.Context, req *sdk.CallToolRequest) (run.Run, error) {
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

// toolError is the error a tool answers for err: an application error's
// message, with every field problem (fields renamed to the tool's
// arguments); else "internal error", and err is logged (once, here).
func (h *Tools) toolError(err error, rename map[string]string) error {
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
