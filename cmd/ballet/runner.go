package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/runner"
)

// EnvRunnerToken overrides [runner] token.
const EnvRunnerToken = "BALLET_RUNNER_TOKEN"

const runnerHelp = `Usage: ballet runner [--config FILE] [--server URL] [--keep-going]

Runs agent sessions for Core: registers with Core ([runner] server) with a
runner token, leases runs while it has a free slot ([runner] sessions at
once), runs each stage's agent CLI (claude-code or opencode) in a fresh git
workspace under bubblewrap, uploads its output, pushes its work (the branch
ballet/<KEY>, checkpoints while it runs) and reports how it ended. See
docs/runners.md.

It refuses to start when it cannot run sessions here — no agent CLI found,
no bubblewrap with [runner] sandbox = "bwrap" — and says how to fix it; with
--keep-going (ballet up) it registers anyway, tells Core why, and leases
nothing.

SIGINT or SIGTERM drains: no new sessions; running ones get [runner] drain
(1m) to finish, then are stopped and reported failed. A second signal stops
them at once.

Exit status: 0 after a drain, 1 when it cannot start or Core refuses its
token, 2 for a usage or configuration error.

Environment:
  BALLET_RUNNER_TOKEN  the runner token (overrides [runner] token); a platform
                       admin creates one with POST /api/v1/tokens
                       {"name":"…","kind":"runner"}
  ANTHROPIC_*, OPENAI_*, and what [runner] pass_env names: passed to sessions
`

func runnerCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("runner", stderr)
	path := fs.String("config", "", "TOML configuration `FILE` (optional: every key has a default)")
	server := fs.String("server", "", "Core's `URL` (overrides [runner] server)")
	keepGoing := fs.Bool("keep-going", false, "when sessions cannot run here, register with the problem instead of refusing to start")
	if code, done := parseFlags(fs, args, runnerHelp, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet runner: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.Load(*path)
	if err == nil && *server != "" {
		cfg.Runner.Server = *server
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return 2
	}
	log := newLogger(cfg.Log, stderr).With("component", "runner")
	token := cfg.Runner.Token
	if t := os.Getenv(EnvRunnerToken); t != "" {
		token = t
	}
	r, err := runner.New(runner.Options{
		Config: cfg.Runner, Adapters: cfg.Adapters, Token: token, Version: shortVersion(),
		Hide: runnerHides(cfg, *path), KeepGoing: *keepGoing, Log: log,
	})
	if err != nil {
		log.Error("the runner cannot start", "err", err)
		return 1
	}
	ctx, drained := context.WithCancel(context.Background())
	defer drained()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		<-sig
		log.Info("stopping: draining the running sessions (a second signal stops them at once)")
		drained()
		<-sig
		r.StopNow()
	}()
	if err := r.Run(ctx); err != nil {
		log.Error("the runner stopped", "err", err)
		return 1
	}
	log.Info("runner stopped")
	return 0
}

// runnerHides lists what of this machine sessions must not see, as the
// configuration tells: the config file (it may hold the runner token),
// Core's data folder and its bootstrap token.
func runnerHides(cfg config.Config, configFile string) []string {
	var hide []string
	if configFile != "" {
		hide = append(hide, configFile)
	}
	if cfg.Storage.Engine == "sqlite" {
		if dir, err := filepath.Abs(filepath.Dir(cfg.Storage.Path)); err == nil && dir != "/" {
			hide = append(hide, dir)
		}
	}
	return append(hide, cfg.BootstrapTokenPath())
}

// shortVersion is Ballet's version in one word, for the runner's
// registration.
func shortVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
