// Command ballet is Ballet's single binary. `ballet serve` starts Core.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // budget days in any time zone, whatever the machine has

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `ballet — tickets through pipelines of coding agents, unattended.

Usage:
  ballet serve [--config FILE]   start Core (embedded SQLite by default)
  ballet config [--config FILE]  print the effective configuration as TOML
  ballet pipeline COMMAND        validate, render or publish pipeline YAML (ballet pipeline help)
  ballet events follow ...       print a project's, item's or org's events as they happen (ballet events help)
  ballet version                 print the version

Every configuration key has a default; see README.md.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "config":
		return printConfig(args[1:], stdout, stderr)
	case "pipeline":
		return pipelineCmd(args[1:], stdout, stderr)
	case "events":
		return eventsCmd(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "ballet", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ballet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func loadConfig(name string, args []string, stderr io.Writer) (config.Config, bool) {
	fs := flag.NewFlagSet("ballet "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "TOML configuration file (optional: every key has a default)")
	if err := fs.Parse(args); err != nil {
		return config.Config{}, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet %s: unexpected argument %q\n", name, fs.Arg(0))
		return config.Config{}, false
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return config.Config{}, false
	}
	return cfg, true
}

func serve(args []string, stderr io.Writer) int {
	cfg, ok := loadConfig("serve", args, stderr)
	if !ok {
		return 2
	}
	log := newLogger(cfg.Log, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := core.Open(ctx, cfg, log)
	if err != nil {
		log.Error("start core", "err", err)
		return 1
	}
	defer c.Close()
	if err := c.Listen(); err != nil {
		log.Error("start core", "err", err)
		return 1
	}
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("core stopped", "err", err)
		return 1
	}
	log.Info("core stopped")
	return 0
}

func printConfig(args []string, stdout, stderr io.Writer) int {
	cfg, ok := loadConfig("config", args, stderr)
	if !ok {
		return 2
	}
	if err := config.Write(stdout, cfg); err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return 1
	}
	return 0
}

func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
