package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/runner"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

// childEnv runs the test binary as a runner process (a TestMain mode),
// configured by the JSON of childOptions in it: the tests that kill a
// runner kill that process.
const childEnv = "RUNNER_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childRunner(spec))
	}
	os.Exit(giteatest.Main(m)) // stops the package's Gitea, if a test started it
}

// childOptions are the parts of runner.Options a runner process gets.
type childOptions struct {
	Config   config.Runner
	Adapters config.Adapters
	Token    string
	Environ  []string
	Timing   runner.Timing
}

func childRunner(spec string) int {
	var o childOptions
	if err := json.Unmarshal([]byte(spec), &o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := runner.New(runner.Options{Config: o.Config, Adapters: o.Adapters, Token: o.Token, Version: "test",
		Environ: o.Environ, Timing: o.Timing, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// As `ballet runner` does: SIGTERM drains.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChild starts a runner process with o's options; its log goes to
// the world's log.
func (w *world) startChild(o runner.Options) *exec.Cmd {
	w.t.Helper()
	b, err := json.Marshal(childOptions{Config: o.Config, Adapters: o.Adapters, Token: o.Token, Environ: o.Environ, Timing: o.Timing})
	if err != nil {
		w.t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stderr, cmd.Stdout = w.logs, w.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}
