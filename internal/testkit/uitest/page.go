package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// Page is a browser tab of its own (its own cookies and storage) on a
// Core's UI.
type Page struct {
	T    testing.TB
	Ctx  context.Context // the tab's, for chromedp actions
	Base string          // the UI's origin, http://127.0.0.1:port

	mu      sync.Mutex
	errs    []string         // console errors not reported yet
	allowed []*regexp.Regexp // console errors a test expects
	marks   map[string]chan struct{}
	nmark   int
	shots   int
}

// signedOut is the one console error normal use causes: the browser logs
// the 401 of the app's probe of GET /api/v1/session when nobody is signed
// in (the sign-in page, or after signing out).
var signedOut = regexp.MustCompile(`status of 401 \(Unauthorized\) \(http://127\.0\.0\.1:\d+/api/v1/session:1\)$`)

// markPrefix starts the console messages Page.flush writes to know that
// every message before it has been read.
const markPrefix = "uitest-mark:"

// NewPage opens a tab on base (a Core's URL) in a browser context of its
// own. The console is read from the start; the tab closes when the test
// ends, reporting the console errors not reported yet.
func NewPage(t testing.TB, base string) *Page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(sharedBrowser(t), chromedp.WithNewBrowserContext())
	p := &Page{T: t, Ctx: ctx, Base: strings.TrimSuffix(base, "/"), marks: map[string]chan struct{}{},
		allowed: []*regexp.Regexp{signedOut}}
	msgs := chromedp.Console(ctx) // subscribes now, before any navigation
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			p.consoleMessage(m)
		}
	}()
	t.Cleanup(func() {
		if err := p.flush(); err == nil {
			p.reportConsole()
		}
		cancel()
		apitest.Receive(t, done, "the tab's console reader to stop")
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("uitest: open a tab: %v", err)
	}
	return p
}

func (p *Page) consoleMessage(m chromedp.ConsoleMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := strings.CutPrefix(m.Text, markPrefix); ok {
		if ch, ok := p.marks[id]; ok {
			close(ch)
			delete(p.marks, id)
		}
		return
	}
	switch m.Type {
	case chromedp.ConsoleError, chromedp.ConsoleException, "assert":
	default:
		return
	}
	text := m.String()
	if m.URL != "" {
		text += fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
	}
	for _, re := range p.allowed {
		if re.MatchString(text) {
			return
		}
	}
	p.errs = append(p.errs, text)
}

// AllowConsole lets console errors matching re pass, for a test that causes
// one on purpose (a refused request the browser logs).
func (p *Page) AllowConsole(re string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = append(p.allowed, regexp.MustCompile(re))
}

// flush returns once every console message written before it has been read:
// it writes a marker to the console and waits for the reader to see it (the
// console keeps the order of the messages).
func (p *Page) flush() error {
	p.mu.Lock()
	p.nmark++
	id := strconv.Itoa(p.nmark)
	ch := make(chan struct{})
	p.marks[id] = ch
	p.mu.Unlock()
	if _, err := chromedp.Run(p.Ctx, chromedp.Evaluate[chromedp.Void](`console.debug(`+strconv.Quote(markPrefix+id)+`), undefined`,
		chromedp.EvalIgnoreExceptions)); err != nil {
		return fmt.Errorf("write the console marker: %w", err)
	}
	select {
	case <-ch:
		return nil
	case <-time.After(apitest.HangGuard):
		return fmt.Errorf("the console marker never came back after %v", apitest.HangGuard)
	}
}

// ConsoleErrors returns the console errors seen since the last call (after
// flushing the console).
func (p *Page) ConsoleErrors() ([]string, error) {
	if err := p.flush(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := p.errs
	p.errs = nil
	return errs, nil
}

func (p *Page) reportConsole() {
	p.T.Helper()
	errs, err := p.ConsoleErrors()
	if err != nil {
		p.T.Errorf("uitest: %v", err)
	}
	for _, e := range errs {
		p.T.Errorf("browser console: %s", e)
	}
}

// Open loads path (a full page load), waits for the page's first data
// (data-ready="1") and checks it (Check).
func (p *Page) Open(path string) {
	p.T.Helper()
	p.Do(chromedp.Navigate(p.Base + path))
	p.WaitReady()
	p.Check(path)
}

// WaitReady waits until the page has loaded its data: the app sets
// body[data-ready="1"] after a page's first data load (and "0" while one
// loads).
func (p *Page) WaitReady() {
	p.T.Helper()
	p.WaitJS(`document.body.dataset.ready === "1"`, "the page to be ready (body[data-ready=1])")
}

// WaitJS polls expr in the page until it is truthy, failing the test with
// what after apitest.HangGuard.
func (p *Page) WaitJS(expr, what string) {
	p.T.Helper()
	deadline := time.Now().Add(apitest.HangGuard)
	for {
		_, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](`!!(`+expr+`)`,
			chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil {
			return
		}
		// A navigation (a redirect, a sign-in) replaced the document the
		// poll ran in: poll the new one.
		if navigated(err) && time.Now().Before(deadline) {
			continue
		}
		p.T.Fatalf("waiting for %s on %s: %v\n%s", what, p.location(), err, p.bodyText())
	}
}

// navigated tells the errors of an evaluation whose document went away.
func navigated(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find context with specified id") || strings.Contains(s, "Execution context was destroyed") ||
		strings.Contains(s, "Inspected target navigated or closed")
}

// guarded returns the tab's context bounded by apitest.HangGuard: a query
// waits for its element for ever otherwise.
func (p *Page) guarded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.Ctx, apitest.HangGuard)
}

// Do runs chromedp actions in the tab, failing the test on error (or after
// apitest.HangGuard).
func (p *Page) Do(steps ...chromedp.Action[chromedp.Void]) {
	p.T.Helper()
	ctx, cancel := p.guarded()
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.T.Fatalf("on %s: %v\n%s", p.location(), err, p.bodyText())
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise),
// failing the test on error.
func Eval[T any](p *Page, expr string) T {
	p.T.Helper()
	ctx, cancel := p.guarded()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.T.Fatalf("evaluate %s on %s: %v", expr, p.location(), err)
	}
	return v
}

// Click clicks the first element matching the CSS selector, once visible.
func (p *Page) Click(css string) {
	p.T.Helper()
	p.Do(chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
}

// Type replaces the value of the field matching the CSS selector with text
// as typing would (the field focused, its text selected, then the text
// inserted: input events, as from a keyboard).
func (p *Page) Type(css, text string) {
	p.T.Helper()
	p.Do(chromedp.Focus(chromedp.CSS(css), chromedp.NodeVisible),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			if _, err := chromedp.Evaluate[chromedp.Void](`(() => { const e = document.activeElement;
				if (e && "select" in e) e.select(); else document.execCommand("selectAll"); })()`)(ctx, t); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
			return err
		}))
}

// WaitText waits until the element matching the CSS selector contains
// text.
func (p *Page) WaitText(css, text string) {
	p.T.Helper()
	p.WaitJS(fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? "").includes(%s)`, jsString(css), jsString(text)),
		fmt.Sprintf("%q in %s", text, css))
}

// Text returns the text of the first element matching the CSS selector
// ("" when there is none).
func (p *Page) Text(css string) string {
	p.T.Helper()
	return Eval[string](p, fmt.Sprintf(`document.querySelector(%s)?.textContent ?? ""`, jsString(css)))
}

// Count returns the number of elements matching the CSS selector.
func (p *Page) Count(css string) int {
	p.T.Helper()
	return Eval[int](p, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(css)))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// location is the tab's URL, for messages.
func (p *Page) location() string {
	ctx, cancel := context.WithTimeout(p.Ctx, 5*time.Second)
	defer cancel()
	l, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "(unknown page)"
	}
	return l
}

// bodyText is the page's visible text, for failure messages.
func (p *Page) bodyText() string {
	ctx, cancel := context.WithTimeout(p.Ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
	if err != nil {
		return ""
	}
	return "page text:\n" + s
}

// Check checks the page as it is now: no console error since the last
// check, no serious or critical axe-core violation, every visible control
// reachable by keyboard; then it writes a screenshot named after name.
// Failures are reported, the test goes on.
func (p *Page) Check(name string) {
	p.T.Helper()
	where := p.location()
	errs, err := p.ConsoleErrors()
	if err != nil {
		p.T.Errorf("uitest: %v", err)
	}
	for _, e := range errs {
		p.T.Errorf("browser console on %s: %s", where, e)
	}
	vs, err := p.Axe()
	if err != nil {
		p.T.Errorf("uitest: axe-core on %s: %v", where, err)
	}
	for _, v := range vs {
		p.T.Errorf("accessibility on %s: %s", where, v)
	}
	p.Screenshot(name) // before Tab moves the focus
	missed, err := p.Unreachable()
	if err != nil {
		p.T.Errorf("uitest: keyboard check on %s: %v", where, err)
	}
	for _, m := range missed {
		p.T.Errorf("keyboard on %s: %s never gets focus with Tab", where, m)
	}
}

// Screenshot writes a full-page PNG of the tab to the screenshots folder
// ($BALLET_SCREENSHOTS, else the test's temporary folder).
func (p *Page) Screenshot(name string) {
	p.T.Helper()
	img, err := chromedp.Run(p.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.T.Errorf("uitest: screenshot %s: %v", name, err)
		return
	}
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		dir = p.T.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.T.Errorf("uitest: %v", err)
		return
	}
	p.shots++
	file := filepath.Join(dir, fmt.Sprintf("%s-%02d-%s.png", fileName(p.T.Name()), p.shots, fileName(name)))
	if err := os.WriteFile(file, img, 0o644); err != nil {
		p.T.Errorf("uitest: %v", err)
		return
	}
	p.T.Logf("screenshot: %s", file)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func fileName(s string) string {
	return strings.Trim(unsafeName.ReplaceAllString(s, "_"), "_")
}

// BeforeScripts runs js in every document the tab loads from now on,
// before the page's own scripts.
func (p *Page) BeforeScripts(js string) {
	p.T.Helper()
	p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: js})
		return err
	}))
}

// ColorScheme emulates the system's colour scheme ("light" or "dark", ""
// for the browser's own) for the tab's prefers-color-scheme media queries,
// from the next style recalculation on.
func (p *Page) ColorScheme(scheme string) {
	p.T.Helper()
	p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		params := emulation.SetEmulatedMediaParams{}
		if scheme != "" {
			params.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
		}
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, params)
		return err
	}))
}

// Press presses keys as a keyboard does, each rune a key (or a kb
// constant such as kb.Enter): a keyDown carrying the key's text, then a
// keyUp. Unlike chromedp.KeyEvent, whose text comes in a separate char
// event, a page that prevents a keydown's default keeps the text out of
// the focused field, as in a browser people use.
func (p *Page) Press(keys string) {
	p.T.Helper()
	for _, r := range keys {
		v, ok := kb.Keys[r]
		if !ok {
			p.T.Fatalf("uitest: no key for %q", r)
		}
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: v.Key, Code: v.Code,
			WindowsVirtualKeyCode: v.Windows, NativeVirtualKeyCode: v.Native}
		if v.Shift {
			down.Modifiers = int64(kb.ModifierShift)
		}
		if v.Print {
			down.Text, down.UnmodifiedText = v.Text, v.Unmodified
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			for _, e := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, e); err != nil {
					return fmt.Errorf("press %q: %w", r, err)
				}
			}
			return nil
		}))
	}
}

// Tab presses the Tab key.
func (p *Page) Tab() {
	p.T.Helper()
	p.Do(chromedp.KeyEvent(kb.Tab))
}

func navigate(url string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(url) }
