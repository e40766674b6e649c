package uitest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// readyAtJS runs in every document before the page's scripts: it records
// when the page first says its data is there (body[data-ready="1"]), in
// the page's performance time.
const readyAtJS = `new MutationObserver(() => {
	if (!window.__uitestReadyAt && document.body?.dataset.ready === "1") window.__uitestReadyAt = performance.now();
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-ready"]});`

// loadTimes are a page load's timings in ms from navigation start.
type loadTimes struct {
	DCL   float64  `json:"dcl"`   // DOMContentLoaded handled
	Load  float64  `json:"load"`  // load event handled
	Ready float64  `json:"ready"` // the first body[data-ready="1"]: the data is shown
	JS    []string `json:"js"`    // the page and the scripts it loaded
}

// benchPage is a tab for measuring: no HTTP cache (every load is a first
// load) and the ready marker recorded.
func benchPage(b *testing.B, base, token string) *Page {
	b.Helper()
	p := NewPage(b, base)
	p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
		return err
	}))
	p.BeforeScripts(readyAtJS)
	if token != "" {
		p.SignIn(token, "/needs-me")
	}
	return p
}

// load loads path afresh and returns its timings.
func (p *Page) load(path string) loadTimes {
	p.T.Helper()
	p.Do(chromedp.Navigate(p.Base + path))
	p.WaitJS(`window.__uitestReadyAt`, "the page to be ready")
	return Eval[loadTimes](p, `(() => {
		const n = performance.getEntriesByType("navigation")[0];
		const js = performance.getEntriesByType("resource").map(e => e.name).filter(u => new URL(u).pathname.endsWith(".js"));
		return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, ready: window.__uitestReadyAt, js: [location.href.split("#")[0], ...js]};
	})()`)
}

// benchLoads loads path b.N times and reports the mean timings.
func benchLoads(b *testing.B, p *Page, path string) {
	b.Helper()
	var sum loadTimes
	b.ResetTimer()
	for range b.N {
		l := p.load(path)
		sum.DCL += l.DCL
		sum.Load += l.Load
		sum.Ready += l.Ready
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(sum.DCL/n, "ms-DOMContentLoaded")
	b.ReportMetric(sum.Load/n, "ms-load")
	b.ReportMetric(sum.Ready/n, "ms-ready")
	p.Screenshot("bench")
}

// BenchmarkFirstPageJS: the JavaScript the first pages download, gzipped
// (default level, as a server or proxy would send it): the sign-in page
// signed out, and Needs me signed in (the page after signing in).
func BenchmarkFirstPageJS(b *testing.B) {
	w := NewWorld(b)
	for _, c := range []struct{ name, token, path string }{
		{"signin", "", "/signin"},
		{"needs-me", apitest.BootstrapToken, "/needs-me"},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := benchPage(b, w.URL, c.token)
			var raw, gz int
			for range b.N {
				l := p.load(c.path)
				raw, gz = 0, 0
				for _, u := range l.JS[1:] {
					r, z := jsSize(b, u)
					raw += r
					gz += z
				}
			}
			b.ReportMetric(float64(gz), "gzip-JS-bytes")
			b.ReportMetric(float64(raw), "JS-bytes")
		})
	}
}

// jsSize fetches a script and returns its size and gzipped size.
func jsSize(b *testing.B, url string) (raw, gz int) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	return len(body), buf.Len()
}

// seedItems creates n tickets in project ACME's backlog (ready ones would
// start), four requests at a time.
func seedItems(b *testing.B, w *World, n int) {
	b.Helper()
	types := []string{"task", "bug", "docs"}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				r := w.Do(apitest.BootstrapToken, "POST", "/api/v1/projects/ACME/items", map[string]any{
					"type": types[i%len(types)], "title": fmt.Sprintf("Ticket %d", i)})
				if r.Status != 201 {
					errs <- fmt.Sprintf("create item %d: %d %s", i, r.Status, r.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		b.Fatal(e)
	}
}

// BenchmarkBoard10k: first load of a board of 10,000 tickets.
func BenchmarkBoard10k(b *testing.B) {
	w := NewWorld(b)
	seedItems(b, w, 10000)
	p := benchPage(b, w.URL, apitest.BootstrapToken)
	benchLoads(b, p, "/projects/ACME")
}

// ticketWithEvents creates ACME-1 and gives it n more events (title
// changes).
func ticketWithEvents(b *testing.B, w *World, n int) {
	b.Helper()
	var it struct{ Version int64 }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Busy"}).JSON(b, &it)
	for i := range n {
		w.Admin(200, "PATCH", "/api/v1/items/ACME-1", map[string]any{"version": it.Version, "title": fmt.Sprintf("Busy %d", i)}).JSON(b, &it)
	}
}

// BenchmarkTicket2000Events: first load of a ticket with 2,000 events.
func BenchmarkTicket2000Events(b *testing.B) {
	w := NewWorld(b)
	ticketWithEvents(b, w, 2000)
	p := benchPage(b, w.URL, apitest.BootstrapToken)
	benchLoads(b, p, "/items/ACME-1")
}

// BenchmarkEventToDOM: from committing an event through the API (a title
// change: Core's answer means committed) to the ticket page's timeline
// showing it (data-last-seq past it), on the same machine's clock.
func BenchmarkEventToDOM(b *testing.B) {
	w := NewWorld(b)
	var it struct{ Version int64 }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Live"}).JSON(b, &it)
	p := benchPage(b, w.URL, apitest.BootstrapToken)
	p.Open("/items/ACME-1")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		// The page records (epoch ms) when the timeline passes the seq it
		// shows now.
		Eval[bool](p, `(() => {
			const tl = document.querySelector('[data-testid="timeline"]');
			const last = Number(tl.dataset.lastSeq);
			window.__uitestShown = new Promise(res => {
				const o = new MutationObserver(() => {
					if (Number(tl.dataset.lastSeq) > last) { o.disconnect(); res(performance.timeOrigin + performance.now()); }
				});
				o.observe(tl, {attributes: true, attributeFilter: ["data-last-seq"]});
			});
			return true;
		})()`)
		start := time.Now()
		w.Admin(200, "PATCH", "/api/v1/items/ACME-1", map[string]any{"version": it.Version, "title": fmt.Sprintf("Live %d", i)}).JSON(b, &it)
		shown := Eval[float64](p, `window.__uitestShown`)
		lat = append(lat, time.UnixMicro(int64(shown*1000)).Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(ms(lat[len(lat)/2]), "ms-p50")
	b.ReportMetric(ms(lat[(len(lat)*99)/100]), "ms-p99")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
