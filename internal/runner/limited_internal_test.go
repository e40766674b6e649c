package runner

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/runner/agent"
	"github.com/ballet/ballet/internal/runner/meter"
	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/runproto"
)

// A session the provider refused ends interrupted provider_limit, with
// retry_at on the runner's clock from what the provider said (the CLI's
// account, else the meter's last refusal); a session that failed for
// something else, succeeded, reported before the refusal or was stopped
// for another interruption is left as it was.
func TestLimited(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	s := &session{r: &Runner{clock: clock.NewFake(now)}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	exited := proc.Result{Reason: proc.Exited, ExitCode: 1}
	refusal := func(status int, h ...string) *meter.Refusal {
		hh := http.Header{}
		for i := 0; i+1 < len(h); i += 2 {
			hh.Set(h[i], h[i+1])
		}
		return &meter.Refusal{Status: status, Header: hh}
	}
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, c := range []struct {
		name        string
		e           ending
		res         proc.Result
		out         agent.Result
		refusal     *meter.Refusal
		interrupted string
		retryAt     *time.Time
	}{
		{"retry-after printed", ending{err: []string{"opencode: APIError: Rate limit"}}, exited,
			agent.Result{Error: "x", Limit: &agent.Limit{Kind: agent.LimitRate, Status: 429, After: 30 * time.Second}}, nil,
			runproto.ReasonProviderLimit, at(30 * time.Second)},
		{"reset from the meter", ending{err: []string{"claude-code: API Error: Request rejected (429)"}}, exited,
			agent.Result{Error: "x", Limit: &agent.Limit{Kind: agent.LimitRate, Status: 429}},
			refusal(429, "Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "2026-12-07T03:05:00Z"),
			runproto.ReasonProviderLimit, at(5 * time.Minute)},
		{"no reset said", ending{err: []string{"claude-code: API Error: 529"}}, exited,
			agent.Result{Error: "x", Limit: &agent.Limit{Kind: agent.LimitOverloaded, Status: 529}}, nil,
			runproto.ReasonProviderLimit, nil},
		{"stopped by the watchdog while the CLI retried", ending{err: []string{"stopped by the watchdog"}}, proc.Result{Reason: proc.Watchdog},
			agent.Result{}, refusal(429, "Retry-After", "600"), runproto.ReasonProviderLimit, at(10 * time.Minute)},
		{"stopped by the watchdog, no refusal", ending{err: []string{"stopped by the watchdog"}}, proc.Result{Reason: proc.Watchdog},
			agent.Result{}, nil, "", nil},
		{"a refusal the CLI rode out", ending{err: []string{"the session ended without submit_report"}}, exited,
			agent.Result{}, refusal(429, "Retry-After", "1"), "", nil},
		{"another error", ending{err: []string{"claude-code: API Error: 500"}}, exited, agent.Result{Error: "x"}, nil, "", nil},
		{"succeeded", ending{}, proc.Result{Reason: proc.Exited}, agent.Result{Report: &agent.Report{Outcome: "done"}}, nil, "", nil},
		{"refused after the report", ending{err: []string{"the work could not be pushed"}}, exited,
			agent.Result{Report: &agent.Report{Outcome: "done"}, Error: "x", Limit: &agent.Limit{Kind: agent.LimitRate, After: time.Second}}, nil, "", nil},
		{"drained", ending{err: []string{"drained"}, interrupted: runproto.ReasonRunnerDrain}, proc.Result{Reason: proc.Cancelled},
			agent.Result{Limit: &agent.Limit{Kind: agent.LimitRate, After: time.Second}}, nil, runproto.ReasonRunnerDrain, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := c.e
			s.limited(&e, c.res, c.out, c.refusal)
			if e.interrupted != c.interrupted || (e.retryAt == nil) != (c.retryAt == nil) || (e.retryAt != nil && !e.retryAt.Equal(*c.retryAt)) {
				t.Errorf("interrupted %q, retry_at %v; want %q, %v", e.interrupted, e.retryAt, c.interrupted, c.retryAt)
			}
		})
	}
}
