package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/runner/agent"
	"github.com/ballet/ballet/internal/runner/meter"
	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/runner/protocol"
	"github.com/ballet/ballet/internal/runner/sandbox"
	"github.com/ballet/ballet/internal/runner/workspace"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/text"
)

// defaultStageTimeout is a stage's timeout when the lease names none (the
// spec's two hours).
const defaultStageTimeout = 2 * time.Hour

// noCLI is the exit status finished for a session whose CLI never ran.
const noCLI = -1

// session is one leased run, from the lease to its finish.
type session struct {
	r     *Runner
	lease runproto.Lease
	log   *slog.Logger

	stopOnce sync.Once
	stopped  chan struct{} // closed by stop
	reason   string        // why it was stopped (set before stopped is closed)
	// interruption, set with reason, is the infrastructure's reason when
	// the stop is an interruption (runner_drain): the run then ends
	// interrupted, and its stage runs again.
	interruption string
	done         chan struct{} // closed when the session has finished

	// The usage the CLI's output has told so far, and what Core was last
	// told of it: the heartbeats send the running total whenever it grew,
	// so a runner killed mid-session leaves its run's spend counted.
	usageMu   sync.Mutex
	usage     runproto.Usage
	usageSent runproto.Usage
	// usageNow, once the CLI runs, reads the usage so far from its output
	// and meter: the heartbeats use it, since the meter counts between
	// lines (a model answer served while a command runs).
	usageNow func() runproto.Usage
}

func newSession(r *Runner, l runproto.Lease) *session {
	key := l.Session.Ticket.Key
	if key == "" {
		key = l.Run.Item
	}
	return &session{r: r, lease: l, stopped: make(chan struct{}), done: make(chan struct{}),
		log: r.log.With("run", l.Run.ID, "ticket", key, "stage", l.Session.Stage.ID, "adapter", l.Session.Stage.Adapter)}
}

// stop stops the session at once (the first reason counts).
func (s *session) stop(reason string) { s.interrupt("", reason) }

// interrupt stops the session at once because of the runner's
// infrastructure (interruption, one of runproto.RunnerReasons; "": a plain
// stop); the first stop counts.
func (s *session) interrupt(interruption, reason string) {
	s.stopOnce.Do(func() {
		s.reason, s.interruption = reason, interruption
		close(s.stopped)
	})
}

func (s *session) isStopped() bool {
	select {
	case <-s.stopped:
		return true
	default:
		return false
	}
}

// ending is how a session ended: what finish reports, and the workspace
// left to clean up.
type ending struct {
	exit  int
	usage *runproto.Usage
	err   []string
	ws    *workspace.Workspace
	ahead *int   // commits of the branch ahead of the default branch after the session (nil: not known)
	model string // the model that served the session ("": not known)
	// interrupted: the session ended because of the runner's
	// infrastructure or the model's provider (one of
	// runproto.RunnerReasons), not of the agent.
	interrupted string
	// retryAt: with interrupted provider_limit, when the provider said
	// the limit is over (nil: it did not say).
	retryAt *time.Time
}

func (e *ending) fail(format string, args ...any) {
	e.err = append(e.err, fmt.Sprintf(format, args...))
}

// run works the session and finishes its run.
func (s *session) run(life context.Context) {
	defer close(s.done)
	r, l := s.r, s.lease
	s.log.Info("session leased", "iteration", l.Session.Stage.Iteration)
	hbCtx, stopBeats := context.WithCancel(life)
	beats := make(chan struct{})
	go func() { defer close(beats); s.heartbeats(hbCtx) }()
	defer func() { stopBeats(); <-beats }()

	up := newUploader(func(ctx context.Context, offset int64, data []byte) (runproto.LogAppended, error) {
		return r.client.AppendLog(ctx, l.Run.ID, offset, data)
	}, r.clock, s.log, l.Session.Log.Limit, r.retry)
	upCtx, stopUpload := context.WithCancel(life)
	defer stopUpload()
	go up.run(upCtx)

	e := s.work(life, up)
	up.flush(life, r.timing.LogFlush, r.timing.FinishFor)
	stopUpload()

	run, ok := s.finish(life, e)
	if ws := e.ws; ws != nil {
		if ok && endedWithOutcome(run) {
			if err := ws.DropCheckpoint(life); err != nil {
				s.log.Warn("deleting the stage's checkpoint", "err", err)
			}
		}
		if err := ws.Remove(); err != nil {
			s.log.Warn("removing the run's folder", "err", err)
		}
	}
}

// work prepares the workspace, runs the CLI and takes its work back.
func (s *session) work(life context.Context, up *uploader) *ending {
	r, l := s.r, s.lease
	e := &ending{exit: noCLI}
	// ctx ends when the session is stopped before its CLI runs.
	ctx, cancel := context.WithCancel(life)
	defer cancel()
	go func() {
		select {
		case <-s.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	name := l.Session.Stage.Adapter
	if name == "" {
		name = l.Run.Adapter
	}
	r.mu.Lock()
	ad := r.adapters[name]
	r.mu.Unlock()
	repo := l.Session.Repository
	switch {
	case ad == nil:
		e.fail("this runner cannot run the adapter %q", name)
		return e
	case repo == nil:
		e.fail("the project has no repository: an agent session needs one")
		return e
	}
	spec := workspace.Spec{Run: l.Run.ID, Ticket: l.Session.Ticket.Key, Stage: l.Session.Stage.ID,
		Remote: workspace.Remote{URL: repo.URL, DefaultBranch: repo.DefaultBranch}}
	if c := l.Session.Credential; c != nil {
		spec.Remote.Credential = &workspace.Credential{Username: c.Username, Password: c.Secret}
	}
	ws, err := r.ws.Prepare(ctx, spec)
	if err != nil {
		if s.isStopped() {
			e.interrupted = s.interruption
			e.fail("%s", s.reason)
		} else {
			e.fail("preparing the workspace: %v", err)
		}
		return e
	}
	e.ws = ws
	var restored *agent.Checkpoint
	if rs := ws.Restored; rs != nil {
		restored = &agent.Checkpoint{Merged: rs.Merged, Conflicts: rs.Conflicts, Kept: rs.Kept}
		s.log.Info("restored the stage's checkpoint", "commit", rs.Commit, "merged", rs.Merged, "conflicts", len(rs.Conflicts))
	}
	// The session's meter (when its adapter asks for one) counts what the
	// model serves, whatever the CLI tells before it is stopped.
	var m *meter.Meter
	defer func() {
		if m != nil {
			_ = m.Close()
		}
	}()
	startMeter := func(upstream string) (string, error) {
		if m != nil {
			return "", fmt.Errorf("a second model API %s: one meter per session", upstream)
		}
		var err error
		if m, err = meter.Start(upstream, s.log); err != nil {
			return "", err
		}
		return m.URL(), nil
	}
	cmd, err := ad.Prepare(agent.Spec{Session: l.Session, RunToken: l.RunToken, Workspace: ws.Dir, Home: ws.Home,
		Checkpoint: restored, Environ: r.opts.Environ, PassEnv: r.cfg.PassEnv, Meter: startMeter})
	if err != nil {
		e.fail("preparing the session: %v", err)
		return e
	}
	exe, err := exec.LookPath(cmd.Path)
	if err != nil {
		e.fail("the agent CLI: %v", err)
		return e
	}
	wrapped, err := r.sandbox.Wrap(sandbox.Session{Command: sandbox.Command{Path: exe, Args: cmd.Args, Env: cmd.Env},
		Workspace: ws.Dir, Home: ws.Home, ReadOnly: installRoot(exe)})
	if err != nil {
		e.interrupted = runproto.ReasonSandboxStart
		e.fail("the sandbox: %v", err)
		return e
	}
	if s.isStopped() {
		e.interrupted = s.interruption
		e.fail("%s", s.reason)
		return e
	}
	timeout := time.Duration(l.Session.Stage.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultStageTimeout
	}
	out := ad.Output(cmd.Model)
	var outMu sync.Mutex // out is read by the output's reader and the heartbeats
	usageNow := func() runproto.Usage {
		outMu.Lock()
		defer outMu.Unlock()
		if m != nil {
			out.Served(m.Usage())
		}
		return out.Result().Usage
	}
	s.usageMu.Lock()
	s.usageNow = usageNow
	s.usageMu.Unlock()
	var ps *proc.Session
	var psMu sync.Mutex
	onLine := func(line []byte, truncated bool) {
		outMu.Lock()
		ev := out.Line(line, truncated)
		outMu.Unlock()
		if !ev.Quiet {
			_, _ = up.Write(line)
			_, _ = up.Write([]byte{'\n'})
		}
		s.told(usageNow())
		psMu.Lock()
		p := ps
		psMu.Unlock()
		if ev.Final && p != nil {
			p.Final()
		}
		if ev.Abort != "" {
			s.stop(ev.Abort)
		}
	}
	psMu.Lock()
	ps, err = proc.Start(life, proc.Spec{
		ID: l.Run.ID, Path: wrapped.Path, Args: wrapped.Args, Env: wrapped.Env, Dir: wrapped.Dir,
		OnLine: onLine, Idle: r.cfg.Watchdog.Duration, Timeout: timeout,
		FinalGrace: r.timing.FinalGrace, KillGrace: r.timing.KillGrace, TermInside: wrapped.Wrapper,
		Handshake: wrapped.Wrapper, Clock: r.clock, StateDir: r.stateDir,
	})
	psMu.Unlock()
	if err != nil {
		// The process (in its sandbox) did not start: no agent ran.
		e.interrupted = runproto.ReasonSandboxStart
		e.fail("starting the agent CLI: %v", err)
		return e
	}
	s.log.Info("session started", "pid", ps.PID(), "sandbox", r.cfg.Sandbox, "timeout", timeout, "restored", restored != nil)

	ckCtx, stopCheckpoints := context.WithCancel(life)
	checkpoints := make(chan struct{})
	go func() {
		defer close(checkpoints)
		ws.CheckpointEvery(ckCtx, r.clock, r.cfg.Checkpoint.Duration, func(c workspace.CheckpointResult, err error) {
			if err != nil {
				s.log.Warn("checkpoint failed", "err", err)
			} else if c.Pushed {
				s.log.Info("checkpoint pushed", "commit", c.Commit)
			}
		})
	}()
	select {
	case <-ps.Done():
	case <-s.stopped:
		ps.Stop()
	}
	res := ps.Wait()
	stopCheckpoints()
	<-checkpoints
	if m != nil {
		_ = m.Close() // what the CLI was still receiving is counted as far as it came
	}
	usageNow()
	outMu.Lock()
	final := out.Result()
	outMu.Unlock()
	var refusal *meter.Refusal
	if m != nil {
		if rf, ok := m.LastRefusal(); ok {
			refusal = &rf
		}
	}
	s.ended(life, e, res, final)
	s.limited(e, res, final, refusal)
	return e
}

// ended decides, from how the CLI ended and what it printed, the exit
// status and error to report, and takes the agent's work back: published
// on the branch when the session reported and ended well, else kept in the
// stage's checkpoint.
func (s *session) ended(ctx context.Context, e *ending, res proc.Result, out agent.Result) {
	r, ws := s.r, e.ws
	e.exit = res.ExitCode
	if res.Signal != 0 {
		e.exit = 128 + int(res.Signal)
	}
	u := bounded(out.Usage)
	e.usage = &u
	e.model = cutModel(out.Model)
	clean := false // the CLI ended by itself without error
	if refusedAfterReport(res, out) {
		s.log.Warn("the model's provider refused the session after its report: the report stands", "err", out.Error)
		e.exit, out.Error = 0, ""
	}
	switch res.Reason {
	case proc.Exited:
		clean = e.exit == 0
	case proc.FinalGrace:
		// It printed its final line and then hung (a known trouble of
		// both CLIs): the session is over; the hang is no failure of it.
		if out.Final && out.Error == "" {
			e.exit, clean = 0, true
			s.log.Warn("the CLI did not exit after its final line; it was stopped", "grace", r.timing.FinalGrace)
		} else {
			e.fail("stopped: still running %s after its final line", r.timing.FinalGrace)
		}
	case proc.Watchdog:
		e.fail("stopped by the watchdog: no output for %s ([runner] watchdog)", r.cfg.Watchdog.Duration)
	case proc.Deadline:
		e.fail("stopped: past the stage's timeout")
	case proc.Cancelled:
		e.interrupted = s.interruption
		e.fail("%s", or(s.reason, "stopped"))
	}
	if out.Error != "" {
		clean = false
		e.fail("%s", out.Error)
	}
	if res.Reason == proc.Exited && e.exit != 0 && out.Error == "" {
		e.fail("the agent CLI exited with status %d%s", e.exit, stderrTail(res.Stderr))
	}
	if res.Err != nil {
		s.log.Warn("reading the session's output", "err", res.Err)
	}
	if out.Report == nil && (res.Reason == proc.Exited || res.Reason == proc.FinalGrace) {
		e.fail("the session ended without submit_report")
	}
	s.log.Info("session ended", "how", res.String(), "exit", e.exit, "reported", out.Report != nil,
		"input_tokens", u.InputTokens, "output_tokens", u.OutputTokens, "cost_usd", u.CostUSD)

	if clean && out.Report != nil {
		p, err := ws.Publish(ctx, out.Report.Summary)
		if err == nil {
			// What the branch holds now: Core tells a stage that left
			// nothing to review from one that did.
			if n, aerr := ws.Ahead(ctx, p); aerr != nil {
				s.log.Warn("counting the branch's commits ahead of the default branch", "err", aerr)
			} else {
				e.ahead = &n
			}
		}
		switch {
		case err == nil && p.Pushed:
			s.log.Info("pushed the agent's work", "branch", ws.Branch, "commit", p.Commit, "ahead", *or0(e.ahead))
			return
		case err == nil:
			s.log.Info("the agent changed nothing: nothing pushed", "ahead", *or0(e.ahead))
			return
		}
		// The work could not be pushed: the session has not succeeded.
		e.exit = 1
		e.fail("the agent's work could not be pushed to %s: %v", ws.Branch, err)
	}
	c, err := ws.Checkpoint(ctx)
	switch {
	case err != nil:
		s.log.Error("the last checkpoint failed: the session's latest work is lost", "err", err)
	case c.Pushed:
		s.log.Info("kept the session's work in the stage's checkpoint", "commit", c.Commit)
	}
}

// limited turns a session the model's provider refused into an
// interruption (provider_limit) with the time the provider said the limit
// is over: the CLI's own account of the refusal (its final error, with the
// reset time when it printed one), else the last answer of the model API
// the meter saw, when it refused for a limit and the session was stopped
// while the CLI still waited (by the watchdog or the stage's timeout: a
// CLI retrying a limit prints nothing). A session that succeeded, or that
// ended for another reason of the runner's (a drain, the kill switch), is
// left as it is; the reset time comes from the meter's refusal when the
// CLI printed none.
func (s *session) limited(e *ending, res proc.Result, out agent.Result, refusal *meter.Refusal) {
	if e.interrupted != "" || len(e.err) == 0 || refusedAfterReport(res, out) {
		return
	}
	lim := out.Limit
	if lim == nil && refusal != nil && out.Report == nil && (res.Reason == proc.Watchdog || res.Reason == proc.Deadline) {
		lim = meterLimit(refusal.Status)
	}
	if lim == nil {
		return
	}
	now := s.r.clock.Now()
	if lim.After == 0 && lim.At.IsZero() && refusal != nil {
		lim.Reset(headerMap(refusal.Header), now)
	}
	e.interrupted = runproto.ReasonProviderLimit
	e.retryAt = lim.RetryAt(now)
	s.log.Warn("the model's provider refused the session", "kind", lim.Kind, "status", lim.Status, "retry_at", e.retryAt,
		"err", errorText(e.err))
}

// refusedAfterReport: the provider refused the session after its report
// went through (its closing words) and the CLI ended by itself. The
// agent's work is done and stands: the refusal is no failure of it, and
// the session is not limited either.
func refusedAfterReport(res proc.Result, out agent.Result) bool {
	return out.Report != nil && out.Limit != nil && (res.Reason == proc.Exited || res.Reason == proc.FinalGrace)
}

// meterLimit is the limit a refusal's status tells of.
func meterLimit(status int) *agent.Limit {
	kind := agent.LimitRate
	if status != http.StatusTooManyRequests {
		kind = agent.LimitOverloaded
	}
	return &agent.Limit{Kind: kind, Status: status}
}

// endedWithOutcome reports whether a finished run ended its stage with an
// outcome (the session reported and succeeded, with no blocking question
// pending): the stage's checkpoint is then of no more use.
func endedWithOutcome(r runproto.Run) bool {
	return r.Status == runproto.StatusSucceeded && r.Outcome != "" && !r.BlockingQuestion
}

// finish reports how the session ended, retrying while Core is
// unreachable; ok is false when Core never took it.
func (s *session) finish(life context.Context, e *ending) (runproto.Run, bool) {
	r, l := s.r, s.lease
	f := runproto.FinishIn{ExitStatus: &e.exit, Usage: e.usage, Error: errorText(e.err), BranchAhead: e.ahead, Model: e.model,
		Interrupted: e.interrupted, RetryAt: e.retryAt}
	ctx, cancel := context.WithCancel(context.WithoutCancel(life))
	defer cancel()
	deadline := r.clock.Now().Add(r.timing.FinishFor)
	for attempt := 0; ; attempt++ {
		run, err := r.client.Finish(ctx, l.Run.ID, f)
		if err == nil {
			s.log.Info("run finished", "finish", "taken", "status", run.Status, "outcome", run.Outcome, "exit", e.exit, "error", f.Error)
			return run, true
		}
		if !protocol.Retryable(err) {
			if st := protocol.StatusOf(err); st == http.StatusUnauthorized || st == http.StatusNotFound {
				s.log.Warn("Core no longer takes this run's finish (it gave the run up meanwhile)", "finish", "gone", "err", err)
			} else {
				s.log.Error("Core refused the run's finish", "finish", "refused", "err", err)
			}
			return runproto.Run{}, false
		}
		if !r.clock.Now().Before(deadline) {
			s.log.Error("Core did not take the run's finish in time; it fails the run once its grace has passed", "finish", "timed_out", "err", err)
			return runproto.Run{}, false
		}
		s.log.Warn("finish failed; trying again", "err", err)
		sleep(ctx, r.clock, r.retry.delay(attempt))
	}
}

// heartbeats keeps the run alive every Timing.RunHeartbeat and stops the
// session when Core cancels it or no longer knows it.
func (s *session) heartbeats(ctx context.Context) {
	r, l := s.r, s.lease
	for sleep(ctx, r.clock, r.timing.RunHeartbeat) {
		cancelled, err := r.client.RunHeartbeat(ctx, l.Run.ID)
		if err == nil && !cancelled {
			s.reportUsage(ctx)
		}
		switch st := protocol.StatusOf(err); {
		case err == nil && cancelled:
			s.stop("cancelled: the ticket was paused or cancelled, the stage timed out, or the kill switch was pulled")
		case err == nil, ctx.Err() != nil:
		case st == http.StatusUnauthorized || st == http.StatusForbidden || st == http.StatusNotFound:
			s.stop(fmt.Sprintf("the run is no longer this runner's (Core answered %d to its heartbeat)", st))
		case runEnded(err):
			// Core ended the run: its finish was taken (the session is
			// being cleaned up), or Core gave it up. Nothing more to keep
			// alive: the loop ends, a session still working is stopped.
			s.log.Info("Core says the run has ended; its heartbeats stop", "err", err)
			s.stop("the run has ended in Core: " + err.Error())
			return
		default:
			s.log.Warn("run heartbeat failed", "err", err)
		}
	}
}

// runEnded reports whether err is Core's 409 for a run that is no longer
// running (succeeded, failed, cancelled or interrupted): run.requireRunning
// says "is <status>, not running". A 409 for a concurrent change (the run
// still running) says "retry" and is not one.
func runEnded(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Status == http.StatusConflict && strings.Contains(pe.Message, ", not running")
}

// told records the usage the CLI's output has told so far.
func (s *session) told(u runproto.Usage) {
	s.usageMu.Lock()
	s.usage = bounded(u)
	s.usageMu.Unlock()
}

// cutModel is a model's name as Core takes it: valid UTF-8 of at most
// runproto.MaxModel bytes, without control characters ("" when nothing
// is left: the name is then not known).
func cutModel(m string) string {
	m = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(m, ""))
	for len(m) > runproto.MaxModel {
		_, size := utf8.DecodeLastRuneInString(m)
		m = m[:len(m)-size]
	}
	return m
}

// bounded is u within the figures Core takes (bounds.Tokens,
// bounds.CostUSD): a CLI (or a model API) that told more, or less than
// nothing, must not get the run's usage and finish refused — its spend
// would then count nothing at all.
func bounded(u runproto.Usage) runproto.Usage {
	tokens := func(n int64) int64 { return min(max(n, bounds.Tokens.Min), bounds.Tokens.Max) }
	cost := u.CostUSD
	if !(cost >= 0) { // NaN too
		cost = 0
	}
	return runproto.Usage{InputTokens: tokens(u.InputTokens), OutputTokens: tokens(u.OutputTokens),
		CacheReadTokens: tokens(u.CacheReadTokens), CacheWriteTokens: tokens(u.CacheWriteTokens),
		CostUSD: min(cost, float64(bounds.CostUSD.Max))}
}

// reportUsage sends Core the session's usage so far when it grew since it
// was last sent (a running total: Core keeps the largest of each figure).
// A failure is logged; the finish sends the whole usage anyway.
func (s *session) reportUsage(ctx context.Context) {
	s.usageMu.Lock()
	now := s.usageNow
	s.usageMu.Unlock()
	if now != nil {
		s.told(now())
	}
	s.usageMu.Lock()
	u, sent := s.usage, s.usageSent
	s.usageMu.Unlock()
	if u == sent {
		return
	}
	if _, err := s.r.client.ReportUsage(ctx, s.lease.Run.ID, u); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reporting the session's usage so far failed", "err", err)
		}
		return
	}
	s.usageMu.Lock()
	s.usageSent = u
	s.usageMu.Unlock()
}

// errorText joins the reasons into finish's error: valid, printable
// (line feeds and tabs kept) and within the protocol's limit.
func errorText(parts []string) string {
	var kept []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" && !containsString(kept, p) {
			kept = append(kept, p)
		}
	}
	s := strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' {
			return c
		}
		if c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == '\u2028' || c == '\u2029' {
			return ' '
		}
		return c
	}, strings.ToValidUTF8(strings.Join(kept, "\n"), "?"))
	if len(s) > runproto.MaxError {
		s = strings.ToValidUTF8(s[:runproto.MaxError-3], "") + "…"
	}
	if text.Multiline(s) != nil {
		return "the session failed (its messages were not printable)"
	}
	return s
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stderrTail is the end of a CLI's stderr for an error message.
func stderrTail(stderr string) string {
	stderr = strings.TrimSpace(stderr)
	if stderr == "" {
		return ""
	}
	if len(stderr) > 2000 {
		stderr = "…" + strings.ToValidUTF8(stderr[len(stderr)-2000:], "")
	}
	return ": " + stderr
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// installRoot is what of an agent CLI's installation the sandbox must
// show: the folder holding its node_modules (npm installs the CLI and its
// native binary there), else the executable's folder.
func installRoot(exe string) []string {
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil
	}
	if i := strings.Index(real, "/node_modules/"); i > 0 {
		return []string{real[:i]}
	}
	if d := filepath.Dir(real); d != "/" {
		return []string{d}
	}
	return nil
}

// or0 is n, or a pointer to 0 when n is nil (for logs).
func or0(n *int) *int {
	if n == nil {
		return new(int)
	}
	return n
}

// headerMap is h with one value per name, as Limit.Reset reads headers.
func headerMap(h http.Header) map[string]string {
	m := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			m[k] = v[0]
		}
	}
	return m
}
