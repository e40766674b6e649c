// Package runner is `ballet runner`: the process next to the agent CLIs
// that takes agent sessions from Core and runs them (docs/runners.md).
//
// At start it sweeps what sessions of a runner that died left behind
// (proc.Sweep), checks the sandbox and finds its agent CLIs (`--version`),
// and registers with Core (capacity, adapters, version; the problem, when
// it cannot run sessions). Then it heartbeats every [runner] heartbeat
// (10 s) — stopping at once the sessions Core names in its answer — and
// long-polls for runs while it has a free slot, running up to [runner]
// sessions at once.
//
// A session (session.go) prepares the run's git workspace (branch
// ballet/<KEY>, the stage's checkpoint restored), builds the CLI's command
// and configuration (internal/runner/agent), runs it in the sandbox as a
// process it fully controls (internal/runner/proc: stage timeout, no-output
// watchdog, final-line grace), uploads its output as it comes, heartbeats
// the run (a cancellation stops the session), checkpoints the workspace
// every [runner] checkpoint, and at the end publishes the agent's work
// (commit and push of the branch) or keeps it in the checkpoint, finishes
// the run with its exit status, usage and error, and drops the checkpoint
// once the stage ended with an outcome.
//
// The runner talks to Core over HTTP only (internal/runner/protocol). Every
// loop runs on the injected clock. Secrets — the runner token, run tokens,
// the repository credential, model credentials — never reach a log.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/runner/agent"
	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/runner/protocol"
	"github.com/ballet/ballet/internal/runner/sandbox"
	"github.com/ballet/ballet/internal/runner/workspace"
	"github.com/ballet/ballet/internal/runproto"
)

// Timing holds the runner's fixed intervals; zero fields take the
// configuration's ([runner] heartbeat for both heartbeats), else the
// defaults (DefaultTiming). Tests shorten them.
type Timing struct {
	Heartbeat    time.Duration // the runner's heartbeat (10s, the protocol's)
	RunHeartbeat time.Duration // each run's heartbeat (10s)
	LeaseWait    time.Duration // a lease's long poll (30s)
	KillGrace    time.Duration // a stopped session's time between SIGTERM and SIGKILL (10s)
	FinalGrace   time.Duration // a CLI's time to exit after its final line (30s)
	RetryFirst   time.Duration // the first wait before a call to Core is tried again (1s) …
	RetryCap     time.Duration // … doubling up to this (30s)
	LogFlush     time.Duration // at a session's end, how long its log may take to reach Core (30s)
	FinishFor    time.Duration // how long a finish is retried while Core is unreachable (10m)
}

// DefaultTiming is the runner's timing unless Options.Timing says
// otherwise.
var DefaultTiming = Timing{
	Heartbeat: 10 * time.Second, RunHeartbeat: 10 * time.Second, LeaseWait: 30 * time.Second,
	KillGrace: proc.DefaultKillGrace, FinalGrace: proc.DefaultFinalGrace,
	RetryFirst: time.Second, RetryCap: 30 * time.Second, LogFlush: 30 * time.Second, FinishFor: 10 * time.Minute,
}

func (t Timing) withDefaults() Timing {
	d := DefaultTiming
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.Heartbeat, &d.Heartbeat}, {&t.RunHeartbeat, &d.RunHeartbeat}, {&t.LeaseWait, &d.LeaseWait},
		{&t.KillGrace, &d.KillGrace}, {&t.FinalGrace, &d.FinalGrace}, {&t.RetryFirst, &d.RetryFirst},
		{&t.RetryCap, &d.RetryCap}, {&t.LogFlush, &d.LogFlush}, {&t.FinishFor, &d.FinishFor},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// Options configure a Runner.
type Options struct {
	Config   config.Runner
	Adapters config.Adapters
	// Token is the runner token (the config's, or BALLET_RUNNER_TOKEN).
	Token   string
	Version string // Ballet's version, sent at registration
	// Hide lists more paths sessions must not see: the config file,
	// Core's data folder and bootstrap token when the runner knows them.
	Hide []string
	// Environ is the runner's environment (os.Environ() when nil): the
	// sessions' PATH and model credentials come from it.
	Environ []string
	// KeepGoing: when sessions cannot run here (no sandbox, no agent CLI),
	// register anyway with the problem and lease nothing, instead of
	// refusing to start (`ballet up`).
	KeepGoing bool
	Clock     clock.Clock  // clock.Real when nil
	Log       *slog.Logger // slog.Default() when nil
	HTTP      *http.Client // for Core; a default client when nil
	Timing    Timing
}

// adapter is an agent CLI the runner drives (agent.Claude, agent.OpenCode).
type adapter interface {
	Name() string
	Executable() string
	Prepare(agent.Spec) (agent.Command, error)
	Output(model string) agent.Output
}

// Runner runs agent sessions for Core.
type Runner struct {
	cfg      config.Runner
	opts     Options
	timing   Timing
	clock    clock.Clock
	log      *slog.Logger
	client   *protocol.Client
	retry    retryPolicy
	sandbox  sandbox.Sandbox
	ws       *workspace.Manager
	workdir  string
	stateDir string
	all      map[string]adapter // every adapter, by name

	mu        sync.Mutex
	adapters  map[string]adapter // the ones found here
	versions  []runproto.Adapter
	problem   string
	runnerID  string
	sessions  map[string]*session // by run id
	draining  bool
	drainedAt time.Time // when the drain time runs out
	drained   bool      // a platform admin drained it (Core's word, from the heartbeat's answer)
	wakeLease chan struct{}
	stopNow   chan struct{}
	stopOnce  sync.Once
	fatal     error
}

// New makes a runner from its options; Run runs it.
func New(o Options) (*Runner, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Token == "" {
		return nil, errors.New("runner: no runner token: set [runner] token or BALLET_RUNNER_TOKEN " +
			`(a platform admin creates one with POST /api/v1/tokens {"name":"…","kind":"runner"})`)
	}
	workdir, err := filepath.Abs(o.Config.Workdir)
	if err != nil {
		return nil, fmt.Errorf("runner: [runner] workdir: %w", err)
	}
	t := o.Timing
	if t.Heartbeat <= 0 {
		t.Heartbeat = o.Config.Heartbeat.Duration
	}
	if t.RunHeartbeat <= 0 {
		t.RunHeartbeat = o.Config.Heartbeat.Duration
	}
	t = t.withDefaults()
	r := &Runner{
		cfg: o.Config, opts: o, timing: t, clock: o.Clock, log: o.Log,
		client:  &protocol.Client{Base: o.Config.Server, Token: o.Token, UserAgent: "ballet-runner/" + o.Version, HTTP: o.HTTP},
		retry:   retryPolicy{first: t.RetryFirst, cap: t.RetryCap},
		ws:      &workspace.Manager{Dir: workdir, Logger: o.Log.With("component", "workspace")},
		workdir: workdir, stateDir: filepath.Join(workdir, "sessions"),
		all: map[string]adapter{
			runproto.ClaudeCode: agent.Claude{Command: o.Adapters.ClaudeCode.Command, Model: o.Adapters.ClaudeCode.Model},
			runproto.OpenCode: agent.OpenCode{Command: o.Adapters.OpenCode.Command, Model: o.Adapters.OpenCode.Model,
				Provider: o.Adapters.OpenCode.Provider, BaseURL: o.Adapters.OpenCode.BaseURL,
				Prices: agent.Prices(o.Adapters.OpenCode.Prices)},
		},
		sessions:  map[string]*session{},
		wakeLease: make(chan struct{}, 1),
		stopNow:   make(chan struct{}),
	}
	r.sandbox = sandbox.Sandbox{Mode: o.Config.Sandbox, Hide: r.hidden(), Private: filepath.Join(workdir, "private")}
	return r, nil
}

// hidden lists what sessions must not see: the runner's folder (every
// run's workspace, the mirrors, the session records), the paths the caller
// and [runner] hide name, and the runner user's home (ssh keys, git and CLI
// credentials).
func (r *Runner) hidden() []string {
	hide := []string{r.workdir}
	for _, p := range append(slices.Clone(r.opts.Hide), r.cfg.Hide...) {
		if abs, err := filepath.Abs(p); err == nil && p != "" {
			hide = append(hide, abs)
		}
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" && filepath.IsAbs(home) {
		hide = append(hide, home)
	}
	return hide
}

// Problem says why the runner cannot run sessions ("" when it can): set by
// Run's checks.
func (r *Runner) Problem() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.problem
}

// StopNow ends a drain at once: running sessions are stopped and finished
// as interrupted (runner_drain; a second SIGTERM).
func (r *Runner) StopNow() { r.stopOnce.Do(func() { close(r.stopNow) }) }

// Run runs the runner until ctx ends, then drains: no new leases, running
// sessions get [runner] drain to finish, then are stopped (their work kept
// in the stage's checkpoint) and finished as interrupted (runner_drain):
// their stages run again, without spending an iteration. It returns an error when the runner cannot start (a problem
// without Options.KeepGoing, a registration Core refuses) or Core refuses
// its token.
func (r *Runner) Run(ctx context.Context) error {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := os.MkdirAll(r.workdir, 0o700); err != nil {
		return fmt.Errorf("runner: [runner] workdir: %w", err)
	}
	r.sweep()
	r.check(ctx)
	if p := r.Problem(); p != "" {
		if !r.opts.KeepGoing {
			return fmt.Errorf("runner: cannot run agent sessions: %s", p)
		}
		r.log.Warn("this runner cannot run agent sessions; it registers with Core to say so, and leases nothing", "problem", p)
	}
	if err := r.register(ctx); err != nil {
		return err
	}
	beats := make(chan struct{})
	go func() { defer close(beats); r.heartbeats(life) }()
	if r.Problem() == "" {
		r.leases(ctx, life)
	} else {
		select {
		case <-ctx.Done():
		case <-r.stopNow:
		}
	}
	r.drain(life)
	cancel()
	<-beats
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// sweep kills what the sessions of a runner that died here left running.
func (r *Runner) sweep() {
	swept, err := proc.Sweep(r.stateDir)
	for _, s := range swept {
		r.log.Warn("killed what a session of a dead runner left running", "session", s.ID, "processes", len(s.Killed))
	}
	if err != nil {
		r.log.Error("sweeping leftover sessions", "err", err)
	}
}

// check finds the agent CLIs and checks the sandbox; what is wrong becomes
// the runner's problem.
func (r *Runner) check(ctx context.Context) {
	var problems, missing []string
	found := map[string]adapter{}
	var versions []runproto.Adapter
	for _, name := range []string{runproto.ClaudeCode, runproto.OpenCode} {
		a := r.all[name]
		v, err := agent.Version(ctx, a.Executable())
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s): %v", name, a.Executable(), err))
			continue
		}
		found[name] = a
		versions = append(versions, runproto.Adapter{Name: name, Version: v})
		r.log.Info("agent CLI found", "adapter", name, "version", v)
	}
	if len(found) == 0 {
		problems = append(problems, "no agent CLI found: "+strings.Join(missing, "; ")+
			" — install one (npm install -g @anthropic-ai/claude-code, or opencode-ai) or set [adapters.<name>] command")
	} else {
		for _, m := range missing {
			r.log.Warn("agent CLI not found: stages with this adapter are not leased here", "adapter", m)
		}
	}
	if err := r.sandbox.Check(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	p := strings.Join(problems, "; ")
	if len(p) > runproto.MaxProblem {
		p = p[:runproto.MaxProblem-3] + "…"
	}
	r.mu.Lock()
	r.adapters, r.versions, r.problem = found, versions, strings.ToValidUTF8(p, "")
	r.mu.Unlock()
}

// register registers with Core, retrying while Core is unreachable. It
// tells Core the sessions it runs (none, when it starts): Core ends the
// runs it holds as running here that are not among them as interrupted
// (runner_restart) at once.
func (r *Runner) register(ctx context.Context) error {
	name := r.cfg.Name
	if name == "" {
		name, _ = os.Hostname()
		if name == "" {
			name = "runner"
		}
	}
	version := r.opts.Version
	if len(version) > runproto.MaxVersion {
		version = version[:runproto.MaxVersion]
	}
	r.mu.Lock()
	capacity := r.cfg.Sessions
	reg := runproto.RunnerRegister{Name: name, Labels: r.cfg.Labels, Capacity: &capacity,
		Adapters: slices.Clone(r.versions), Version: version, Problem: r.problem, Sessions: slices.Sorted(maps.Keys(r.sessions))}
	r.mu.Unlock()
	if reg.Sessions == nil {
		reg.Sessions = []string{}
	}
	if reg.Adapters == nil {
		reg.Adapters = []runproto.Adapter{}
	}
	for attempt := 0; ; attempt++ {
		rn, err := r.client.Register(ctx, reg)
		if err == nil {
			r.mu.Lock()
			r.runnerID = rn.ID
			r.mu.Unlock()
			r.log.Info("registered with Core", "runner", rn.ID, "name", name, "server", r.cfg.Server, "capacity", reg.Capacity)
			return nil
		}
		if !protocol.Retryable(err) {
			return fmt.Errorf("runner: Core refused the registration: %w", err)
		}
		r.log.Warn("Core is not reachable; registering again soon", "err", err)
		if !sleep(ctx, r.clock, r.retry.delay(attempt)) {
			return fmt.Errorf("runner: stopped before Core answered: %w", err)
		}
	}
}

// noteDrained logs once when a platform admin drains the runner in Core,
// and once when the drain ends: meanwhile its leases get nothing, and the
// sessions it runs go on.
func (r *Runner) noteDrained(drained bool) {
	r.mu.Lock()
	changed := r.drained != drained
	r.drained = drained
	r.mu.Unlock()
	switch {
	case changed && drained:
		r.log.Warn("a platform admin drained this runner in Core: it gets no new run until undrained; running sessions go on")
	case changed:
		r.log.Info("the runner was undrained in Core: it takes runs again")
	}
}

// heartbeats tells Core every Timing.Heartbeat that the runner lives and
// what it runs, and stops the sessions Core names, until ctx ends.
func (r *Runner) heartbeats(ctx context.Context) {
	for sleep(ctx, r.clock, r.timing.Heartbeat) {
		r.mu.Lock()
		id := r.runnerID
		hb := runproto.RunnerHeartbeatIn{Sessions: slices.Sorted(maps.Keys(r.sessions)), Draining: r.draining, Problem: r.problem}
		r.mu.Unlock()
		if hb.Sessions == nil {
			hb.Sessions = []string{}
		}
		a, err := r.client.Heartbeat(ctx, id, hb)
		switch {
		case err == nil:
			r.noteDrained(a.Drained)
			for _, run := range a.Cancel {
				r.stopSession(run, "cancelled: Core asked the runner to stop this session")
			}
		case ctx.Err() != nil:
			return
		case protocol.StatusOf(err) == http.StatusNotFound:
			r.log.Warn("Core no longer knows this runner; registering again", "runner", id)
			if err := r.register(ctx); err != nil {
				r.log.Error("registering again", "err", err)
			}
		case protocol.StatusOf(err) == http.StatusUnauthorized || protocol.StatusOf(err) == http.StatusForbidden:
			r.fail(fmt.Errorf("runner: Core refused the runner token (revoked or expired?): %w", err))
			return
		default:
			r.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// fail records a fatal error and stops everything now.
func (r *Runner) fail(err error) {
	r.log.Error("runner stops", "err", err)
	r.mu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.mu.Unlock()
	r.StopNow()
}

// leases long-polls for runs while a slot is free, until ctx ends (the
// drain) or a fatal error; sessions run on life.
func (r *Runner) leases(ctx, life context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stopNow:
			cancel()
		case <-ctx.Done():
		}
	}()
	for attempt := 0; ctx.Err() == nil; {
		if !r.freeSlot(ctx) {
			return
		}
		r.mu.Lock()
		id, names := r.runnerID, slices.Sorted(maps.Keys(r.adapters))
		r.mu.Unlock()
		l, err := r.client.Lease(ctx, id, runproto.LeaseRequest{WaitSeconds: int(r.timing.LeaseWait / time.Second), Adapters: names})
		switch {
		case err == nil && l == nil:
			attempt = 0
		case err == nil:
			attempt = 0
			r.start(life, l)
		case ctx.Err() != nil:
			return
		case protocol.StatusOf(err) == http.StatusUnauthorized || protocol.StatusOf(err) == http.StatusForbidden:
			r.fail(fmt.Errorf("runner: Core refused the runner token (revoked or expired?): %w", err))
			return
		default:
			// A 404 (Core forgot this runner) is handled by the next
			// heartbeat, which registers again.
			r.log.Warn("lease failed", "err", err)
			if !sleep(ctx, r.clock, r.retry.delay(attempt)) {
				return
			}
			attempt++
		}
	}
}

// freeSlot waits until fewer than [runner] sessions run; false when ctx
// ended first.
func (r *Runner) freeSlot(ctx context.Context) bool {
	for {
		r.mu.Lock()
		free := len(r.sessions) < r.cfg.Sessions
		r.mu.Unlock()
		if free {
			return true
		}
		select {
		case <-r.wakeLease:
		case <-ctx.Done():
			return false
		}
	}
}

// start starts the session of a leased run.
func (r *Runner) start(life context.Context, l *runproto.Lease) {
	s := newSession(r, *l)
	r.mu.Lock()
	r.sessions[l.Run.ID] = s
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			delete(r.sessions, l.Run.ID)
			r.mu.Unlock()
			select {
			case r.wakeLease <- struct{}{}:
			default:
			}
		}()
		s.run(life)
	}()
}

// stopSession stops the session of run, if it runs here.
func (r *Runner) stopSession(run, reason string) {
	r.mu.Lock()
	s := r.sessions[run]
	r.mu.Unlock()
	if s != nil {
		s.stop(reason)
	}
}

// drain waits for the running sessions for [runner] drain (ended early
// by StopNow), then stops those left and waits until each has finished.
func (r *Runner) drain(life context.Context) {
	r.mu.Lock()
	r.draining = true
	n := len(r.sessions)
	r.mu.Unlock()
	if n > 0 {
		r.log.Info("draining: no new sessions; the running ones may finish", "sessions", n, "drain", r.cfg.Drain.Duration)
	}
	t := r.clock.NewTimer(r.cfg.Drain.Duration)
	defer t.Stop()
	stopped := false
	for {
		r.mu.Lock()
		left := slices.Collect(maps.Values(r.sessions))
		r.mu.Unlock()
		if len(left) == 0 {
			return
		}
		if stopped {
			for _, s := range left {
				<-s.done
			}
			continue
		}
		select {
		case <-left[0].done:
		case <-t.C():
			stopped = true
		case <-r.stopNow:
			stopped = true
		case <-life.Done():
			stopped = true
		}
		if stopped {
			reason := fmt.Sprintf("the runner was stopped and its drain time (%s) ran out", r.cfg.Drain.Duration)
			interruption := runproto.ReasonRunnerDrain
			r.mu.Lock()
			if r.fatal != nil {
				reason, interruption = "the runner stopped: "+r.fatal.Error(), ""
			}
			r.mu.Unlock()
			for _, s := range left {
				s.interrupt(interruption, reason)
			}
		}
	}
}
