package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/outbound"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/engine"
)

// Options build a Server.
type Options struct {
	Config config.Config // the service's (config.LoadKnowledge)
	Log    *slog.Logger
	Clock  clock.Clock // nil: clock.Real
	// Store, when set, is used (already migrated) instead of opening
	// [storage]; the caller closes it.
	Store store.Store
	// Client calls Core (nil: a client with a 10 s timeout).
	Client *http.Client
}

// Server is one Knowledge service.
type Server struct {
	cfg     config.Config
	log     *slog.Logger
	store   store.Store
	owns    bool
	handler http.Handler
	API     *API
}

// Open opens the service's own database (never Core's), applies its
// migrations and builds the API.
func Open(ctx context.Context, o Options) (*Server, error) {
	if o.Config.Knowledge.ServiceToken == "" {
		return nil, fmt.Errorf("knowledge.service_token: must be set (or %s): the service calls Core's introspection with it", config.KnowledgeEnvToken)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Client == nil {
		o.Client = outbound.Client(10 * time.Second)
	}
	s := &Server{cfg: o.Config, log: o.Log, store: o.Store}
	if s.store == nil {
		st, err := engine.Open(ctx, o.Config.Storage)
		if err != nil {
			return nil, err
		}
		s.store, s.owns = st, true
		if err := knowledge.Migrations.Apply(ctx, st, o.Clock.Now()); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrate the knowledge database: %w", err)
		}
	}
	s.API = &API{
		Log: o.Log,
		Auth: &Authenticator{Core: o.Config.Knowledge.Core, ServiceToken: o.Config.Knowledge.ServiceToken,
			TTL: o.Config.Knowledge.AuthCache.Duration, Client: o.Client, Clock: o.Clock},
		K:       knowledge.New(s.store, o.Clock),
		MaxBody: o.Config.HTTP.MaxBodyBytes,
	}
	s.handler = s.API.Handler()
	return s, nil
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers on l until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	h := s.cfg.HTTP
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: h.ReadHeaderTimeout.Duration, ReadTimeout: h.ReadTimeout.Duration,
		WriteTimeout: h.WriteTimeout.Duration, IdleTimeout: h.IdleTimeout.Duration,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	s.log.Info("knowledge service listening", "addr", l.Addr().String(), "engine", s.store.Engine())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Close closes the database the server opened.
func (s *Server) Close() error {
	if s.owns {
		return s.store.Close()
	}
	return nil
}
