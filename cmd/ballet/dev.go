package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
)

const devUsage = `Usage:
  ballet dev fake-model [--addr HOST:PORT] [--scenario NAME] [--dump DIR]

Tools for trying Ballet on one machine.

fake-model serves a scripted model on 127.0.0.1: the Anthropic Messages API
(claude-code) and OpenAI chat completions (opencode), streamed, so the real
agent CLIs run whole sessions without an API key and offline. It prints the
URL to point them at and runs until interrupted (SIGINT, SIGTERM), logging
each turn it plays to stderr. A marker in a session's prompt (a ticket's
description), [[ballet-scenario:NAME key=value ...]], picks what the model
does; without one it plays --scenario. The rate-limit scenario refuses as a
provider's limit does (429, 529, quota; with or without retry-after and the
APIs' reset headers) for requests= answers or for= a while, then serves: a
ticket whose description carries [[ballet-scenario:rate-limit retry_after=30
requests=3]] shows Ballet waiting out the limit and going on.

Exit status: 0 when interrupted, 1 when the address cannot be bound, 2 for
a usage error.
`

func devCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, devUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "fake-model" {
		fmt.Fprint(stderr, devUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return devFakeModel(ctx, args[1:], stdout, stderr)
}

func devFakeModel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("dev fake-model", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "`HOST:PORT` to listen on (port 0: any free port)")
	scenario := fs.String("scenario", fakemodel.DefaultScenario, "the scenario played when a prompt has no marker")
	dump := fs.String("dump", "", "write every model request's body into `DIR` (it must exist): what a CLI sends")
	help := devUsage + "\nScenarios:\n" + scenarioList()
	if code, done := parseFlags(fs, args, help, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet dev fake-model: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if _, ok := fakemodel.Scenarios()[*scenario]; !ok {
		fmt.Fprintf(stderr, "ballet dev fake-model: --scenario: unknown scenario %q (known: %s)\n",
			*scenario, strings.Join(fakemodel.ScenarioNames(), ", "))
		return 2
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "ballet dev fake-model: --addr: %v\n", err)
		return 1
	}
	fm := fakemodel.New()
	fm.Default = *scenario
	fm.Dump = *dump
	fm.Log = slog.New(slog.NewTextHandler(stderr, nil))
	srv := &http.Server{Handler: fm, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + l.Addr().String()
	fmt.Fprintf(stdout, `fake model listening on %[1]s
  claude-code: ANTHROPIC_BASE_URL=%[1]s ANTHROPIC_API_KEY=fake
  opencode:    a provider with "npm": "@ai-sdk/openai-compatible" and options.baseURL %[1]s/v1
               (or the built-in anthropic provider with options.baseURL %[1]s/v1)
Without a marker in the prompt it plays %[2]s. Scenarios:
%[3]s`, url, *scenario, scenarioList())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		fmt.Fprintf(stderr, "ballet dev fake-model: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	fm.Close() // releases hanging requests, so the shutdown does not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = srv.Close()
	}
	return 0
}

// scenarioList is one line per scenario: its marker and what it does.
func scenarioList() string {
	var b strings.Builder
	all := fakemodel.Scenarios()
	for _, n := range fakemodel.ScenarioNames() {
		fmt.Fprintf(&b, "  %-36s %s\n", fakemodel.Marker(n), all[n].Doc)
	}
	return b.String()
}
