// Package core wires Ballet's Core process: storage, the transition
// applier, the durable job orchestrator, leader election and the HTTP
// server. A test starts a whole Core on port 0 with a temporary database.
package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/changes"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/door"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/gitea"
	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/forge/github"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/leader"
	"github.com/ballet/ballet/internal/mcp"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/notify/mail"
	"github.com/ballet/ballet/internal/pipeline/versions"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/retention"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/schedule"
	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/engine"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
	"github.com/ballet/ballet/internal/webhook"
	"github.com/ballet/ballet/internal/webui"
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
	Changes    *changes.Service // a ticket's branch against its base (GET /items/{item}/changes)
	Scheduler  *schedule.Scheduler
	Reconciler *reconcile.Reconciler
	// Retention deletes old data in small batches ([retention]; the leader
	// queues its job).
	Retention *retention.Retention
	// Notifier turns the events that need a person into notifications
	// (the leader runs it).
	Notifier *notify.Notifier
	// Digester closes people's digest periods (the leader runs it; nil
	// when [digest] enabled is false or mail is off).
	Digester *digest.Digester
	// Mailer runs the mail jobs (its Sender is nil while [notify.email]
	// smtp_url is unset: mail is off); NotifySettings changes people's
	// notification settings.
	Mailer         *notify.Mailer
	NotifySettings *notify.SettingsService
	mailLinks      *server.MailLinks
	Feed           *feed.Feed        // tails the event log on every instance
	Realtime       *realtime.Handler // the WebSocket JSON-RPC API
	OIDCLogin      *server.OIDCLogin // the browser's sign-in through the issuer (nil: [auth] oidc_client_id unset)
	Runs           *run.Service
	// Knowledge calls the Knowledge service with the service credential
	// (the MCP tools, the entries a stage names).
	Knowledge *client.Client
	// Webhooks turns the causes into webhook deliveries (the leader runs
	// it); their jobs post them.
	Webhooks *webhook.Dispatcher

	knowledgeProxy *server.KnowledgeProxy
	listener       net.Listener
	conns          *server.ConnMetrics
	http           *http.Server
	leading        func() bool
}

// Options are what a Core is built from.
type Options struct {
	Config config.Config
	// Log receives every component's logs (nil: discarded).
	Log *slog.Logger
	// Store is the open, migrated store New builds on (tests pass their
	// own); Open opens the configured one and ignores this.
	Store store.Store
	// Clock drives every loop and every time Core records (nil:
	// clock.Real). Tests run a whole Core on a clock.Fake.
	Clock clock.Clock
	// Mailer sends the digests in place of the configured mail server
	// (nil: [notify.email]'s; with neither, none is mailed: the digest's
	// loop does not run, GET /api/v1/me/digest still answers).
	Mailer digest.Mailer
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Open opens the configured store, applies migrations and builds every
// component (New).
func Open(ctx context.Context, o Options) (*Core, error) {
	o.defaults()
	st, err := engine.Open(ctx, o.Config.Storage)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, st, o.Clock, o.Log); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s database: %w", st.Engine(), err)
	}
	o.Store = st
	c, err := New(o)
	if err != nil {
		st.Close()
		return nil, err
	}
	return c, nil
}

// migrate applies the migrations, retrying for a while (on clk) when the
// engine cannot tell whether a write landed (an rqlite cluster without a
// leader for a moment): migrations are idempotent, so a retry is safe.
func migrate(ctx context.Context, st store.Store, clk clock.Clock, log *slog.Logger) error {
	deadline := clk.Now().Add(time.Minute)
	for {
		err := store.Migrate(ctx, st, clk.Now())
		if err == nil || !errors.Is(err, store.ErrUnknownOutcome) || clk.Now().After(deadline) {
			return err
		}
		log.Warn("migration write outcome unknown: retrying", "err", err)
		t := clk.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// New builds a Core around o.Store, top-down: the machinery every change
// goes through (jobs, event feed, applier), the domains, each with its
// hooks, the flow engine, the leader's loops, the subscribers of every
// commit, then HTTP. Nothing is assigned after its construction, except
// the applier's subscribers: what they wake is built on the applier.
func New(o Options) (*Core, error) {
	o.defaults()
	cfg, log, st, clk := o.Config, o.Log, o.Store, o.Clock
	loc, err := cfg.Budgets.Location()
	if err != nil {
		return nil, fmt.Errorf("budgets.timezone: %w", err)
	}
	bootstrap, err := bootstrapToken(cfg.Auth, cfg.Storage.Path, log)
	if err != nil {
		return nil, err
	}
	serviceToken, err := cfg.KnowledgeToken(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	secrets := secretPolicy(cfg, bootstrap, serviceToken, os.Environ())
	c := &Core{Config: cfg, Log: log, Clock: clk, ID: instanceID(), Store: st, Registry: prometheus.NewRegistry()}
	if c.Knowledge, err = client.New(client.Options{URL: cfg.Knowledge.URL, Token: serviceToken}); err != nil {
		return nil, fmt.Errorf("knowledge.url: %w", err)
	}
	reg := c.Registry
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c.conns = server.NewConnMetrics(reg)
	res := &access.Resolver{Store: st}

	// The machinery.
	c.Jobs = job.NewOrchestrator(st, clk, log.With("component", "jobs"), job.Config{
		Concurrency: cfg.Jobs.Concurrency, Lease: cfg.Jobs.Lease.Duration, Poll: cfg.Jobs.Poll.Duration,
		BackoffCap: cfg.Jobs.BackoffCap.Duration, ShutdownGrace: cfg.Jobs.ShutdownGrace.Duration,
	}, c.ID, job.NewMetrics(reg))
	reg.MustRegister(job.NewQueueCollector(st))
	c.Feed = feed.New(st, clk, log.With("component", "feed"), feed.Config{Interval: cfg.Events.TailInterval.Duration})
	c.Applier = &transition.Applier{Store: st, Clock: clk, MaxAttempts: cfg.Jobs.MaxAttempts}

	// The domains. The flow engine's hooks into tenancy and the tracker
	// are pure, so they are given here, before the engine itself.
	c.Auth = auth.NewAuthenticator(st, clk, bootstrap, cfg.Auth.PlatformAdmins, auth.OIDCConfig{Issuer: cfg.Auth.OIDCIssuer, Audience: cfg.Auth.OIDCAudience})
	c.Auth.Reserve(serviceToken) // never a user credential, on any route
	c.Tenancy = &tenancy.Service{Store: st, Applier: c.Applier, Clock: clk, Hooks: flow.TenancyHooks(), Secrets: secrets}
	c.Tracker = tracker.New(st, c.Applier, clk, c.Tenancy, flow.TrackerHooks())
	c.Skills = skill.New(st, c.Applier, clk)
	c.Pipelines = versions.New(st, c.Applier, clk)
	sessions := &flow.Sessions{Store: st, Projects: c.Tenancy, Skills: c.Skills, MCPURL: cfg.PublicURL() + mcp.Path, LogLimit: cfg.Runs.LogLimit,
		Secrets: secrets}
	c.Runs = run.NewService(st, c.Applier, clk, c.Tracker, run.Config{Grace: cfg.Runs.Grace.Duration, LogLimit: cfg.Runs.LogLimit,
		LogRetention: cfg.Retention.RunLogs.Duration,
		Log:          log.With("component", "runs"), OnFinish: flow.OnRunFinished, Sessions: sessions})
	tokens := auth.NewTokenService(st, c.Applier, clk, res)

	// The flow engine, its job handlers and its metrics; the forges it
	// merges on are those a ticket's changes are read from.
	forges := NewForges(filepath.Join(filepath.Dir(cfg.Storage.Path), "git-cache"), clk, secrets)
	c.Changes = &changes.Service{Projects: c.Tenancy, Runs: c.Runs, Sources: forges.Source, Cache: changes.NewCache(changes.DefaultCacheBytes)}
	c.Flows = &flow.Service{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "flow"),
		Tenancy: c.Tenancy, Tracker: c.Tracker, Pipelines: c.Pipelines, Runs: c.Runs, Forges: forges.Forge,
		Budget: &budget.Service{Store: st, Clock: clk, Location: loc}, UnclaimedAfter: cfg.Runs.UnclaimedAfter.Duration,
		RunnerGrace: cfg.Runs.Grace.Duration, Knowledge: c.Knowledge, KnowledgeWait: cfg.Knowledge.Wait.Duration,
		MaxInterruptions: cfg.Runs.MaxInterruptions}
	if gitforge.TestBuild {
		log.Warn("test build (ballet_testforge): Ballet merges on plain-git projects whose merge policy is auto; never run it in production")
	}
	c.Flows.Register(c.Jobs)
	reg.MustRegister(flow.NewCollector(c.Flows), run.NewCollector(c.Runs))

	// The leader's loops (the orchestrator and the sweeper are above).
	c.Scheduler = schedule.New(st, clk, log.With("component", "scheduler"), c.Flows, schedule.Config{
		Interval: cfg.Scheduler.Interval.Duration, PlatformLimit: cfg.Scheduler.PlatformLimit,
		Metrics: schedule.NewMetrics(reg),
	})
	c.Reconciler = reconcile.New(st, clk, log.With("component", "reconciler"), c.Flows, c.Runs, reconcile.Config{
		Interval: cfg.Reconciler.Interval.Duration, Slack: cfg.Reconciler.Slack.Duration,
		Release: c.Flows.Release, Metrics: reconcile.NewMetrics(reg), WakeJobs: c.Jobs.Notify, MaxAttempts: cfg.Jobs.MaxAttempts,
	})
	c.Retention = retention.New(st, clk, log.With("component", "retention"), c.Runs, retention.Config{
		RunLogs: cfg.Retention.RunLogs.Duration, Jobs: cfg.Retention.Jobs.Duration, Sessions: cfg.Retention.Sessions.Duration,
		Notifications: cfg.Retention.Notifications.Duration, Deliveries: cfg.Retention.Deliveries.Duration, Runners: cfg.RunnerRetention(), Interval: cfg.Retention.Interval.Duration,
		Metrics: retention.NewMetrics(reg), WakeJobs: c.Jobs.Notify,
	})
	c.Retention.Register(c.Jobs)
	reg.MustRegister(retention.NewSizeCollector(st))
	c.Notifier = (&notify.Notifier{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "notify"), Items: c.Tracker,
		Members: c.Tenancy, Roles: res, PlatformAdmin: c.Auth.IsPlatformAdmin, Mail: cfg.Notify.MailOn(), BaseURL: cfg.LinkBase(),
		Questions: c.Tracker, Projects: c.Tenancy, EscalateAfter: cfg.Notify.EscalateAfter.Duration}).Init()
	c.Notifier.Register(c.Jobs)
	reg.MustRegister(notify.NewLagCollector(st, clk), notify.NewMailFailingCollector(st))
	keys := &notify.Keys{Store: st, Applier: c.Applier, Clock: clk}
	c.NotifySettings = &notify.SettingsService{Store: st, Applier: c.Applier, Clock: clk, Keys: keys, MailOn: cfg.Notify.MailOn()}
	c.mailLinks = &server.MailLinks{Keys: keys, Settings: c.NotifySettings, Log: log.With("component", "mail-links")}
	// The mail jobs have their handlers also with mail off: a delivery
	// queued before mail was turned off is then recorded as skipped.
	c.Mailer = &notify.Mailer{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "mail"), Keys: keys,
		BaseURL: cfg.LinkBase(), Roles: res, PlatformAdmin: c.Auth.IsPlatformAdmin, Metrics: notify.NewMailMetrics(reg)}
	if cfg.Notify.MailOn() {
		if c.Mailer.Sender, err = mail.New(cfg.Notify.Email); err != nil {
			return nil, err
		}
	}
	c.Mailer.Register(c.Jobs)
	needs := &needsme.Service{Store: st, Access: res, Flows: c.Flows}
	digests := &digest.Builder{Store: st, Access: res, Needs: needs, Items: c.Tracker, Projects: c.Tenancy,
		Spend: &budget.Service{Store: st, Clock: clk, Location: loc}, BaseURL: cfg.LinkBase()}
	digestMailer := o.Mailer
	if digestMailer == nil && c.Mailer.Sender != nil {
		digestMailer = digestMail{c.Mailer.Sender}
	}
	if cfg.Digest.Enabled && digestMailer != nil {
		c.Digester = (&digest.Digester{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "digest"), Builder: digests,
			Every: cfg.Digest.Every.Duration, PlatformAdmin: c.Auth.IsPlatformAdmin}).Init()
		(&digest.Sender{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "digest"), Builder: digests, Mailer: digestMailer,
			PlatformAdmin: c.Auth.IsPlatformAdmin, MessageDomain: hostOf(cfg.LinkBase()),
			Unsubscribe: func(ctx context.Context, subject string) (string, error) {
				return keys.UnsubscribeLink(ctx, cfg.LinkBase(), subject, notify.UnsubscribeDigest)
			}}).Register(c.Jobs)
	}
	hooks := &webhook.Service{Store: st, Applier: c.Applier, Clock: clk, Resolver: net.DefaultResolver, AllowPrivate: cfg.Notify.AllowPrivateTargets}
	c.Webhooks = (&webhook.Dispatcher{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "webhooks"), Items: c.Tracker,
		Orgs: c.Tenancy, Members: c.Tenancy, LinkBase: cfg.LinkBase(), Mail: cfg.Notify.MailOn()}).Init()
	(&webhook.Deliverer{Store: st, Applier: c.Applier, Clock: clk, Log: log.With("component", "webhooks"), Timeout: cfg.Notify.WebhookTimeout.Duration,
		Client: webhook.NewClient(cfg.Notify.AllowPrivateTargets, nil, cfg.Notify.WebhookTimeout.Duration), Metrics: webhook.NewMetrics(reg)}).Register(c.Jobs)
	reg.MustRegister(webhook.NewLagCollector(st, clk))
	c.leading = func() bool { return true }
	if st.Engine() == "rqlite" {
		// Another instance may lead once the lease has ended: the handlers
		// stop before, and their claims are left for it to take back.
		c.Elector = leader.New(st, clk, log.With("component", "leader"), "core", c.ID, cfg.Leader.TTL.Duration, cfg.Leader.Renew.Duration, c.Jobs.Abandon)
		c.leading = c.Elector.Leading
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ballet_leader", Help: "1 while this instance runs the orchestrator, scheduler and reconciler.",
	}, func() float64 {
		if c.leading() {
			return 1
		}
		return 0
	}))

	// After every commit, in this order: local realtime subscribers see
	// the change within milliseconds, enqueued jobs run at once, the
	// scheduler passes, waiting runners lease a new run, spend is counted.
	c.Applier.Subscribe(c.Feed.OnCommit, transition.WakeOnJobs(c.Jobs.Notify), c.Scheduler.OnCommit, c.Runs.OnCommit,
		run.SpendMetric(reg), c.Notifier.OnCommit, c.Webhooks.OnCommit)
	if c.Digester != nil {
		// A saved choice (a digest chosen, an hour moved, an address
		// confirmed) is seen at once, not at the digester's next minute.
		c.Applier.Subscribe(nudgeOnSettings(c.Digester.Nudge))
	}

	// HTTP: the REST routes and the realtime WebSocket.
	c.API = server.NewAPI(log.With("component", "api"), c.Auth, res, server.Finders{Orgs: c.Tenancy, Items: c.Tracker},
		cfg.HTTP.MaxBodyBytes, cfg.HTTP.WriteTimeout.Duration)
	c.API.Add((&server.Tenancy{T: c.Tenancy}).Routes()...)
	c.API.Add((&server.Pipelines{V: c.Pipelines}).Routes()...)
	subscriptions := &notify.Subscriptions{Store: st, Applier: c.Applier, Clock: clk}
	holds := func(ctx context.Context, itemID string) ([]schedule.Hold, error) {
		return c.Scheduler.Holds(ctx, itemID, c.Flows.BudgetVerdict)
	}
	c.API.Add((&server.Items{T: c.Tracker, Flows: c.Flows, Subscriptions: subscriptions, Holds: holds}).Routes()...)
	c.API.Add((&server.Tokens{S: tokens}).Routes()...)
	c.API.Add((&server.History{Store: st, Tokens: tokens}).Routes()...)
	browser := &auth.Sessions{Auth: c.Auth, Applier: c.Applier, TTL: cfg.Auth.SessionTTL.Duration}
	c.API.Add((&server.Session{S: browser}).Routes()...)
	if cfg.Auth.OIDCClientID != "" {
		c.OIDCLogin = &server.OIDCLogin{Sessions: browser, API: c.API, Flow: &auth.CodeFlow{Auth: c.Auth, ClientID: cfg.Auth.OIDCClientID,
			ClientSecret: cfg.Auth.OIDCClientSecret, RedirectURL: cfg.PublicURL() + "/auth/oidc/callback"},
			VerifiedEmail: c.NotifySettings.RecordVerifiedEmail}
	}
	c.API.Add((&server.Skills{S: c.Skills}).Routes()...)
	c.API.Add((&server.Runs{S: c.Runs, Skills: c.Skills, Orgs: c.Tenancy}).Routes()...)
	c.API.Add((&mcp.Tools{Runs: c.Runs, Tickets: c.Tracker, Orgs: c.Tenancy, Knowledge: c.Knowledge, Log: log.With("component", "mcp")}).Routes()...)
	c.API.Add((&server.Flows{F: c.Flows, Head: c.Changes.Head}).Routes()...)
	c.API.Add((&server.Changes{S: c.Changes}).Routes()...)
	c.API.Add((&server.Hooks{Projects: c.Tenancy, MergeChecks: c.Flows.MergeChecks, Wake: c.Jobs.Wake, Secrets: secrets,
		Log: log.With("component", "hooks"), Deliveries: server.NewHookMetrics(reg)}).Routes()...)
	c.API.Add((&server.Notifications{Inbox: &notify.Inbox{Store: st, Applier: c.Applier, Clock: clk}, Settings: c.NotifySettings}).Routes()...)
	c.API.Add((&server.Subscriptions{S: subscriptions}).Routes()...)
	c.API.Add((&server.NeedsMe{L: needs}).Routes()...)
	c.API.Add((&server.Digest{P: &digest.Preview{Builder: digests, Clock: clk, Every: cfg.Digest.Every.Duration,
		Enabled: c.Digester != nil}}).Routes()...)
	c.API.Add((&server.Webhooks{S: hooks}).Routes()...)
	c.API.Add((&server.Unattended{T: c.Tracker, Tenancy: c.Tenancy, F: c.Flows, B: c.Flows.Budget}).Routes()...)
	c.API.Add((&server.Introspect{Token: serviceToken, Authn: c.Auth, Orgs: c.Tenancy, Access: res}).Routes()...)
	if c.knowledgeProxy, err = server.NewKnowledgeProxy(cfg.Knowledge.URL, cfg.HTTP.MaxBodyBytes, c.Auth.IsReserved,
		log.With("component", "knowledge-proxy")); err != nil {
		return nil, err
	}
	var origins []string
	if cfg.HTTP.PublicURL != "" {
		if err := c.API.SetPublicURL(cfg.HTTP.PublicURL); err != nil {
			return nil, fmt.Errorf("http.public_url: %w", err)
		}
		u, _ := url.Parse(cfg.HTTP.PublicURL) // SetPublicURL parsed it
		origins = []string{u.Host}
	}
	// A browser's session reaches the service as the bearer of its value,
	// after the API's own cross-origin check.
	c.knowledgeProxy.Session = server.SessionValue
	c.knowledgeProxy.UseCSRF(c.API.CSRF())
	c.Realtime = realtime.New(c.Feed, c.Auth, res, c.Tenancy, c.Tracker, st, clk, log.With("component", "realtime"),
		realtime.Config{AuthRecheck: cfg.Events.AuthRecheck.Duration, PingInterval: cfg.Events.PingInterval.Duration,
			PingTimeout: cfg.Events.PingTimeout.Duration, Metrics: realtime.NewMetrics(reg), OriginPatterns: origins})
	return c, nil
}

// bootstrapToken returns the platform-admin bootstrap token: the
// configured one, or the one in its file (next to the SQLite database by
// default), generated there on first start.
func bootstrapToken(cfg config.Auth, dbPath string, log *slog.Logger) (string, error) {
	file := cfg.BootstrapTokenFile
	if file == "" {
		file = filepath.Join(filepath.Dir(dbPath), "bootstrap-token")
	}
	token, generated, err := auth.Bootstrap(cfg.BootstrapToken, file)
	if err != nil {
		return "", fmt.Errorf("bootstrap token: %w", err)
	}
	if generated {
		log.Warn("generated a platform-admin bootstrap token: use it as a Bearer token (keep it secret)", "file", file)
	}
	return token, nil
}

// secretPolicy is the platform's policy on secret references: [secrets]
// allow, and never Ballet's own — its variables (BALLET_*, the model
// providers', what the runner passes to sessions), its files (the
// configuration, the data folder, the bootstrap token file, the runner's
// folder) and the values of its credentials (those of the configuration
// and of Ballet's own variables in environ).
func secretPolicy(cfg config.Config, bootstrap, serviceToken string, environ []string) *secret.Policy {
	own := secret.Own{EnvNames: cfg.Runner.PassEnv,
		Values: []string{bootstrap, serviceToken, cfg.Auth.BootstrapToken, cfg.Knowledge.ServiceToken, cfg.Storage.Password,
			cfg.Auth.OIDCClientSecret, cfg.Runner.Token}}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if own.HasEnv(k) {
			own.Values = append(own.Values, v)
		}
	}
	tokenFile := cfg.Auth.BootstrapTokenFile
	if tokenFile == "" {
		tokenFile = filepath.Join(filepath.Dir(cfg.Storage.Path), "bootstrap-token")
	}
	for _, p := range []string{cfg.File, filepath.Dir(cfg.Storage.Path), tokenFile, cfg.Runner.Workdir} {
		own.AddPath(p)
	}
	return &secret.Policy{Allow: cfg.Secrets.Allow, Own: own}
}

// Forges returns the forge of each repository kind (forge.Kinds): plain
// git keeps its mirrors in gitCache (Core's: git-cache next to the SQLite
// database), the Gitea client those it reads a ticket's changes from in
// gitCache/gitea; Gitea and GitHub are API clients, one each (the Gitea client
// remembers which pull requests it saw unmergeable), resolving
// repository.credentials_ref through the platform's policy (secrets) at
// every call, so a rotated secret is used at once.
func Forges(gitCache string, clk clock.Clock, secrets forge.Secrets) flow.Forges {
	return NewForges(gitCache, clk, secrets).Forge
}

// ForgeSet is one forge of each repository kind, for the flow engine
// (Forge) and for reading a ticket's changes (Source): the same clients,
// so that a plain-git mirror has one lock.
type ForgeSet map[string]forge.Forge

// NewForges builds the forges (see Forges).
func NewForges(gitCache string, clk clock.Clock, secrets forge.Secrets) ForgeSet {
	return ForgeSet{
		forge.KindGit:    gitforge.ForBuild(gitCache),
		forge.KindGitea:  gitea.New(gitea.Options{Clock: clk, Secrets: secrets, GitCache: filepath.Join(gitCache, "gitea")}),
		forge.KindGitHub: github.New(github.Options{Clock: clk, Secrets: secrets}),
	}
}

// Forge is the forge of a repository kind.
func (s ForgeSet) Forge(kind string) (forge.Forge, error) {
	if f, ok := s[kind]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("the forge %q is not git, gitea or github", kind)
}

// Every forge reads a ticket's changes.
var (
	_ changes.Source = (*gitforge.Forge)(nil)
	_ changes.Source = (*gitea.Forge)(nil)
	_ changes.Source = (*github.Forge)(nil)
)

// Source is the forge of a repository kind as a ticket's changes read it.
func (s ForgeSet) Source(kind string) (changes.Source, error) {
	f, err := s.Forge(kind)
	if err != nil {
		return nil, err
	}
	src, ok := f.(changes.Source)
	if !ok {
		return nil, apperr.New(apperr.Unavailable, "the changes of a %s repository cannot be read by this Ballet", kind)
	}
	return src, nil
}

// instanceID names this process in job claims and the leader lease: host,
// pid and a random suffix.
func instanceID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host" // the pid and the suffix still tell instances apart
	}
	b := make([]byte, 4)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
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
	mux.Handle(server.KnowledgePrefix, c.knowledgeProxy) // the service's routes, answered by the service
	if c.OIDCLogin != nil {
		c.OIDCLogin.Register(mux)
	}
	c.mailLinks.Register(mux) // the links of Ballet's mail
	mux.Handle("/", api)
	ui, err := webui.New(mux, c.uiConfig())
	if err != nil {
		// The binary was built without the UI: serve the API alone.
		c.Log.Error("web UI unavailable", "err", err)
		return door.Headers(mux)
	}
	return door.Headers(ui) // the UI's page and assets set their own
}

// uiConfig is what the web UI's page tells the browser.
func (c *Core) uiConfig() webui.Config {
	return webui.Config{OIDC: c.OIDCLogin != nil}
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
		// orchestrator; all stop the moment leadership is lost. Each logs
		// its own errors and goes on: none returns one.
		var loops sync.WaitGroup
		loopsToRun := []func(context.Context){c.Runs.RunSweeper, c.Scheduler.Run, c.Reconciler.Run, c.Notifier.Run, c.Webhooks.Run, c.Retention.Run}
		if c.Digester != nil {
			loopsToRun = append(loopsToRun, c.Digester.Run)
		}
		for _, loop := range loopsToRun {
			loops.Add(1)
			go func() { defer loops.Done(); loop(ctx) }()
		}
		c.Jobs.Run(ctx)
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
	c.shutdown()
	wg.Wait()
	return err
}

// ShutdownGrace is how long, on Core's clock, Run lets HTTP requests in
// flight finish when it stops.
const ShutdownGrace = 10 * time.Second

// shutdown stops the HTTP server: no new connections, requests in flight
// may finish within ShutdownGrace; the connections still busy then (a
// runner's lease long poll waits up to a minute) are closed.
func (c *Core) shutdown() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := c.Clock.NewTimer(ShutdownGrace)
	defer t.Stop()
	go func() {
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.http.Shutdown(ctx); err != nil {
		c.Log.Warn("requests still running after the shutdown grace: closing their connections", "grace", ShutdownGrace, "err", err)
		if err := c.http.Close(); err != nil {
			c.Log.Warn("close http connections", "err", err)
		}
	}
}

// Close closes the store.
func (c *Core) Close() error { return c.Store.Close() }

// hostOf is the host of a URL ("ballet" when it has none): the right-hand
// side of the Message-ID of Core's mails.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "ballet"
}

// digestMail sends the digests through the configured mail server.
type digestMail struct{ s notify.Sender }

func (d digestMail) Send(ctx context.Context, m digest.Message) error {
	return d.s.Send(ctx, mail.Message(m))
}

// nudgeOnSettings is the subscriber that calls nudge after a transition
// that changed someone's notification settings or confirmed an address.
func nudgeOnSettings(nudge func()) transition.Subscriber {
	return func(c transition.Committed) {
		for _, e := range c.Events {
			if e.Type == (notify.SettingsChanged{}).EventType() || e.Type == (notify.AddressConfirmed{}).EventType() {
				nudge()
				return
			}
		}
	}
}
