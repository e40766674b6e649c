//go:build linux

package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runproto"
)

// BenchmarkSessionOverhead measures the runner's overhead per session
// against the real Core, with sessions = 1, 4 and 8 at once. Each
// iteration makes that many tickets ready at once, each a one-stage
// claude-code session that writes a file and reports done, and waits for
// their runs to finish. Per session it reports, as p50 and p99 in ms:
//
//   - queued-lease: Core's run created → leased by the runner (Core's
//     scheduling and the long poll);
//   - lease-cli: the runner has the lease → the CLI started (mirror
//     fetch, clone, branch, the CLI's config, the sandbox);
//   - cli-model: the CLI started → its first model request (the CLI's
//     own start, in the sandbox);
//   - lease-model: the sum, the runner's overhead before the model works;
//
// and the CPU time of a session's processes (the CLI, bwrap, git) and of
// this process (Core, the runner and the fake model) per session, and the
// peak resident memory of the largest session process.
//
//	go test -run '^$' -bench SessionOverhead -benchtime 3x ./internal/runner/
func BenchmarkSessionOverhead(b *testing.B) {
	for _, n := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			w := newCoreWorld(b, nil)
			w.oneStage("default", runproto.ClaudeCode)
			first := &firstRequests{next: w.fm, at: map[string]time.Time{}}
			srv := httptest.NewServer(first)
			b.Cleanup(srv.Close)
			o := w.options()
			o.Config.Sessions = n
			for i, kv := range o.Environ {
				if strings.HasPrefix(kv, "ANTHROPIC_BASE_URL=") {
					o.Environ[i] = "ANTHROPIC_BASE_URL=" + srv.URL
				}
			}
			marks := &sessionMarks{at: map[string]map[string]time.Time{}}
			o.Log = slog.New(&markHandler{next: o.Log.Handler(), marks: marks})
			w.start(o)

			var queuedLease, leaseCLI, cliModel, leaseModel []time.Duration
			childrenBefore, selfBefore := cpuTimes()
			b.ResetTimer()
			for i := range b.N {
				tags := map[string]string{} // ticket → tag
				for j := range n {
					tag := fmt.Sprintf("b%d-%d-%d", n, i, j)
					tags[w.ticket("task", fakemodel.Marker("report-done", "tag="+tag))] = tag
				}
				for key, tag := range tags {
					r := w.final(key, 1)
					if r.Status != "succeeded" {
						b.Fatalf("%s: run %+v", key, r)
					}
					var at struct {
						CreatedAt time.Time  `json:"created_at"`
						StartedAt *time.Time `json:"started_at"`
					}
					w.e.Admin(200, "GET", "/api/v1/runs/"+r.ID, nil).JSON(b, &at)
					leased, started := marks.get(r.ID, "session leased"), marks.get(r.ID, "session started")
					model := first.get(tag)
					if at.StartedAt == nil || leased.IsZero() || started.IsZero() || model.IsZero() {
						b.Fatalf("%s: run %s lacks a mark: leased at Core %v, by the runner %v, CLI started %v, first model request %v",
							key, r.ID, at.StartedAt, leased, started, model)
					}
					queuedLease = append(queuedLease, at.StartedAt.Sub(at.CreatedAt))
					leaseCLI = append(leaseCLI, started.Sub(leased))
					cliModel = append(cliModel, model.Sub(started))
					leaseModel = append(leaseModel, model.Sub(leased))
				}
			}
			b.StopTimer()
			childrenAfter, selfAfter := cpuTimes()
			sessions := float64(b.N * n)
			for _, m := range []struct {
				name string
				d    []time.Duration
			}{{"queued-lease", queuedLease}, {"lease-cli", leaseCLI}, {"cli-model", cliModel}, {"lease-model", leaseModel}} {
				b.ReportMetric(ms(percentile(m.d, 0.50)), m.name+"-p50-ms")
				b.ReportMetric(ms(percentile(m.d, 0.99)), m.name+"-p99-ms")
			}
			b.ReportMetric(ms(childrenAfter-childrenBefore)/sessions, "session-cpu-ms/op")
			b.ReportMetric(ms(selfAfter-selfBefore)/sessions, "core+runner-cpu-ms/op")
			b.ReportMetric(float64(peakChildRSS())/1024, "peak-session-rss-MiB")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the q-quantile of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

// cpuTimes returns the user and system time of this process's waited-for
// descendants (the sessions' processes) and of the process itself.
func cpuTimes() (children, self time.Duration) {
	var c, s syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	d := func(ru syscall.Rusage) time.Duration {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d(c), d(s)
}

// peakChildRSS is the largest resident set of any waited-for descendant,
// in KiB.
func peakChildRSS() int64 {
	var c syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	return c.Maxrss
}

// firstRequests passes model requests to the fake model and notes when
// the first one of each session (by its marker's tag) came.
type firstRequests struct {
	next http.Handler
	mu   sync.Mutex
	at   map[string]time.Time
}

var tagRE = regexp.MustCompile(`tag=([a-z0-9-]+)`)

func (f *firstRequests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if m := tagRE.FindSubmatch(body); m != nil {
		f.mu.Lock()
		if _, ok := f.at[string(m[1])]; !ok {
			f.at[string(m[1])] = now
		}
		f.mu.Unlock()
	}
	f.next.ServeHTTP(w, r)
}

func (f *firstRequests) get(tag string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at[tag]
}

// sessionMarks holds when the runner logged each message of each run.
type sessionMarks struct {
	mu sync.Mutex
	at map[string]map[string]time.Time // run → message → time
}

func (m *sessionMarks) get(run, msg string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at[run][msg]
}

// markHandler passes the runner's log on and notes the time of each
// record of a session's logger (which carries its run).
type markHandler struct {
	next  slog.Handler
	marks *sessionMarks
	run   string
}

func (h *markHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *markHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.run != "" {
		h.marks.mu.Lock()
		if h.marks.at[h.run] == nil {
			h.marks.at[h.run] = map[string]time.Time{}
		}
		if _, ok := h.marks.at[h.run][r.Message]; !ok {
			h.marks.at[h.run][r.Message] = r.Time
		}
		h.marks.mu.Unlock()
	}
	return h.next.Handle(ctx, r)
}

func (h *markHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := &markHandler{next: h.next.WithAttrs(as), marks: h.marks, run: h.run}
	for _, a := range as {
		if a.Key == "run" {
			c.run = a.Value.String()
		}
	}
	return c
}

func (h *markHandler) WithGroup(name string) slog.Handler {
	return &markHandler{next: h.next.WithGroup(name), marks: h.marks, run: h.run}
}
