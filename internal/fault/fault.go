// Package fault injects crashes for the failure suite (ADR-0016
// "Validation"). With BALLET_FAULT unset, Hit does nothing. BALLET_FAULT
// lists points, each optionally with the hit that triggers it
// ("commit:flow.stage_started:3" kills the process at the third commit of a
// flow.stage_started event); the process then sends itself SIGKILL, exactly
// as an operator's kill -9 or a power cut would stop it.
//
// The points: "commit:<event type>", right after a transition recording
// such an event committed (internal/transition), and "handled:<job kind>", after
// a job handler returned and before its result is recorded (internal/job):
// the handler's own writes are in, its job runs again. The forges add
// their own around the calls that change or read a forge: "forge.merged"
// (internal/forge/gitforge) and "github.create_pr.before", ".after",
// "github.merge.before", ".after", "github.state.after"
// (internal/forge/github). Notifications add "notify.mail.sent", after the
// SMTP server accepted a mail and before its delivery is recorded
// (internal/notify), "digest.mail.sent", the same for a digest
// (internal/digest), and "webhook.sent", after a receiver's 2xx and before
// the attempt is recorded (internal/webhook).
package fault

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// EnvVar names the variable that arms fault points.
const EnvVar = "BALLET_FAULT"

type arm struct {
	at   int
	hits int
}

var (
	once  sync.Once
	mu    sync.Mutex
	armed map[string]*arm
)

func load() {
	armed = map[string]*arm{}
	for _, spec := range strings.Split(os.Getenv(EnvVar), ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		point, at := spec, 1
		if i := strings.LastIndexByte(spec, ':'); i > 0 {
			if n, err := strconv.Atoi(spec[i+1:]); err == nil && n > 0 {
				point, at = spec[:i], n
			}
		}
		armed[point] = &arm{at: at}
	}
}

// Armed reports whether any fault point is armed.
func Armed() bool {
	once.Do(load)
	return len(armed) > 0
}

// Hit counts a pass through point and kills the process when it is the
// armed hit.
func Hit(point string) {
	if !Armed() {
		return
	}
	mu.Lock()
	a, ok := armed[point]
	if ok {
		a.hits++
	}
	kill := ok && a.hits == a.at
	mu.Unlock()
	if kill {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	}
}
