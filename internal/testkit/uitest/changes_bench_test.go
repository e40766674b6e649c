package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// shownJS runs in every document before the page's scripts: it records
// when the ticket page first shows a 500-entry transcript and a diff of
// 2,000 added lines (__uitestShownAt), then when the browser has laid out
// and painted it and runs the next task (__uitestInteractiveAt: a click
// would be handled then), in the page's performance time.
const shownJS = `new MutationObserver((_, o) => {
	if (window.__uitestShownAt || !document.body) return;
	const t = document.querySelectorAll('[data-testid="transcript"] > li').length;
	const d = document.querySelectorAll('table.diff tr.add').length;
	if (t < 500 || d < 2000) return;
	window.__uitestShownAt = performance.now();
	o.disconnect();
	requestAnimationFrame(() => setTimeout(() => { window.__uitestInteractiveAt = performance.now(); }, 0));
}).observe(document, {subtree: true, childList: true});`

// sessionLog is a claude-code stream-json log of n transcript entries:
// the agent's words, its shell calls and their results, in turn.
func sessionLog(n int) []byte {
	var b strings.Builder
	line := func(v any) {
		j, _ := json.Marshal(v)
		b.Write(j)
		b.WriteByte('\n')
	}
	msg := func(typ, role string, block map[string]any) {
		line(map[string]any{"type": typ, "timestamp": "2026-12-01T15:41:14.429Z",
			"message": map[string]any{"role": role, "model": "claude-sonnet-4-5", "content": []any{block}}})
	}
	for i := range n {
		id := fmt.Sprintf("toolu_%d", i/3)
		switch i % 3 {
		case 0:
			msg("assistant", "assistant", map[string]any{"type": "text", "text": fmt.Sprintf("Step %d: I read the failing test and change the parser so that it accepts an empty section.", i)})
		case 1:
			msg("assistant", "assistant", map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("go test ./internal/config/... -run TestParse%d", i)}})
		case 2:
			msg("user", "user", map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok  \tgithub.com/acme/app/internal/config\t0.012s"})
		}
	}
	return []byte(b.String())
}

// bigChange is 20 files of 100 new lines each, in the languages the diff
// highlights.
func bigChange() map[string]string {
	gen := map[string]func(i int) string{
		"go": func(i int) string {
			return fmt.Sprintf("func step%d(x int) (int, error) { return x * %d, nil } // step %d", i, i, i)
		},
		"ts": func(i int) string {
			return fmt.Sprintf("export const step%d = (x: number): number => x * %d; // step %d", i, i, i)
		},
		"yaml": func(i int) string {
			return fmt.Sprintf("step%d: {name: \"step %d\", retries: %d, enabled: true}", i, i, i%5)
		},
		"py": func(i int) string { return fmt.Sprintf("step%d = lambda x: x * %d  # step %d", i, i, i) },
		"md": func(i int) string {
			return fmt.Sprintf("- Step **%d**: read `config.yaml`, then [run it](#step-%d).", i, i)
		},
	}
	exts := []string{"go", "ts", "yaml", "py", "md"}
	files := map[string]string{}
	for f := range 20 {
		ext := exts[f%len(exts)]
		var b strings.Builder
		for i := range 100 {
			b.WriteString(gen[ext](f*100+i) + "\n")
		}
		files[fmt.Sprintf("src/part%02d.%s", f, ext)] = b.String()
	}
	return files
}

// BenchmarkTicketChanges2000Lines: first load (no HTTP cache) of a ticket
// waiting for approval whose branch adds 2,000 lines in 20 files (all
// shown, highlighted) with its run's 500-entry transcript open
// (/items/ACME-1#run-ID), until both are shown (ms-shown) and the page,
// laid out and painted, runs its next task (ms-interactive), from
// navigation start; ms-changes-read and ms-transcript-read are when the
// two answers had arrived; ms-main-thread is the time the tab's main
// thread was busy (tasks: script, style, layout, paint) for the load and
// ms-main-thread-cpu the CPU time it used: the part of the figure a
// machine shared with other work does not stretch.
func BenchmarkTicketChanges2000Lines(b *testing.B) {
	w := NewWorld(b)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "A big change", "state": "ready"})
	r := w.Runner.MustLease()
	if resp := w.Raw(w.Runner.Token, "POST", "/api/v1/runs/"+r.ID+"/log?offset=0", "application/octet-stream", sessionLog(500)); resp.Status != 200 {
		b.Fatalf("log upload: %d %s", resp.Status, resp.Body)
	}
	w.Repo.CommitFiles("ballet/ACME-1", bigChange(), "ACME-1 implement: the big change\n\nBallet-Ticket: ACME-1\nBallet-Stage: implement\nBallet-Run: "+r.ID)
	if status, body := w.Runner.Report(r, "done", "Changed a lot."); status != 200 {
		b.Fatalf("report: %d %s", status, body)
	}
	w.Must(200, w.Runner.Token, "POST", "/api/v1/runs/"+r.ID+"/finish", map[string]any{"exit_status": 0})
	w.AwaitFlow("ACME-1", "the approval", func(f Flow) bool { return f.Waiting == "approval" })
	var tr struct{ Entries []any }
	w.Admin(200, "GET", "/api/v1/runs/"+r.ID+"/transcript", nil).JSON(b, &tr)
	var ch struct{ Files []struct{ Additions int } }
	w.Admin(200, "GET", "/api/v1/items/ACME-1/changes", nil).JSON(b, &ch)
	adds := 0
	for _, f := range ch.Files {
		adds += f.Additions
	}
	if len(tr.Entries) != 500 || len(ch.Files) != 20 || adds != 2000 {
		b.Fatalf("the ticket has %d transcript entries and %d files adding %d lines, want 500, 20 and 2000", len(tr.Entries), len(ch.Files), adds)
	}

	p := benchPage(b, w.URL, apitest.BootstrapToken)
	p.BeforeScripts(shownJS)
	p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, enableMetrics, cdp.Empty{})
		return err
	}))
	var shown, interactive, changes, transcript, busy, cpu float64
	b.ResetTimer()
	for range b.N {
		p.Do(chromedp.Navigate("about:blank"))
		before, beforeCPU := mainThread(p)
		p.Do(chromedp.Navigate(p.Base + "/items/ACME-1#run-" + r.ID))
		p.WaitJS(`window.__uitestInteractiveAt`, "the changes and the transcript")
		t := Eval[struct{ Shown, Interactive, Changes, Transcript float64 }](p, `(() => {
			const end = (suffix) => performance.getEntriesByType("resource").find(e => new URL(e.name).pathname.endsWith(suffix))?.responseEnd ?? 0;
			return {shown: window.__uitestShownAt, interactive: window.__uitestInteractiveAt, changes: end("/changes"), transcript: end("/transcript")};
		})()`)
		after, afterCPU := mainThread(p)
		busy += (after - before) * 1000
		cpu += (afterCPU - beforeCPU) * 1000
		shown += t.Shown
		interactive += t.Interactive
		changes += t.Changes
		transcript += t.Transcript
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(shown/n, "ms-shown")
	b.ReportMetric(interactive/n, "ms-interactive")
	b.ReportMetric(busy/n, "ms-main-thread")
	b.ReportMetric(cpu/n, "ms-main-thread-cpu")
	b.ReportMetric(changes/n, "ms-changes-read")
	b.ReportMetric(transcript/n, "ms-transcript-read")
	p.Check("bench-ticket-changes")
}

// The DevTools Performance domain's commands (declared here: go vet
// cannot resolve cdproto's own performance package).
var (
	enableMetrics = cdp.Command[cdp.Empty, cdp.Empty]{Method: "Performance.enable"}
	getMetrics    = cdp.Command[cdp.Empty, struct {
		Metrics []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"metrics"`
	}]{Method: "Performance.getMetrics"}
)

// mainThread is the tab's main-thread busy time and CPU time so far (the
// Performance domain's TaskDuration and ThreadTime, in seconds).
func mainThread(p *Page) (busy, cpu float64) {
	p.T.Helper()
	p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		m, err := cdp.Call(ctx, t, getMetrics, cdp.Empty{})
		if err != nil {
			return err
		}
		for _, x := range m.Metrics {
			switch x.Name {
			case "TaskDuration":
				busy = x.Value
			case "ThreadTime":
				cpu = x.Value
			}
		}
		return nil
	}))
	return busy, cpu
}
