package uitest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// AxeFile is axe-core's browser build, installed by npm ci in web/ (a dev
// dependency of the UI).
const AxeFile = "web/node_modules/axe-core/axe.min.js"

var axeSource = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(repoFile(AxeFile))
	if err != nil {
		return "", fmt.Errorf("axe-core: %w (run npm ci in web/, as .ci/run does)", err)
	}
	return string(b), nil
})

// Violation is an axe-core rule the page breaks, with the first elements
// that break it.
type Violation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(v.Targets, ", "))
}

// Axe runs axe-core on the page and returns its serious and critical
// violations.
func (p *Page) Axe() ([]Violation, error) {
	src, err := axeSource()
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.guarded()
	defer cancel()
	has, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.axe === "object"`))
	if err != nil {
		return nil, err
	}
	if !has {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](src+"\n;undefined")); err != nil {
			return nil, fmt.Errorf("load axe-core: %w", err)
		}
	}
	return chromedp.Run(ctx, chromedp.Evaluate[[]Violation](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({
			id: v.id, impact: v.impact, help: v.help,
			targets: v.nodes.slice(0, 5).map(n => n.target.join(" ")),
		})))`, chromedp.EvalAwaitPromise))
}

// controlsJS marks every visible control a keyboard user must reach
// (data-uitest-k = its index) and describes them: native controls (even
// when a tabindex of -1 takes them out of the Tab order: that is what is
// caught), elements with a control's role, and anything in the Tab order.
// A radio group, a tab list, a menu count as one control (Tab reaches one
// member; arrows move within). An element with a negative tabindex that
// is no control (a heading the app focuses) is left out.
const controlsJS = `(() => {
	const native = 'a[href], button, input:not([type=hidden]), select, textarea, summary';
	const roles = ["button", "link", "checkbox", "radio", "switch", "tab", "menuitem", "option", "textbox", "combobox", "slider", "spinbutton"];
	const sel = native + ', [tabindex], [contenteditable=""], [contenteditable="true"], ' + roles.map(r => '[role="' + r + '"]').join(", ");
	// checkVisibility: not display:none, not in a closed <details> (content-visibility), not visibility:hidden.
	const visible = e => e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true}) && !e.closest("[inert]");
	const out = [];
	for (const e of document.querySelectorAll(sel)) {
		delete e.dataset.uitestK;
		const control = e.matches(native) || roles.includes(e.getAttribute("role"));
		if (e.disabled || e.getAttribute("aria-disabled") === "true" || !visible(e)) continue;
		if (!control && e.tabIndex < 0) continue;
		if (e.id === "uitest-start") continue;
		let group = "";
		if (e.type === "radio" && e.name) group = "radio:" + e.name;
		const owner = e.closest('[role="tablist"], [role="radiogroup"], [role="menu"], [role="menubar"], [role="listbox"], [role="toolbar"]');
		if (owner && owner !== e) {
			if (!owner.dataset.uitestGroup) owner.dataset.uitestGroup = String(Math.random()).slice(2);
			group = "owner:" + owner.dataset.uitestGroup;
		}
		e.dataset.uitestK = String(out.length);
		const name = (e.getAttribute("aria-label") || e.labels?.[0]?.textContent || e.textContent || e.name || e.id || "").trim().replace(/\s+/g, " ").slice(0, 60);
		out.push({desc: e.tagName.toLowerCase() + (e.type ? "[type=" + e.type + "]" : "") + ' "' + name + '"', group});
	}
	return out;
})()`

// focusStartJS puts the focus on a sentinel before everything else, so
// that the next Tab goes to the page's first control.
const focusStartJS = `(() => {
	let s = document.getElementById("uitest-start");
	if (!s) { s = document.createElement("span"); s.id = "uitest-start"; s.tabIndex = -1; document.body.prepend(s); }
	s.focus();
	return document.activeElement === s;
})()`

// Unreachable tabs through the page from its start and returns the visible
// controls that never got the focus.
func (p *Page) Unreachable() ([]string, error) {
	type control struct {
		Desc  string `json:"desc"`
		Group string `json:"group"`
	}
	ctx, cancel := p.guarded()
	defer cancel()
	controls, err := chromedp.Run(ctx, chromedp.Evaluate[[]control](controlsJS))
	if err != nil {
		return nil, err
	}
	if len(controls) == 0 {
		return nil, nil
	}
	defer func() {
		_, _ = chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[chromedp.Void](`document.getElementById("uitest-start")?.remove()`))
	}()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](focusStartJS))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("could not focus the start of the page")
	}
	reached := map[int]bool{}
	// Past the last control the focus leaves the page (body); a page with
	// more stops than controls (focusable parts of a widget) gets slack.
	for i := 0; i < 2*len(controls)+20; i++ {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			return nil, err
		}
		k, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => {
			const e = document.activeElement;
			if (!e || e === document.body || e.id === "uitest-start") return -2;
			const k = e.closest("[data-uitest-k]");
			return k ? Number(k.dataset.uitestK) : -1;
		})()`))
		if err != nil {
			return nil, err
		}
		if k == -2 {
			break
		}
		if k >= 0 {
			reached[k] = true
		}
		if len(reached) == len(controls) {
			break
		}
	}
	groups := map[string]bool{}
	for i, c := range controls {
		if reached[i] && c.Group != "" {
			groups[c.Group] = true
		}
	}
	var missed []string
	for i, c := range controls {
		if !reached[i] && (c.Group == "" || !groups[c.Group]) {
			missed = append(missed, c.Desc)
		}
	}
	return missed, nil
}
