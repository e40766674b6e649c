package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/knowledge/service"
)

const knowledgeHelp = `Usage: ballet knowledge [--config FILE] [--core URL]

Starts the Knowledge service: spaces, versioned entries and their search per
organization, REST under /api/v1/knowledge/orgs/{org}/… on http.addr (default
127.0.0.1:8090), with /healthz and /readyz. Its configuration is its own file:
[storage] like Core's but on its own database (default data/knowledge.db; it
never opens Core's), [http], and [knowledge] core (Core's URL, default
http://127.0.0.1:8080), service_token and auth_cache. Callers' credentials are
checked through Core's introspection endpoint with the service token; an
answer is used for at most [knowledge] auth_cache (30s). 'ballet up' starts
it beside Core.

Exit status: 0 after a clean stop, 1 when it cannot start or fails, 2 for a
usage or configuration error (the message names the key).

Environment:
  BALLET_KNOWLEDGE_TOKEN  the service credential shared with Core (at least
                          32 characters); overrides [knowledge] service_token
`

func knowledgeCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("knowledge", stderr)
	path := fs.String("config", "", "TOML configuration `FILE` of the Knowledge service (optional: every key has a default)")
	core := fs.String("core", "", "Core's `URL` (overrides [knowledge] core)")
	if code, done := parseFlags(fs, args, knowledgeHelp, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet knowledge: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.LoadKnowledge(*path)
	if err == nil && *core != "" {
		cfg.Knowledge.Core = *core
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return 2
	}
	if cfg.Knowledge.ServiceToken == "" {
		fmt.Fprintf(stderr, "ballet: knowledge.service_token: must be set (or %s): the service checks credentials with Core using it\n", config.KnowledgeEnvToken)
		return 2
	}
	log := newLogger(cfg.Log, stderr)
	l, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		log.Error("start knowledge", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := service.Open(ctx, service.Options{Config: cfg, Log: log})
	if err != nil {
		l.Close()
		log.Error("start knowledge", "err", err)
		return 1
	}
	defer s.Close()
	if err := s.Serve(ctx, l); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("knowledge stopped", "err", err)
		return 1
	}
	log.Info("knowledge stopped")
	return 0
}
