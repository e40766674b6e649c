// Package uitest drives Ballet's web UI in a real, headless Chromium from
// go test: one browser per test binary (TestMain calls Main), a tab of its
// own (own cookies) per test, against a real Core on 127.0.0.1 over a real
// SQLite file (Start).
//
// Every page a test opens is checked the same way (Page.Check): no error in
// the browser's console (console.error, an uncaught exception, an error
// entry of the browser log) since the tab opened, no serious or critical
// axe-core violation, every visible control reachable with Tab, and a
// screenshot written to $BALLET_SCREENSHOTS (else the test's temporary
// folder).
//
// The browser is $BALLET_CHROMIUM, else /usr/bin/chromium (Debian's
// chromium, which .ci/run installs). BALLET_SKIP_BROWSER=1 skips the tests
// that need it; a missing browser fails them under CI=true and is a counted
// skip elsewhere (package parts). axe-core is read from
// web/node_modules (npm ci in web/).
package uitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ballet/ballet/internal/testkit/giteatest"
	"github.com/ballet/ballet/internal/testkit/parts"
)

// SkipEnv set to 1 skips every test that needs the browser.
const SkipEnv = "BALLET_SKIP_BROWSER"

// BinaryEnv names the browser binary.
const BinaryEnv = "BALLET_CHROMIUM"

// ScreenshotsEnv names the folder the screenshots are written to.
const ScreenshotsEnv = "BALLET_SCREENSHOTS"

// DefaultBinary is where Debian's chromium package puts the browser.
const DefaultBinary = "/usr/bin/chromium"

// binary returns the browser's path, or why there is none.
func binary() (string, error) {
	path := os.Getenv(BinaryEnv)
	if path == "" {
		path = DefaultBinary
	}
	if _, err := exec.LookPath(path); err != nil {
		return "", fmt.Errorf("chromium not found at %s (apt-get install chromium, as .ci/run does, or set %s); %s=1 skips the tests that need it: %w",
			path, BinaryEnv, SkipEnv, err)
	}
	return path, nil
}

// shared is the test binary's one browser, started by the first test that
// needs it and stopped by Main.
var shared struct {
	once   sync.Once
	ctx    context.Context // the browser's; tabs are its children
	cancel context.CancelFunc
	err    error
}

// Main runs the package's tests (through giteatest.Main, which stops the
// package's shared Gitea when a test started it) and then stops the
// browser; call it from TestMain.
func Main(m *testing.M) {
	code := giteatest.Main(m)
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(code)
}

// sharedBrowser returns the shared browser's context, starting it on first use;
// it skips or fails the test when there is no browser (package doc).
func sharedBrowser(t testing.TB) context.Context {
	t.Helper()
	parts.Asked(t, parts.Chromium, SkipEnv)
	path, err := binary()
	if err != nil {
		parts.Missing(t, parts.Chromium, fmt.Errorf("uitest: %w", err))
	}
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // as root, Chromium's sandbox refuses to start
			chromedp.DisableGPU,
			chromedp.WindowSize(1280, 900),
			chromedp.Flag("lang", "en-US"),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		shared.ctx = bctx
		shared.cancel = func() { cancelBrowser(); cancelAlloc() }
		shared.err = chromedp.Do(bctx) // starts the browser
	})
	if shared.err != nil {
		t.Fatalf("uitest: start chromium %s: %v", path, shared.err)
	}
	return shared.ctx
}

// repoFile returns the path of a file of the repository, given relative to
// its root (go test runs a package's tests in its folder).
func repoFile(rel string) string {
	return filepath.Join("..", "..", "..", filepath.FromSlash(rel))
}
