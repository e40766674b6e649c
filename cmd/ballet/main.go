// Command ballet is Ballet's single binary. `ballet serve` starts Core,
// `ballet runner` a runner of agent sessions, `ballet up` both on one
// machine.
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
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	_ "time/tzdata" // budget days in any time zone, whatever the machine has

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
)

// version may be set at build time with -ldflags "-X main.version=…";
// otherwise `ballet version` reports the module version Go stamped.
var version = ""

const usage = `ballet — tickets through pipelines of coding agents, unattended.

Usage:
  ballet up [--config FILE]      start Core and a local runner together: a whole Ballet on one machine
  ballet serve [--config FILE]   start Core (embedded SQLite by default)
  ballet runner [--config FILE]  run agent sessions for a Core ([runner] server)
  ballet knowledge [--config FILE]  start the Knowledge service (its own config and database)
  ballet config [--config FILE]  check the configuration and print the effective one as TOML
  ballet backup --to FILE        snapshot Core's SQLite database while it serves (--knowledge: the Knowledge service's)
  ballet restore --from FILE     replace the database with a backup (refused while Ballet runs on it)
  ballet pipeline COMMAND        validate, render or publish pipeline YAML
  ballet events follow ...       print a project's, item's or org's events as they happen
  ballet dev fake-model          serve a scripted model for the agent CLIs (no API key needed)
  ballet version                 print the version, module and commit
  ballet help [COMMAND]          print this help, or a command's

Run 'ballet COMMAND --help' for a command's flags and environment variables.
Every configuration key has a default, so no file is needed; see README.md.

Environment:
  BALLET_BOOTSTRAP_TOKEN  serve: the platform-admin token (overrides [auth] bootstrap_token)
  BALLET_KNOWLEDGE_TOKEN  serve, knowledge, up: the Knowledge service credential (overrides [knowledge] service_token)
  BALLET_RUNNER_TOKEN     runner: the runner token (overrides [runner] token)
  BALLET_TOKEN            events follow: the bearer token (instead of --token)
`

const serveHelp = `Usage: ballet serve [--config FILE]

Starts Core: the REST API under /api/v1, the realtime WebSocket, /healthz,
/readyz and /metrics on http.addr (default 127.0.0.1:8080), and, while this
instance leads, the job orchestrator, scheduler and reconciler. On SQLite
(the default) it creates storage.path (data/core.db) and its folder; a second
serve on the same file refuses to start, naming the process that holds it.
The HTTP address is bound before anything is created, so a busy port leaves
no files behind. On first start a platform-admin bootstrap token is written
to data/bootstrap-token (mode 0600) unless one is configured. SIGINT or
SIGTERM stops it gracefully.

Exit status: 0 after a clean stop, 1 when Core cannot start or fails, 2 for a
usage or configuration error (the message names the key).

Environment:
  BALLET_BOOTSTRAP_TOKEN  the platform-admin bootstrap token (at least 16
                          characters); overrides [auth] bootstrap_token
  BALLET_KNOWLEDGE_TOKEN  the credential Core and the Knowledge service share
                          (at least 32 characters); overrides [knowledge]
                          service_token
`

const configHelp = `Usage: ballet config [--config FILE]

Reads the configuration (the defaults, with FILE over them), checks every
value, and prints the effective configuration as TOML (secrets masked). Use
it to check a file before 'ballet serve': unknown keys and bad values (a
duration such as "5x", a port outside 0 … 65535) are errors that name the
key, with exit status 2.
`

const versionHelp = `Usage: ballet version

Prints Ballet's version, its Go module, the VCS commit it was built from
(and whether the checkout had uncommitted changes) and the Go version.
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
		return serve(args[1:], stdout, stderr)
	case "runner":
		return runnerCmd(args[1:], stdout, stderr)
	case "knowledge":
		return knowledgeCmd(args[1:], stdout, stderr)
	case "up":
		return upCmd(args[1:], stdout, stderr)
	case "config":
		return printConfig(args[1:], stdout, stderr)
	case "backup":
		return backupCmd(args[1:], stdout, stderr)
	case "restore":
		return restoreCmd(args[1:], stdout, stderr)
	case "pipeline":
		return pipelineCmd(args[1:], stdout, stderr)
	case "events":
		return eventsCmd(args[1:], stdout, stderr)
	case "dev":
		return devCmd(args[1:], stdout, stderr)
	case "version", "--version":
		if len(args) > 1 && isHelp(args[1]) {
			fmt.Fprint(stdout, versionHelp)
			return 0
		}
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprint(stdout, versionText(bi))
		return 0
	case "help", "-h", "--help", "-help":
		if len(args) > 1 && args[1] != "help" && !isHelp(args[1]) {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ballet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "--help", "-help":
		return true
	}
	return false
}

// newFlags returns a command's flag set: errors go to stderr, help (-h,
// --help) is handled by parseFlags.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ballet "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // parseFlags prints help, or a hint after an error
	return fs
}

// parseFlags parses args. On -h or --help it prints help and the flags to
// stdout; done then tells the caller to exit with code (0 for help, 2 for
// a bad flag).
func parseFlags(fs *flag.FlagSet, args []string, help string, stdout io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, help)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(stdout, "\nFlags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return 0, true
	case err != nil:
		fmt.Fprintf(fs.Output(), "Run '%s --help' for usage.\n", fs.Name())
		return 2, true
	}
	return 0, false
}

func loadConfig(name, help string, args []string, stdout, stderr io.Writer) (config.Config, int, bool) {
	fs := newFlags(name, stderr)
	path := fs.String("config", "", "TOML configuration `FILE` (optional: every key has a default)")
	if code, done := parseFlags(fs, args, help, stdout); done {
		return config.Config{}, code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet %s: unexpected argument %q\n", name, fs.Arg(0))
		return config.Config{}, 2, false
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return config.Config{}, 2, false
	}
	return cfg, 0, true
}

func serve(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := loadConfig("serve", serveHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	log := newLogger(cfg.Log, stderr)
	// The port first: a busy one must fail before the database and the
	// bootstrap token are created.
	l, err := core.Listen(cfg.HTTP.Addr)
	if err != nil {
		log.Error("start core", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := core.Open(ctx, core.Options{Config: cfg, Log: log})
	if err != nil {
		l.Close()
		log.Error("start core", "err", err)
		return 1
	}
	defer c.Close()
	c.UseListener(l)
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("core stopped", "err", err)
		return 1
	}
	log.Info("core stopped")
	return 0
}

// versionText is `ballet version`: the version, the module, the commit
// and the Go version, from what the Go toolchain stamped into the binary
// (bi may be nil). Go stamps the commit when it builds in a git checkout
// (not in a git worktree, and not with -buildvcs=false).
func versionText(bi *debug.BuildInfo) string {
	v, module, commit, modified, built := version, "github.com/ballet/ballet", "", false, ""
	if bi != nil {
		module = bi.Main.Path
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "vcs.time":
				built = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ballet %s\nmodule  %s\n", v, module)
	switch {
	case commit == "":
		b.WriteString("commit  unknown (built without version control information)\n")
	case modified:
		fmt.Fprintf(&b, "commit  %s (with uncommitted changes)\n", commit)
	default:
		fmt.Fprintf(&b, "commit  %s\n", commit)
	}
	if built != "" {
		fmt.Fprintf(&b, "date    %s\n", built)
	}
	fmt.Fprintf(&b, "go      %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

func printConfig(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := loadConfig("config", configHelp, args, stdout, stderr)
	if !ok {
		return code
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
