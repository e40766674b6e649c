// Package core wires Ballet's Core process: storage, the transition
// applier, the durable job orchestrator, leader election and the HTTP
// server. A test starts a whole Core on port 0 with a temporary database.
package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/leader"
	"github.com/ballet/ballet/internal/pipeline/versions"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/schedule"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/sqlite"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Core is one running Core instance.
type Core struct {
	Config     config.Config
	Log        *slog.Logger
	Clock      clock.Clock
	ID         string // this instance, in job claims and the leader lease
	Store      store.Store
	Applier    *transition.Applier
	Jobs       *job.Orchestrator
	Elector    *leader.Elector // nil on SQLite: the single process always leads
	Registry   *prometheus.Registry
	Auth       *auth.Authenticator
	Tenancy    *tenancy.Service
	Tracker    *tracker.Service
	Skills     *skill.Service
	Pipelines  *versions.Service
	API        *server.API
	Flows      *flow.Service
	Scheduler  *schedule.Scheduler
	Reconciler *reconcile.Reconciler
	Feed       *feed.Feed        // tails the event log on every instance
	Realtime   *realtime.Handler // the WebSocket JSON-RPC API
	Runs       *run.Service

	listener net.Listener
	conns    *server.ConnMetrics
	http     *http.Server
	leading  func() bool
}

// Open opens the configured store, applies migrations and builds every
// component.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (*Core, error) {
	st, err := openStore(ctx, cfg.Storage)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, st, log); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s database: %w", st.Engine(), err)
	}
	c, err := New(cfg, log, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return c, nil
}

// migrate applies the migrations, retrying for a while when the engine
// cannot tell whether a write landed (an rqlite cluster without a leader for
// a moment): migrations are idempotent, so a retry is safe.
func migrate(ctx context.Context, st store.Store, log *slog.Logger) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := store.Migrate(ctx, st, time.Now().UTC())
		if err == nil || !errors.Is(err, store.ErrUnknownOutcome) || time.Now().After(deadline) {
			return err
		}
		log.Warn("migration write outcome unknown: retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// New builds a Core around an open, migrated store (tests pass their own).
func New(cfg config.Config, log *slog.Logger, st store.Store) (*Core, error) {
	c := &Core{Config: cfg, Log: log, Clock: clock.Real{}, ID: instanceID(), Registry: prometheus.NewRegistry(), Store: st}
	c.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c.conns = server.NewConnMetrics(c.Registry)
	c.Jobs = job.NewOrchestrator(st, c.Clock, log.With("component", "jobs"), job.Config{
		Concurrency: cfg.Jobs.Concurrency, Lease: cfg.Jobs.Lease.Duration, Poll: cfg.Jobs.Poll.Duration,
		BackoffCap: cfg.Jobs.BackoffCap.Duration, ShutdownGrace: cfg.Jobs.ShutdownGrace.Duration,
	}, c.ID, job.NewMetrics(c.Registry))
	c.Registry.MustRegister(job.NewQueueCollector(st))
	spend := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ballet_run_cost_usd_total",
		Help: "Agent spend reported by finished runs, by project."}, []string{"project"})
	c.Registry.MustRegister(spend)
	c.Feed = feed.New(st, c.Clock, log.With("component", "feed"), feed.Config{Interval: cfg.Events.TailInterval.Duration})
	c.Applier = &transition.Applier{Store: st, Clock: c.Clock, OnCommit: func(cm transition.Committed) {
		c.Feed.Nudge() // local subscribers see the change within milliseconds
		if cm.HasJobs {
			c.Jobs.Notify()
		}
		for _, e := range cm.Events {
			fault.Hit("commit:" + e.Type) // the failure suite's crash points
			if c.Scheduler != nil && schedule.Wakes(e.Type) {
				c.Scheduler.Nudge()
			}
			switch e.Type {
			case "run.created":
				if c.Runs != nil {
					c.Runs.Notify() // wake runners waiting in a long poll
				}
			case "run.finished":
				var p struct {
					Usage struct {
						CostUSD float64 `json:"cost_usd"`
					}
				}
				if json.Unmarshal(e.Payload, &p) == nil && p.Usage.CostUSD > 0 {
					spend.WithLabelValues(e.ProjectID).Add(p.Usage.CostUSD)
				}
			}
		}
	}}
	if err := c.openAPI(cfg); err != nil {
		return nil, err
	}
	c.Scheduler = schedule.New(st, c.Clock, log.With("component", "scheduler"), c.Flows, schedule.Config{
		Interval: cfg.Scheduler.Interval.Duration, PlatformLimit: cfg.Scheduler.PlatformLimit,
		Metrics: schedule.NewMetrics(c.Registry),
	})
	c.Reconciler = reconcile.New(st, c.Clock, log.With("component", "reconciler"), c.Flows, c.Runs, reconcile.Config{
		Interval: cfg.Reconciler.Interval.Duration, Slack: cfg.Reconciler.Slack.Duration,
		Release: c.Flows.Release, Metrics: reconcile.NewMetrics(c.Registry),
	})
	c.leading = func() bool { return true }
	if st.Engine() == "rqlite" {
		c.Elector = leader.New(st, c.Clock, log.With("component", "leader"), "core", c.ID, cfg.Leader.TTL.Duration, cfg.Leader.Renew.Duration)
		// Another instance may lead once the lease has ended: the handlers
		// stop before, and their claims are left for it to take back.
		c.Elector.OnLost = c.Jobs.Abandon
		c.leading = c.Elector.Leading
	}
	c.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_leader", Help: "1 while this instance runs the orchestrator, scheduler and reconciler.",
	}, func() float64 {
		if c.leading() {
			return 1
		}
		return 0
	}))
	return c, nil
}

// openAPI sets up authentication, the tracker and the REST routes.
func (c *Core) openAPI(cfg config.Config) error {
	tokenFile := cfg.Auth.BootstrapTokenFile
	if tokenFile == "" {
		tokenFile = filepath.Join(filepath.Dir(cfg.Storage.Path), "bootstrap-token")
	}
	bootstrap, generated, err := auth.Bootstrap(cfg.Auth.BootstrapToken, tokenFile)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	if generated {
		c.Log.Warn("generated a platform-admin bootstrap token: use it as a Bearer token (keep it secret)", "file", tokenFile)
	}
	c.Auth = auth.NewAuthenticator(c.Store, c.Clock, bootstrap, cfg.Auth.PlatformAdmins, auth.OIDCConfig{Issuer: cfg.Auth.OIDCIssuer, Audience: cfg.Auth.OIDCAudience})
	c.Tenancy = tenancy.New(c.Store, c.Applier, c.Clock)
	c.Tracker = tracker.New(c.Store, c.Applier, c.Clock, c.Tenancy)
	c.Skills = skill.New(c.Store, c.Applier, c.Clock)
	c.Pipelines = versions.New(c.Store, c.Applier, c.Clock)
	c.API = server.NewAPI(c.Log.With("component", "api"), c.Auth, &access.Resolver{Store: c.Store},
		server.Finders{Orgs: c.Tenancy, Items: c.Tracker}, cfg.HTTP.MaxBodyBytes, cfg.HTTP.WriteTimeout.Duration)
	c.API.Add((&server.Tenancy{T: c.Tenancy}).Routes()...)
	c.API.Add((&server.Pipelines{V: c.Pipelines}).Routes()...)
	c.API.Add((&server.Items{T: c.Tracker}).Routes()...)
	c.API.Add((&server.Tokens{S: auth.NewTokenService(c.Store, c.Applier, c.Clock, &access.Resolver{Store: c.Store})}).Routes()...)
	c.API.Add((&server.Skills{S: c.Skills}).Routes()...)
	sessions := &flow.Sessions{Skills: c.Skills, MCPURL: cfg.PublicURL() + "/api/v1/mcp", LogLimit: cfg.Runs.LogLimit}
	c.Runs = run.NewService(c.Store, c.Applier, c.Clock, c.Tracker, run.Config{Grace: cfg.Runs.Grace.Duration, LogLimit: cfg.Runs.LogLimit, Log: c.Log.With("component", "runs"),
		OnFinish: flow.OnRunFinished, Sessions: sessions})
	c.API.Add((&server.Runs{S: c.Runs, Skills: c.Skills, Orgs: c.Tenancy}).Routes()...)
	c.API.Add((&server.MCP{Runs: c.Runs, Tracker: c.Tracker, Log: c.Log.With("component", "mcp")}).Routes()...)
	gitCache := filepath.Join(filepath.Dir(cfg.Storage.Path), "git-cache")
	c.Flows = &flow.Service{Store: c.Store, Applier: c.Applier, Clock: c.Clock, Log: c.Log.With("component", "flow"),
		Tenancy: c.Tenancy, Tracker: c.Tracker, Pipelines: c.Pipelines, Runs: c.Runs, Forges: func(kind string) (forge.Forge, error) {
			if kind == "git" {
				return gitforge.ForBuild(gitCache), nil
			}
			return nil, fmt.Errorf("the %s forge is not supported yet: only plain git", kind)
		}, UnclaimedAfter: cfg.Runs.UnclaimedAfter.Duration, RunnerGrace: cfg.Runs.Grace.Duration}
	sessions.Flows = c.Flows
	if gitforge.TestBuild {
		c.Log.Warn("test build (ballet_testforge): Ballet merges on plain-git projects whose merge policy is auto; never run it in production")
	}
	c.Registry.MustRegister(flow.NewCollector(c.Flows), run.NewCollector(c.Runs))
	loc, err := cfg.Budgets.Location()
	if err != nil {
		return fmt.Errorf("budgets.timezone: %w", err)
	}
	c.Flows.Budget = &budget.Service{Store: c.Store, Clock: c.Clock, Location: loc}
	c.Tracker.Hooks = c.Flows.TrackerHooks()
	c.Tenancy.Hooks = c.Flows.TenancyHooks()
	c.Flows.Register(c.Jobs)
	c.API.Add((&server.Flows{F: c.Flows}).Routes()...)
	c.Realtime = realtime.New(c.Feed, c.Auth, &access.Resolver{Store: c.Store}, c.Tenancy, c.Tracker, c.Store, c.Clock,
		c.Log.With("component", "realtime"), realtime.Config{AuthRecheck: cfg.Events.AuthRecheck.Duration,
			PingInterval: cfg.Events.PingInterval.Duration, PingTimeout: cfg.Events.PingTimeout.Duration,
			Metrics: realtime.NewMetrics(c.Registry)})
	c.API.Add((&server.Unattended{T: c.Tracker, Tenancy: c.Tenancy, F: c.Flows, B: c.Flows.Budget}).Routes()...)
	return nil
}

func openStore(ctx context.Context, cfg config.Storage) (store.Store, error) {
	switch cfg.Engine {
	case "rqlite":
		s, err := rqlite.Open(ctx, rqlite.Options{URLs: cfg.URLs(), Username: cfg.Username, Password: cfg.Password, Consistency: cfg.ReadConsistency})
		if err != nil {
			return nil, fmt.Errorf("open rqlite at %s: %w", cfg.URL, err)
		}
		return s, nil
	default:
		s, err := sqlite.Open(ctx, cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("open sqlite database %s: %w", cfg.Path, err)
		}
		return s, nil
	}
}

func instanceID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Listen binds the HTTP address addr (http.addr). `ballet serve` binds it
// before Open, so that a busy port fails before anything is created.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (http.addr): %w", addr, err)
	}
	return l, nil
}

// Listen binds the configured HTTP address (use 127.0.0.1:0 in tests).
func (c *Core) Listen() error {
	l, err := Listen(c.Config.HTTP.Addr)
	if err != nil {
		return err
	}
	c.listener = l
	return nil
}

// UseListener makes Run serve on l (bound with Listen before Open).
func (c *Core) UseListener(l net.Listener) { c.listener = l }

// HTTPServer returns the server Run uses: Core's handler under the [http]
// timeouts. A route that waits longer (the runners' lease long poll)
// extends its own connection's deadlines; the realtime WebSocket hijacks
// its connection, which lifts them.
func (c *Core) HTTPServer() *http.Server {
	h := c.Config.HTTP
	return &http.Server{Handler: c.Handler(),
		ReadHeaderTimeout: h.ReadHeaderTimeout.Duration, ReadTimeout: h.ReadTimeout.Duration,
		WriteTimeout: h.WriteTimeout.Duration, IdleTimeout: h.IdleTimeout.Duration,
		ErrorLog: slog.NewLogLogger(c.Log.Handler(), slog.LevelWarn)}
}

// LimitConns wraps l with the [http] connection caps (max_conns,
// max_conns_per_ip).
func (c *Core) LimitConns(l net.Listener) net.Listener {
	return server.LimitConns(l, c.Config.HTTP.MaxConns, c.Config.HTTP.MaxConnsPerIP, c.conns)
}

// Addr returns the bound HTTP address.
func (c *Core) Addr() string { return c.listener.Addr().String() }

type pinger struct{ s store.Store }

func (p pinger) Ping(ctx context.Context) error {
	_, err := p.s.Query(ctx, `SELECT 1 FROM schema_migrations LIMIT 1`)
	return err
}

// Handler returns Core's HTTP handler: the REST API, probes, metrics and
// the realtime WebSocket.
func (c *Core) Handler() http.Handler {
	api := server.New(c.Log.With("component", "http"), pinger{c.Store}, c.Registry, func() map[string]any {
		return map[string]any{"engine": c.Store.Engine(), "instance": c.ID, "leader": c.leading()}
	}, c.API)
	mux := http.NewServeMux()
	mux.Handle("GET "+realtime.Path, c.Realtime)
	mux.Handle("/", api)
	return mux
}

// RunFeed tails the event log for realtime subscribers until ctx ends
// (every instance runs it; Run starts it).
func (c *Core) RunFeed(ctx context.Context) { c.Feed.Run(ctx) }

// Run serves HTTP and, while this instance leads, runs the orchestrator,
// until ctx ends; then it shuts down gracefully.
func (c *Core) Run(ctx context.Context) error {
	if c.listener == nil {
		if err := c.Listen(); err != nil {
			return err
		}
	}
	c.http = c.HTTPServer()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.http.Serve(c.LimitConns(c.listener)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	c.Log.Info("core serving", "addr", c.Addr(), "engine", c.Store.Engine(), "instance", c.ID)
	wg.Add(1)
	go func() { defer wg.Done(); c.RunFeed(ctx) }() // on every instance, leader or not
	lead := func(ctx context.Context) {
		c.Log.Info("leading: orchestrator started")
		// No handler can be running for any claim now: on SQLite this is the
		// only process (an earlier one crashed or stopped); on rqlite every
		// earlier leader abandoned its handlers before its lease ended, and
		// this instance's earlier terms have wound down. Their jobs run
		// again at once instead of after their lease.
		if _, err := c.Jobs.TakeBack(ctx); err != nil && ctx.Err() == nil {
			c.Log.Error("take back the jobs of earlier holders (they run again when their lease ends)", "err", err)
		}
		// The leader's loops: sweeper, scheduler and reconciler beside the
		// orchestrator; all stop the moment leadership is lost.
		var loops sync.WaitGroup
		for _, loop := range []func(context.Context){c.Runs.RunSweeper, func(ctx context.Context) { _ = c.Scheduler.Run(ctx) }, c.Reconciler.Run} {
			loops.Add(1)
			go func() { defer loops.Done(); loop(ctx) }()
		}
		if err := c.Jobs.Run(ctx); err != nil {
			c.Log.Error("orchestrator stopped", "err", err)
		}
		loops.Wait()
		c.Log.Info("orchestrator stopped")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if c.Elector != nil {
			c.Elector.Run(ctx, lead)
		} else {
			lead(ctx)
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.http.Shutdown(shutdownCtx)
	wg.Wait()
	return err
}

// Close closes the store.
func (c *Core) Close() error { return c.Store.Close() }
