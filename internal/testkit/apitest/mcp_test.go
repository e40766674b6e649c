package apitest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// bearer sends every request with a bearer token.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b != "" {
		r.Header.Set("Authorization", "Bearer "+string(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP connects the SDK's client to Core's MCP endpoint with token.
func connectMCP(t *testing.T, e *apitest.Env, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "apitest", Version: "v0"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.URL + "/api/v1/mcp",
		HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// call calls a tool and returns its text and whether it is a tool error.
func call(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n"), res.IsError
}

type ticketView struct {
	Ticket struct {
		Key, Type, Title, Description string
		AcceptanceCriteria            string `json:"acceptance_criteria"`
	}
	AnsweredQuestions []struct{ Question, Answer string }      `json:"answered_questions"`
	PreviousReport    *struct{ Stage, Outcome, Report string } `json:"previous_report"`
}

func getTicket(t *testing.T, s *mcp.ClientSession) ticketView {
	t.Helper()
	text, isErr := call(t, s, "get_ticket", nil)
	var v ticketView
	if isErr {
		t.Fatalf("get_ticket: %s", text)
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("get_ticket %s: %v", text, err)
	}
	return v
}

// TestMCPTools drives a ticket's flow with the SDK's MCP client as an
// agent session would: the tools act on the token's run, a report through
// MCP advances the flow as the REST route does, a blocking question makes
// it wait, and the tools are closed once the run is finished or
// cancelled.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		k := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+k+"/flow/start", nil)
		r := w.leaseStage(k, "implement", 1)
		sess, err := connectMCP(t, w.Env, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := sess.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		if slices.Sort(names); strings.Join(names, ",") != "ask_question,get_ticket,read_entry,search_knowledge,submit_report" {
			t.Fatalf("tools %v", names)
		}

		// get_ticket: the ticket, no answers yet, no previous report.
		v := getTicket(t, sess)
		if v.Ticket.Key != k || v.Ticket.Type != "task" || v.Ticket.AcceptanceCriteria != "it works" || len(v.AnsweredQuestions) != 0 ||
			v.PreviousReport != nil {
			t.Fatalf("get_ticket: %+v", v)
		}

		// ask_question, not blocking: on the ticket, asked by the run; its
		// answer shows in get_ticket.
		if text, isErr := call(t, sess, "ask_question", map[string]any{"question": "Which license?", "blocking": false}); isErr {
			t.Fatalf("ask_question: %s", text)
		}
		var qs struct {
			Questions []struct {
				ID, Text string
				Blocking bool
				AskedBy  struct{ Kind, Subject string } `json:"asked_by"`
			}
		}
		w.Admin(200, "GET", "/api/v1/items/"+k+"/questions", nil).JSON(t, &qs)
		if len(qs.Questions) != 1 || qs.Questions[0].Text != "Which license?" || qs.Questions[0].Blocking ||
			qs.Questions[0].AskedBy.Subject != "run:"+r.ID {
			t.Fatalf("questions %+v", qs)
		}
		w.Admin(200, "POST", "/api/v1/questions/"+qs.Questions[0].ID+"/answer", map[string]any{"answer": "MIT"})
		if v := getTicket(t, sess); len(v.AnsweredQuestions) != 1 || v.AnsweredQuestions[0].Answer != "MIT" {
			t.Fatalf("the answer in get_ticket: %+v", v)
		}
		if text, isErr := call(t, sess, "ask_question", map[string]any{"question": " ", "blocking": false}); !isErr || !strings.Contains(text, "question:") {
			t.Fatalf("a blank question: %v %s", isErr, text)
		}

		// submit_report: bad arguments are tool errors naming them; the
		// report lands on the run like the REST route's.
		for _, args := range []map[string]any{{"outcome": "maybe", "summary": "x"}, {"outcome": "done"}, {"outcome": "done", "summary": ""}} {
			if text, isErr := call(t, sess, "submit_report", args); !isErr || !strings.Contains(text, "outcome") && !strings.Contains(text, "summary") {
				t.Fatalf("submit_report %v: %v %s", args, isErr, text)
			}
		}
		if text, isErr := call(t, sess, "submit_report", map[string]any{"outcome": "done", "summary": "Implemented it."}); isErr {
			t.Fatalf("submit_report: %s", text)
		}
		if _, isErr := call(t, sess, "submit_report", map[string]any{"outcome": "done", "summary": "Implemented it."}); isErr {
			t.Fatal("the same report again is a repeat")
		}
		if text, isErr := call(t, sess, "submit_report", map[string]any{"outcome": "failed", "summary": "No."}); !isErr || !strings.Contains(text, "already") {
			t.Fatalf("a second report: %v %s", isErr, text)
		}
		var run struct{ Outcome, Report string }
		w.Admin(200, "GET", "/api/v1/runs/"+r.ID, nil).JSON(t, &run)
		if run.Outcome != "done" || run.Report != "Implemented it." {
			t.Fatalf("run %+v", run)
		}

		// The finish moves the flow on, as after a REST report; the
		// finished run's token is revoked with it: its tools are gone.
		w.runner.Finish(r, 0)
		w.await(k, "review", func(f flowView) bool { return f.Stage == "review" })
		for _, tool := range []string{"get_ticket", "submit_report", "ask_question"} {
			_, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"outcome": "done", "summary": "x",
				"question": "q", "blocking": false}})
			if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
				t.Fatalf("%s on a finished run: %v", tool, err)
			}
		}

		// The next stage sees the report; a blocking question asked
		// through MCP makes the flow wait for its answer.
		r = w.leaseStage(k, "review", 1)
		sess, err = connectMCP(t, w.Env, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		if v := getTicket(t, sess); v.PreviousReport == nil || v.PreviousReport.Stage != "implement" || v.PreviousReport.Outcome != "done" ||
			v.PreviousReport.Report != "Implemented it." {
			t.Fatalf("the previous report: %+v", v.PreviousReport)
		}
		if text, isErr := call(t, sess, "ask_question", map[string]any{"question": "Which database?", "blocking": true}); isErr ||
			!strings.Contains(text, "end the session") {
			t.Fatalf("a blocking question: %s", text)
		}
		w.runner.Finish(r, 0)
		f := w.await(k, "answer", func(f flowView) bool { return f.Waiting == "answer" })
		if f.Stage != "review" || w.itemState(k) != "waiting_for_answer" {
			t.Fatalf("after a blocking question: %+v", f)
		}
		w.answerOpen(k, "SQLite")

		// A cancelled run's tools are closed.
		r = w.leaseStage(k, "review", 1)
		sess, err = connectMCP(t, w.Env, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		var it struct{ Version int64 }
		w.Admin(200, "GET", "/api/v1/items/"+k, nil).JSON(t, &it)
		w.Admin(200, "PATCH", "/api/v1/items/"+k, map[string]any{"version": it.Version, "state": "paused"})
		w.await(k, "stopped", func(f flowView) bool { return f.Status == "stopped" })
		for _, tool := range []string{"get_ticket", "submit_report", "ask_question"} {
			text, isErr := call(t, sess, tool, map[string]any{"outcome": "done", "summary": "x", "question": "q", "blocking": false})
			if !isErr || !strings.Contains(text, "cancelled") {
				t.Fatalf("%s on a cancelled run: %v %s", tool, isErr, text)
			}
		}
	})
}

// initialize is an MCP client's first message.
var initialize = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
	"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "curl", "version": "1"}}}

// TestMCPTakesOnlyRunTokens: no credential, or any credential but a run
// token, is a 401 in the API's error shape.
func TestMCPTakesOnlyRunTokens(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		orgID := e.Org("acme")
		runner := e.NewRunner("r1")
		for name, tok := range map[string]string{"none": "", "bootstrap": apitest.BootstrapToken, "admin token": e.RoleToken(orgID, "admin"),
			"runner token": runner.Token, "unknown": "ballet_nope"} {
			r := e.Do(tok, "POST", "/api/v1/mcp", initialize)
			if r.Status != 401 || errOf(t, r).Error.Code != "unauthenticated" {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		// The SDK's own refusals come in the API's error shape.
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser"})
		queueRun(e, "ACME-1")
		l := runner.MustLease()
		if r := e.Do(l.Token, "POST", "/api/v1/mcp", initialize); r.Status != 400 || !strings.Contains(errOf(t, r).Error.Message, "Accept") {
			t.Errorf("no Accept header: %d %s", r.Status, r.Body)
		}
		if r := e.Raw(l.Token, "POST", "/api/v1/mcp", "text/plain", []byte("{}")); r.Status != 415 || errOf(t, r).Error.Code != "unsupported" {
			t.Errorf("a text body: %d %s", r.Status, r.Body)
		}
		if _, err := connectMCP(t, e, ""); err == nil {
			t.Fatal("the SDK's client connected without a token")
		}
		e.Must(405, "", "GET", "/api/v1/mcp", nil)
	})
}
