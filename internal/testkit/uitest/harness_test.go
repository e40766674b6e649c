package uitest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// harnessPages are two pages served by a plain server on 127.0.0.1: one a
// keyboard and screen-reader user can use, one that breaks every rule the
// harness checks.
var harnessPages = map[string]string{
	"/good": `<!doctype html><html lang="en"><head><title>Good</title></head><body><main>
<h1>Good</h1>
<a href="/good">A link</a>
<label>Name <input name="n"></label>
<button type="button">Save</button>
<fieldset><legend>Pick</legend><label><input type="radio" name="r" checked> one</label><label><input type="radio" name="r"> two</label></fieldset>
<button type="button" hidden>Hidden</button>
<details><summary>More</summary><label>Inside <input name="closed"></label></details>
<script>console.log("fine"); console.warn("a warning is no error"); document.body.dataset.ready = "1";</script>
</main></body></html>`,
	"/bad": `<!doctype html><html lang="en"><head><title>Bad</title></head><body><main>
<h1>Bad</h1>
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<button type="button">Reachable</button>
<button type="button" tabindex="-1" id="trap">Mouse only</button>
<div role="button" onclick="void 0">Fake button</div>
<script>
console.error("boom");
setTimeout(() => { document.body.dataset.ready = "1"; throw new Error("uncaught kaboom"); }, 0);
</script>
</main></body></html>`,
}

func harnessServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := harnessPages[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNoContent) // favicon
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestHarnessCatches: each check of the harness reports what it exists to
// catch on a page that breaks the rules, and nothing on one that keeps them.
func TestHarnessCatches(t *testing.T) {
	base := harnessServer(t)
	p := NewPage(t, base)

	p.Open("/good") // Check reports through the test: nothing on this page
	if t.Failed() {
		t.Fatal("the harness reports failures on a page that keeps every rule")
	}

	p.Do(navigate(base + "/bad"))
	p.WaitReady()
	errs, err := p.ConsoleErrors()
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(errs, "\n")
	for _, want := range []string{"error: boom", "uncaught kaboom"} {
		if !strings.Contains(joined, want) {
			t.Errorf("console errors %q lack %q", errs, want)
		}
	}
	vs, err := p.Axe()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(vs, func(v Violation) bool { return v.ID == "image-alt" && v.Impact == "critical" }) {
		t.Errorf("axe violations %v lack image-alt (critical)", vs)
	}
	missed, err := p.Unreachable()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`button[type=button] "Mouse only"`, `div "Fake button"`}; !slices.Equal(missed, want) {
		t.Errorf("unreachable controls %q, want %q", missed, want)
	}
}

// TestBinary: the browser is $BALLET_CHROMIUM; a missing one is an error
// naming it and how to skip (package parts decides whether the test fails
// or skips).
func TestBinary(t *testing.T) {
	for _, c := range []struct {
		name, skip, path string
		wantErr          []string // "" for none
	}{
		{name: "missing", path: "/nowhere/chromium", wantErr: []string{"/nowhere/chromium", "BALLET_SKIP_BROWSER=1"}},
		{name: "given", path: "/bin/sh"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(SkipEnv, c.skip)
			t.Setenv(BinaryEnv, c.path)
			got, err := binary()
			if c.wantErr == nil {
				if err != nil || got != c.path {
					t.Fatalf("binary() = %q, %v; want %s", got, err, c.path)
				}
				return
			}
			for _, w := range c.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("binary() error %v lacks %q", err, w)
				}
			}
		})
	}
}
