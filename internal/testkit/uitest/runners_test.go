package uitest

import (
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// The runners page follows its runners' liveness without a reload (issue
// 23, finding 12): Core computes it from the heartbeats, and losing it is
// no event, so the page reads the list again while it is open. A runner
// that stops heartbeating turns silent once [runs] grace has passed, and
// alive again at its next heartbeat — in the same document.
func TestRunnersLivenessRefreshes(t *testing.T) {
	w := NewWorld(t, func(c *config.Config) { c.Runs.Grace.Duration = 3 * time.Second })
	// beats heartbeats every 300 ms until the function it returns is
	// called.
	beats := func() func() {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(300 * time.Millisecond):
					w.Must(200, w.Runner.Token, "POST", "/api/v1/runners/"+w.Runner.ID+"/heartbeat", nil)
				}
			}
		}()
		var once sync.Once
		return func() { once.Do(func() { close(stop); <-done }) }
	}
	stopBeats := beats()
	defer func() { stopBeats() }()

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/runners")
	p.WaitText(`[data-testid="runner"]`, "alive")
	Eval[bool](p, `(window.balletSameDocument = true)`)
	stopBeats()
	p.WaitText(`[data-testid="runner"]`, "silent")
	stopBeats = beats()
	p.WaitJS(`!(document.querySelector('[data-testid="runner"]')?.textContent ?? "silent").includes("silent")`, "the runner alive again")
	if !Eval[bool](p, `window.balletSameDocument === true`) {
		t.Fatal("the page was reloaded: liveness must refresh in place")
	}
}
