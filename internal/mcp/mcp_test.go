package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// fakeRuns is the run service as the tools see it: one open run, the
// reports and questions it was given.
type fakeRuns struct {
	open    run.Run
	reports []string // run id: outcome
	asked   []string
}

func (f *fakeRuns) SessionRun(_ context.Context, id string) (run.Run, error) {
	if id != f.open.ID {
		return run.Run{}, apperr.New(apperr.Conflict, "run %s was cancelled: its tools are closed; end the session", id)
	}
	return f.open, nil
}

func (f *fakeRuns) Report(_ context.Context, id string, in run.ReportInput) (run.Run, error) {
	f.reports = append(f.reports, id+": "+in.Outcome)
	return f.open, nil
}

func (f *fakeRuns) AskQuestion(_ context.Context, id, text string, _ bool) (tracker.Question, error) {
	if text == "" {
		return tracker.Question{}, apperr.Fields([]apperr.FieldError{{Field: "text", Message: "must not be blank"}})
	}
	f.asked = append(f.asked, id+": "+text)
	return tracker.Question{}, nil
}

type fakeOrgs struct{}

func (fakeOrgs) FindOrganization(_ context.Context, ref string) (tenancy.Organization, error) {
	return tenancy.Organization{ID: ref, Slug: "acme"}, nil
}

// downKnowledge is a Knowledge service that does not answer.
type downKnowledge struct{}

func (downKnowledge) Search(context.Context, string, client.Query) ([]client.Result, error) {
	return nil, client.ErrUnavailable
}

func (downKnowledge) Entry(context.Context, string, string, string, int64) (client.Entry, error) {
	return client.Entry{}, client.ErrUnavailable
}

// call calls a tool of h as the session of run runID would (the run the
// door resolved from its token), over the SDK's in-memory transport.
func call(t *testing.T, h *Tools, runID, tool string, args map[string]any) (string, bool) {
	t.Helper()
	ctx := context.Background()
	srv := h.server()
	// The door puts the token's run into the request's TokenInfo; the
	// in-memory transport carries none, so a middleware stands in for it.
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if ct, ok := req.(*sdk.CallToolRequest); ok {
				ct.Extra = &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{Extra: map[string]any{runKey: runID}}}
			}
			return next(ctx, method, req)
		}
	})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func newTools(runs *fakeRuns) *Tools {
	return &Tools{Runs: runs, Orgs: fakeOrgs{}, Knowledge: downKnowledge{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestToolsActOnTheTokensRun: submit_report and ask_question reach the run
// service with the run the door resolved from the token, and nothing else.
func TestToolsActOnTheTokensRun(t *testing.T) {
	runs := &fakeRuns{open: run.Run{ID: "r1", OrganizationID: "o1"}}
	h := newTools(runs)
	if text, isErr := call(t, h, "r1", "submit_report", map[string]any{"outcome": "done", "summary": "ok"}); isErr || text != "Report recorded: done." {
		t.Fatalf("submit_report: %q, error %v", text, isErr)
	}
	if text, isErr := call(t, h, "r1", "ask_question", map[string]any{"question": "which?", "blocking": false}); isErr || !strings.HasPrefix(text, "Question recorded.") {
		t.Fatalf("ask_question: %q, error %v", text, isErr)
	}
	if strings.Join(runs.reports, ",") != "r1: done" || strings.Join(runs.asked, ",") != "r1: which?" {
		t.Fatalf("reports %v, questions %v", runs.reports, runs.asked)
	}
}

// TestToolErrorsNameTheToolsArguments: a field problem of the domain is
// answered with the tool's own argument name (text → question).
func TestToolErrorsNameTheToolsArguments(t *testing.T) {
	h := newTools(&fakeRuns{open: run.Run{ID: "r1"}})
	text, isErr := call(t, h, "r1", "ask_question", map[string]any{"question": "", "blocking": true})
	if !isErr || text != "question: must not be blank" {
		t.Fatalf("%q, error %v", text, isErr)
	}
}

// TestClosedRunRefusesKnowledgeTools: the Knowledge tools read the
// session's run first, so a run closed to its session gets the domain's
// refusal, not the service's.
func TestClosedRunRefusesKnowledgeTools(t *testing.T) {
	h := newTools(&fakeRuns{open: run.Run{ID: "r1"}})
	text, isErr := call(t, h, "r2", "search_knowledge", map[string]any{"query": "go"})
	if !isErr || !strings.Contains(text, "its tools are closed") {
		t.Fatalf("%q, error %v", text, isErr)
	}
}

// TestKnowledgeDownIsAToolError: when the Knowledge service does not
// answer, the tool says to go on without it (the session survives).
func TestKnowledgeDownIsAToolError(t *testing.T) {
	h := newTools(&fakeRuns{open: run.Run{ID: "r1", OrganizationID: "o1"}})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"search_knowledge", map[string]any{"query": "go"}}, {"read_entry", map[string]any{"slug": "conventions/go"}}} {
		text, isErr := call(t, h, "r1", c.tool, c.args)
		if !isErr || !strings.Contains(text, "go on without it") {
			t.Fatalf("%s: %q, error %v", c.tool, text, isErr)
		}
	}
}

// TestToolErrorHidesInternalErrors: an error that is no application
// error is answered as "internal error" (and logged), never its text.
func TestToolErrorHidesInternalErrors(t *testing.T) {
	h := newTools(&fakeRuns{})
	if err := h.toolError(errors.New("db password is hunter2"), nil); err.Error() != "internal error" {
		t.Fatal(err)
	}
}

// TestBatchesAreRefused: a JSON-RPC batch never reaches the MCP server; it
// is answered 400 with the JSON-RPC error "invalid request", while a
// single message reaches it with its body unchanged.
func TestBatchesAreRefused(t *testing.T) {
	var got []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
	})
	h := oneMessage(next)
	for _, body := range []string{`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, " \n\t[]"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", Path, strings.NewReader(body)))
		var ans struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || rec.Code != http.StatusBadRequest || ans.Error.Code != -32600 ||
			!strings.Contains(ans.Error.Message, "batch") {
			t.Errorf("batch %q: %d %s (%v), want 400 with JSON-RPC error -32600 naming the batch", body, rec.Code, rec.Body, err)
		}
	}
	if len(got) != 0 {
		t.Fatalf("a batch reached the MCP server: %q", got)
	}
	one := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", Path, strings.NewReader(one)))
	if len(got) != 1 || got[0] != one {
		t.Fatalf("a single message reached the server as %q, want %q", got, one)
	}
}

// TestBodyPastTheLimitIs413: a body over the door's limit is answered 413,
// as on every other route, not 400.
func TestBodyPastTheLimitIs413(t *testing.T) {
	h := oneMessage(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("an oversized body reached the MCP server") }))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Body = http.MaxBytesReader(rec, req.Body, 8)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %s, want 413", rec.Code, rec.Body)
	}
}
