package apitest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

const octets = "application/octet-stream"

type logAnswer struct {
	Size      int64 `json:"size"`
	Truncated bool  `json:"truncated"`
}

type logPage struct {
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Data       string `json:"data"`
	Truncated  bool   `json:"truncated"`
	Finished   bool   `json:"finished"`
}

// upload sends a chunk of a run's log with its run token.
func upload(e *apitest.Env, want int, token, runID string, offset any, data string) logAnswer {
	e.T.Helper()
	r := e.Raw(token, "POST", fmt.Sprintf("/api/v1/runs/%s/log?offset=%v", runID, offset), octets, []byte(data))
	if r.Status != want {
		e.T.Fatalf("upload at %v: %d %s, want %d", offset, r.Status, r.Body, want)
	}
	var a logAnswer
	if want == 200 {
		r.JSON(e.T, &a)
	}
	return a
}

func TestRunLogAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.Runs.LogLimit = 2048 })
		orgID := e.Org("acme")
		e.Project("acme", "ACME")
		e.Org("globex")
		viewer := e.RoleToken(orgID, "viewer")
		outsider := e.RoleToken(e.Org("initech"), "admin")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser"})
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Lexer"})
		runner := e.NewRunner("r1")
		queueRun(e, "ACME-1")
		l := runner.MustLease()
		path := "/api/v1/runs/" + l.ID + "/log"
		eventsBefore := runEvents(e, l.ID)

		// Upload: the answer says what is stored.
		r := e.Raw(runner.Token, "POST", path+"?offset=0", octets, []byte("hello "))
		if r.Status != 200 || sortedKeys(r.Map(t)) != "size,truncated" {
			t.Fatalf("first chunk: %d %s", r.Status, r.Body)
		}
		if a := upload(e, 200, runner.Token, l.ID, 0, "hello "); a != (logAnswer{Size: 6}) {
			t.Fatalf("a repeat: %+v", a)
		}
		if a := upload(e, 200, runner.Token, l.ID, 3, "lo world\n"); a != (logAnswer{Size: 12}) {
			t.Fatalf("an overlap: %+v", a)
		}
		if a := upload(e, 200, runner.Token, l.ID, 12, "\xff\x00{}\n"); a != (logAnswer{Size: 17}) {
			t.Fatalf("raw bytes: %+v", a)
		}
		// A gap: 409, the message names the stored size.
		r = e.Raw(runner.Token, "POST", path+"?offset=20", octets, []byte("x"))
		if r.Status != 409 || !strings.Contains(errOf(t, r).Error.Message, "holds 17 bytes") {
			t.Fatalf("a gap: %d %s", r.Status, r.Body)
		}
		// Bad input: the offset named, the media type, the size.
		for _, q := range []string{"", "?offset=", "?offset=-1", "?offset=1e3", "?offset=abc", "?offset=99999999999999999999"} {
			if r := e.Raw(runner.Token, "POST", path+q, octets, []byte("x")); r.Status != 400 || fields(t, r) != "offset" {
				t.Errorf("upload %q: %d %s", q, r.Status, r.Body)
			}
		}
		for _, ct := range []string{"", "application/json", "text/plain"} {
			if r := e.Raw(runner.Token, "POST", path+"?offset=17", ct, []byte("x")); r.Status != 415 || errOf(t, r).Error.Code != "unsupported" {
				t.Errorf("Content-Type %q: %d %s", ct, r.Status, r.Body)
			}
		}
		if r := e.Raw(runner.Token, "POST", path+"?offset=17", octets+"; charset=binary", []byte("!")); r.Status != 200 {
			t.Errorf("a media type with a parameter: %d %s", r.Status, r.Body)
		}
		if r := e.Raw(runner.Token, "POST", path+"?offset=18", octets, bytes.Repeat([]byte("x"), runproto.MaxLogChunk+1)); r.Status != 413 {
			t.Errorf("a chunk over 1 MiB: %d %s", r.Status, r.Body)
		}
		// Only the runner whose runner leased the run uploads: not the
		// agent session's run token, nor another runner token.
		queueRun(e, "ACME-2")
		other := runner.MustLease()
		upload(e, 403, other.Token, l.ID, 18, "x")
		upload(e, 403, l.Token, l.ID, 18, "x")
		upload(e, 403, viewer, l.ID, 18, "x")
		upload(e, 404, e.NewRunner("r2").Token, l.ID, 18, "x")
		upload(e, 401, "", l.ID, 18, "x")

		// Read: tracker.read on the ticket's project, while it runs.
		var page logPage
		e.Must(200, viewer, "GET", path, nil).JSON(t, &page)
		if page.Offset != 0 || page.NextOffset != 18 || page.Data != "hello world\n\ufffd\x00{}\n!" || page.Truncated || page.Finished {
			t.Fatalf("read: %+v", page)
		}
		e.Must(200, viewer, "GET", path+"?offset=6", nil).JSON(t, &page)
		if page.Offset != 6 || page.Data != "world\n\ufffd\x00{}\n!" {
			t.Fatalf("read from 6: %+v", page)
		}
		for _, q := range []string{"?offset=19", "?offset=-1", "?offset=x"} {
			if r := e.Must(400, viewer, "GET", path+q, nil); fields(t, r) != "offset" {
				t.Errorf("read %q: %s", q, r.Body)
			}
		}
		e.Must(404, outsider, "GET", path, nil)
		e.Must(401, "", "GET", path, nil)
		e.Must(404, viewer, "GET", "/api/v1/runs/nope/log", nil)

		// The limit: cut, marked, and then nothing more is kept.
		if a := upload(e, 200, runner.Token, l.ID, 18, strings.Repeat("a", 3000)); a != (logAnswer{Size: 2048, Truncated: true}) {
			t.Fatalf("past the limit: %+v", a)
		}
		if a := upload(e, 200, runner.Token, l.ID, 3018, "more"); a != (logAnswer{Size: 2048, Truncated: true}) {
			t.Fatalf("after the cut: %+v", a)
		}
		e.Must(200, viewer, "GET", path+"?offset=2000", nil).JSON(t, &page)
		if page.NextOffset != 2048 || page.Data != strings.Repeat("a", 48) || !page.Truncated {
			t.Fatalf("the truncated log's tail: %+v", page)
		}
		if got := runEvents(e, l.ID); strings.Join(got, ",") != strings.Join(eventsBefore, ",") {
			t.Fatalf("log uploads wrote events: %v, were %v", got, eventsBefore)
		}

		// After the finish the log takes no more chunks (409; the run
		// token still serves a repeated finish), is whole and says so.
		runner.Finish(l, 0)
		r = e.Raw(runner.Token, "POST", path+"?offset=2048", octets, []byte("late"))
		if r.Status != 409 || !strings.Contains(errOf(t, r).Error.Message, "not running") {
			t.Fatalf("after the finish: %d %s", r.Status, r.Body)
		}
		e.Must(200, viewer, "GET", path+"?offset=2048", nil).JSON(t, &page)
		if !page.Finished || page.NextOffset != 2048 || page.Data != "" {
			t.Fatalf("the finished run's log: %+v", page)
		}
	})
}

// TestRunLogConcurrentUploads: uploads of different chunks at one offset
// race; exactly one lands whole, every uploader gets 200 (the others'
// chunks end at the stored size: repeats).
func TestRunLogConcurrentUploads(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser"})
		runner := e.NewRunner("r1")
		queueRun(e, "ACME-1")
		l := runner.MustLease()
		upload(e, 200, runner.Token, l.ID, 0, "start\n")
		const n = 8
		chunks := make([]string, n)
		statuses := make([]int, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			chunks[i] = fmt.Sprintf("chunk %d of the racers\n", i)
			wg.Go(func() {
				<-start
				req, _ := http.NewRequest("POST", e.URL+"/api/v1/runs/"+l.ID+"/log?offset=6", strings.NewReader(chunks[i]))
				req.Header.Set("Authorization", "Bearer "+runner.Token)
				req.Header.Set("Content-Type", octets)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					statuses[i] = resp.StatusCode
					resp.Body.Close()
				}
			})
		}
		close(start)
		wg.Wait()
		var page logPage
		e.Admin(200, "GET", "/api/v1/runs/"+l.ID+"/log", nil).JSON(t, &page)
		won := -1
		for i, c := range chunks {
			if statuses[i] != 200 {
				t.Errorf("uploader %d: %d", i, statuses[i])
			}
			if page.Data == "start\n"+c {
				won = i
			}
		}
		if won < 0 {
			t.Fatalf("the log is not the first chunk and exactly one racer's: %q", page.Data)
		}
		var rows int64
		res, err := s.Query(t.Context(), `SELECT COUNT(*) FROM run_logs WHERE run_id = ?`, l.ID)
		if err == nil {
			err = res.Scan(0, &rows)
		}
		if err != nil || rows != 2 {
			t.Fatalf("%d chunks stored (%v), want 2", rows, err)
		}
	})
}
