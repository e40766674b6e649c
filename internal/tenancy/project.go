package tenancy

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/bounds"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/keys"
	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Repository is where a project's code lives.
type Repository struct {
	Forge          string `json:"forge"` // git, gitea or github
	URL            string `json:"url"`
	DefaultBranch  string `json:"default_branch"`
	CredentialsRef string `json:"credentials_ref"` // where the secret is (env:NAME), never the secret
	// APIURL overrides the API base a Gitea or GitHub client derives from
	// URL ("": derived).
	APIURL string `json:"api_url"`
	// WebhookSecretRef is where the secret the forge signs webhook
	// deliveries with is (env:NAME), never the secret; "": no webhooks.
	WebhookSecretRef string `json:"webhook_secret_ref"`
}

// MergePolicy decides how the merge stage merges (ADR-0008).
type MergePolicy struct {
	Mode              string   `json:"mode"` // auto or manual
	RequiredApprovals int      `json:"required_approvals"`
	RequiredChecks    []string `json:"required_checks"`
}

// Budgets limit spend in USD, exactly to the millionth (budget.Dollars);
// null means no limit.
type Budgets struct {
	PerTicketUSD *budget.Dollars `json:"per_ticket_usd"`
	PerDayUSD    *budget.Dollars `json:"per_day_usd"`
}

// Notify is a project's notification settings.
type Notify struct {
	// EscalateAfter is how long a blocking question or an approval may
	// wait before the project's admins are told (a Go duration such as
	// "2h", 1m … 720h); null: the platform's [notify] escalate_after.
	EscalateAfter *string `json:"escalate_after"`
}

// Escalation bounds of a project's notify.escalate_after (as of [notify]
// escalate_after).
const (
	MinEscalateAfter = time.Minute
	MaxEscalateAfter = 720 * time.Hour
)

// EscalateAfterOr is the project's escalate_after, else def (the
// platform's).
func (p Project) EscalateAfterOr(def time.Duration) time.Duration {
	if p.Notify.EscalateAfter == nil {
		return def
	}
	d, err := time.ParseDuration(*p.Notify.EscalateAfter)
	if err != nil {
		return def // validated when saved: not reached
	}
	return d
}

// Project is a tracker and pipeline scope within an organization.
type Project struct {
	ID               string      `json:"id"`
	OrganizationID   string      `json:"organization_id"`
	Key              string      `json:"key"`
	Name             string      `json:"name"`
	Repository       *Repository `json:"repository"`
	MergePolicy      MergePolicy `json:"merge_policy"`
	ConcurrencyLimit int         `json:"concurrency_limit"` // 0: no project limit
	Budgets          Budgets     `json:"budgets"`
	TicketTypes      []string    `json:"ticket_types"`
	Paused           bool        `json:"paused"`
	Notify           Notify      `json:"notify"`
	CreatedAt        time.Time   `json:"created_at"`
	UpdatedAt        time.Time   `json:"updated_at"`
	Version          int64       `json:"version"`
}

// ProjectInput is a new project's settings; what is nil takes its
// default.
type ProjectInput struct {
	Key              string
	Name             string
	Repository       *Repository
	MergePolicy      *MergePolicy
	ConcurrencyLimit *int
	Budgets          *Budgets
	TicketTypes      []string
}

// ProjectPatch changes some of a project's settings: what is nil (or not
// Set) stays. Repository, MergePolicy and Budgets are merged into the
// project's own, field by field (RFC 7386): a field not Set stays, null
// puts it back to its default (a new project's: no repository, the merge
// policy manual with no approvals or checks, no budget limits, branch
// main, no credentials ref), a value replaces it.
type ProjectPatch struct {
	Name             *string
	Repository       strictjson.Nullable[RepositoryPatch]
	MergePolicy      strictjson.Nullable[MergePolicyPatch]
	ConcurrencyLimit *int
	Budgets          strictjson.Nullable[BudgetsPatch]
	TicketTypes      []string
	Paused           *bool
	Notify           strictjson.Nullable[NotifyPatch]
}

// NotifyPatch changes a project's notification settings; null puts one
// back to the platform's.
type NotifyPatch struct {
	EscalateAfter strictjson.Nullable[string]
}

// RepositoryPatch changes fields of a project's repository (of an empty
// one when the project has none). Forge and URL have no default: null
// leaves them empty, which a repository cannot be.
type RepositoryPatch struct {
	Forge            strictjson.Nullable[string]
	URL              strictjson.Nullable[string]
	DefaultBranch    strictjson.Nullable[string]
	CredentialsRef   strictjson.Nullable[string]
	APIURL           strictjson.Nullable[string]
	WebhookSecretRef strictjson.Nullable[string]
}

// MergePolicyPatch changes fields of a project's merge policy.
type MergePolicyPatch struct {
	Mode              strictjson.Nullable[string]
	RequiredApprovals strictjson.Nullable[int]
	RequiredChecks    strictjson.Nullable[[]string]
}

// BudgetsPatch changes a project's budget limits; null lifts a limit.
type BudgetsPatch struct {
	PerTicketUSD strictjson.Nullable[budget.Dollars]
	PerDayUSD    strictjson.Nullable[budget.Dollars]
}

// merge sets *v to what n says: unchanged when n is not Set, def when it
// is null, its value otherwise.
func merge[T any](v *T, n strictjson.Nullable[T], def T) {
	switch {
	case !n.Set:
	case n.Value == nil:
		*v = def
	default:
		*v = *n.Value
	}
}

// defaultMergePolicy is a new project's merge policy.
func defaultMergePolicy() MergePolicy {
	return MergePolicy{Mode: "manual", RequiredChecks: []string{}}
}

// mergeRepository merges the patch into r (nil: none), returning the
// repository it makes.
func mergeRepository(r *Repository, in RepositoryPatch) *Repository {
	var out Repository
	if r != nil {
		out = *r
	}
	merge(&out.Forge, in.Forge, "")
	merge(&out.URL, in.URL, "")
	merge(&out.DefaultBranch, in.DefaultBranch, "")
	merge(&out.CredentialsRef, in.CredentialsRef, "")
	merge(&out.APIURL, in.APIURL, "")
	merge(&out.WebhookSecretRef, in.WebhookSecretRef, "")
	return &out
}

// mergePolicy merges the patch into m.
func mergePolicy(m MergePolicy, in MergePolicyPatch) MergePolicy {
	def := defaultMergePolicy()
	merge(&m.Mode, in.Mode, def.Mode)
	merge(&m.RequiredApprovals, in.RequiredApprovals, def.RequiredApprovals)
	merge(&m.RequiredChecks, in.RequiredChecks, def.RequiredChecks)
	return m
}

// mergeBudgets merges the patch into b.
func mergeBudgets(b Budgets, in BudgetsPatch) Budgets {
	if in.PerTicketUSD.Set {
		b.PerTicketUSD = in.PerTicketUSD.Value
	}
	if in.PerDayUSD.Set {
		b.PerDayUSD = in.PerDayUSD.Value
	}
	return b
}

// DefaultTicketTypes are a new project's ticket types.
var DefaultTicketTypes = []string{"task", "bug", "docs"}

var typeRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// ValidTicketType reports whether t can name a ticket type.
func ValidTicketType(t string) bool { return typeRE.MatchString(t) && t != "epic" }

func validateProject(v *apperr.Validator, p *Project) {
	v.Check(strings.TrimSpace(p.Name) != "" && len(p.Name) <= 200, "name", "must be 1–200 characters")
	v.CheckErr("name", text.Line(p.Name))
	if r := p.Repository; r != nil {
		// What git would execute is refused here, when saved, and again
		// where git runs (gitforge).
		switch r.Forge {
		case forge.KindGit, forge.KindGitea, forge.KindGitHub:
			v.CheckErr("repository.url", forge.CheckLocation(r.Forge, r.URL))
		default:
			v.Add("repository.forge", "%q is not git, gitea or github", r.Forge)
		}
		v.CheckErr("repository.default_branch", forge.CheckBranch(r.DefaultBranch))
		v.CheckErr("repository.credentials_ref", forge.CheckCredentialsRef(r.CredentialsRef))
		v.CheckErr("repository.webhook_secret_ref", forge.CheckWebhookSecretRef(r.WebhookSecretRef))
		if r.Forge == forge.KindGit {
			v.Check(r.APIURL == "", "repository.api_url", "must be empty for a plain git repository: it has no API")
		} else {
			v.CheckErr("repository.api_url", forge.CheckAPIURL(r.APIURL))
		}
	}
	m := p.MergePolicy
	v.Check(m.Mode == "auto" || m.Mode == "manual", "merge_policy.mode", "%q is not auto or manual", m.Mode)
	bounds.RequiredApprovals.Check(v, "merge_policy.required_approvals", int64(m.RequiredApprovals))
	v.Check(len(m.RequiredChecks) <= 50, "merge_policy.required_checks", "at most 50 checks")
	for i, c := range m.RequiredChecks {
		field := fmt.Sprintf("merge_policy.required_checks[%d]", i)
		v.Check(strings.TrimSpace(c) != "" && len(c) <= 200, field, "must be 1–200 characters")
		v.CheckErr(field, text.Line(c))
	}
	bounds.ProjectConcurrency.Check(v, "concurrency_limit", int64(p.ConcurrencyLimit))
	for field, b := range map[string]*budget.Dollars{"budgets.per_ticket_usd": p.Budgets.PerTicketUSD, "budgets.per_day_usd": p.Budgets.PerDayUSD} {
		if b != nil {
			v.Check(*b >= 0 && *b <= budget.MaxMicros, field, "%v is outside 0 … %d", *b, budget.MaxDollars)
		}
	}
	if d := p.Notify.EscalateAfter; d != nil {
		after, err := time.ParseDuration(*d)
		v.Check(err == nil && after >= MinEscalateAfter && after <= MaxEscalateAfter, "notify.escalate_after",
			"%q must be a duration such as \"2h\" or \"30m\" within 1m … 720h", *d)
	}
	v.Check(len(p.TicketTypes) >= 1 && len(p.TicketTypes) <= 20, "ticket_types", "must list 1–20 types")
	seen := map[string]bool{}
	for i, t := range p.TicketTypes {
		v.Check(ValidTicketType(t), fmt.Sprintf("ticket_types[%d]", i), "%q must match [a-z][a-z0-9_-]{0,31} and not be \"epic\"", t)
		v.Check(!seen[t], fmt.Sprintf("ticket_types[%d]", i), "%q is listed twice", t)
		seen[t] = true
	}
}

const projectColumns = `id, organization_id, key, name, COALESCE(repo_forge, ''), COALESCE(repo_url, ''), COALESCE(repo_default_branch, ''),
COALESCE(repo_credentials_ref, ''), COALESCE(repo_api_url, ''), COALESCE(repo_webhook_secret_ref, ''), merge_policy, required_approvals, required_checks, concurrency_limit, budget_ticket_micros,
budget_day_micros, ticket_types, paused, created_at, updated_at, version, notify_escalate_after`

func scanProject(rows *store.Rows, i int) (Project, error) {
	var p Project
	var r Repository
	var checks, types string
	var ticket, day sql.NullInt64
	var escalate sql.NullString
	var c, u int64
	if err := rows.Scan(i, &p.ID, &p.OrganizationID, &p.Key, &p.Name, &r.Forge, &r.URL, &r.DefaultBranch, &r.CredentialsRef, &r.APIURL, &r.WebhookSecretRef,
		&p.MergePolicy.Mode, &p.MergePolicy.RequiredApprovals, &checks, &p.ConcurrencyLimit, &ticket, &day, &types, &p.Paused, &c, &u, &p.Version, &escalate); err != nil {
		return p, fmt.Errorf("scan project: %w", err)
	}
	if r.Forge != "" {
		p.Repository = &r
	}
	p.Budgets.PerTicketUSD, p.Budgets.PerDayUSD = fromMicros(ticket), fromMicros(day)
	if escalate.Valid {
		p.Notify.EscalateAfter = &escalate.String
	}
	if err := json.Unmarshal([]byte(checks), &p.MergePolicy.RequiredChecks); err != nil {
		return p, fmt.Errorf("project %s required_checks: %w", p.ID, err)
	}
	if err := json.Unmarshal([]byte(types), &p.TicketTypes); err != nil {
		return p, fmt.Errorf("project %s ticket_types: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt = store.Time(c), store.Time(u)
	return p, nil
}

func fromMicros(v sql.NullInt64) *budget.Dollars {
	if !v.Valid {
		return nil
	}
	d := budget.Dollars(v.Int64)
	return &d
}

func toMicros(d *budget.Dollars) any {
	if d == nil {
		return nil
	}
	return d.Micros()
}

// optional is a stored optional text: NULL for nil.
func optional(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// projectValues are the stored values of p's settings, in projectColumns
// order after organization_id and key.
func projectValues(p *Project) []any {
	var r Repository
	if p.Repository != nil {
		r = *p.Repository
	}
	checks, _ := json.Marshal(p.MergePolicy.RequiredChecks)
	types, _ := json.Marshal(p.TicketTypes)
	return []any{p.Name, nullIfEmpty(r.Forge), nullIfEmpty(r.URL), nullIfEmpty(r.DefaultBranch), nullIfEmpty(r.CredentialsRef),
		nullIfEmpty(r.APIURL), nullIfEmpty(r.WebhookSecretRef), p.MergePolicy.Mode, p.MergePolicy.RequiredApprovals, string(checks), p.ConcurrencyLimit,
		toMicros(p.Budgets.PerTicketUSD), toMicros(p.Budgets.PerDayUSD), string(types), p.Paused, optional(p.Notify.EscalateAfter)}
}

// checkSecretRefs refuses a repository whose secret references the
// platform's policy does not let resolve for the project's organization
// (a 400 naming each field).
func (s *Service) checkSecretRefs(ctx context.Context, orgID string, r *Repository) error {
	if r == nil || (r.CredentialsRef == "" && r.WebhookSecretRef == "") {
		return nil
	}
	org, err := s.FindOrganization(ctx, orgID)
	if err != nil {
		return fmt.Errorf("read the organization of the project: %w", err)
	}
	refs := s.Secrets
	if refs == nil {
		refs = &secret.Policy{}
	}
	var v apperr.Validator
	if r.CredentialsRef != "" {
		v.CheckErr("repository.credentials_ref", refs.Check(org.Slug, r.CredentialsRef))
	}
	if r.WebhookSecretRef != "" {
		v.CheckErr("repository.webhook_secret_ref", refs.Check(org.Slug, r.WebhookSecretRef))
	}
	return v.Err()
}

// newProject decides a new project of an organization from its input:
// defaults for what it leaves out, then every rule checked at once.
func newProject(id, orgID string, in ProjectInput, now time.Time) (Project, error) {
	p := Project{ID: id, OrganizationID: orgID, Key: in.Key, Name: strings.TrimSpace(in.Name), Repository: in.Repository,
		MergePolicy: defaultMergePolicy(), TicketTypes: DefaultTicketTypes,
		CreatedAt: now, UpdatedAt: now, Version: 1}
	if in.MergePolicy != nil {
		p.MergePolicy = *in.MergePolicy
	}
	if p.MergePolicy.RequiredChecks == nil {
		p.MergePolicy.RequiredChecks = []string{}
	}
	if in.ConcurrencyLimit != nil {
		p.ConcurrencyLimit = *in.ConcurrencyLimit
	}
	if in.Budgets != nil {
		p.Budgets = *in.Budgets
	}
	if in.TicketTypes != nil {
		p.TicketTypes = in.TicketTypes
	}
	if p.Repository != nil && p.Repository.DefaultBranch == "" {
		p.Repository.DefaultBranch = "main"
	}
	var v apperr.Validator
	if err := keys.ValidateProject(in.Key); err != nil {
		v.Add("key", "%q must be an upper-case letter then 1–9 upper-case letters or digits (like ACME)", in.Key)
	}
	validateProject(&v, &p)
	return p, v.Err()
}

// CreateProject creates a project in an organization.
func (s *Service) CreateProject(ctx context.Context, actor event.Actor, orgID string, in ProjectInput) (Project, error) {
	now := s.now()
	p, err := newProject(transition.NewID(), orgID, in, now)
	if err != nil {
		return Project{}, err
	}
	if err := s.checkSecretRefs(ctx, orgID, p.Repository); err != nil {
		return Project{}, err
	}
	t := &transition.Transition{
		Events: []event.Event{event.Of(actor, orgID, p.ID, p.ID, ProjectCreated(p))},
		Statements: []store.Statement{store.Stmt(`INSERT INTO projects (id, organization_id, key, name, repo_forge, repo_url, repo_default_branch,
repo_credentials_ref, repo_api_url, repo_webhook_secret_ref, merge_policy, required_approvals, required_checks, concurrency_limit,
budget_ticket_micros, budget_day_micros, ticket_types, paused, notify_escalate_after, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
			append(append([]any{p.ID, orgID, p.Key}, projectValues(&p)...), now.UnixMilli(), now.UnixMilli())...)},
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		if store.UniqueOn(err, "projects.key") {
			return Project{}, apperr.New(apperr.Conflict, "project key %q is taken", in.Key)
		}
		return Project{}, err
	}
	return p, nil
}

// FindProject finds a project by key or id.
func (s *Service) FindProject(ctx context.Context, ref string) (Project, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("project %q", ref), `SELECT `+projectColumns+` FROM projects WHERE key = ? OR id = ?`, ref, ref)
	if err != nil {
		return Project{}, err
	}
	return scanProject(rows, 0)
}

// ListProjects lists an organization's projects by key.
func (s *Service) ListProjects(ctx context.Context, orgID string) ([]Project, error) {
	rows, err := s.Store.Query(ctx, `SELECT `+projectColumns+` FROM projects WHERE organization_id = ? ORDER BY key`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return store.ScanAll(rows, scanProject)
}

// patchProject decides a patch of the project as read, over the version
// the caller read: the project it makes and what changed. A patch that
// names nothing, or makes a project that breaks a rule, is invalid.
func patchProject(p Project, version int64, in ProjectPatch) (Project, ProjectChanges, error) {
	var v apperr.Validator
	bounds.CheckVersionRead(&v, version)
	var changes ProjectChanges
	if in.Name != nil {
		p.Name = strings.TrimSpace(*in.Name)
		changes.Name = new(p.Name)
	}
	if in.Repository.Set {
		var r *Repository // null: no repository
		if in.Repository.Value != nil {
			r = mergeRepository(p.Repository, *in.Repository.Value)
			if r.DefaultBranch == "" {
				r.DefaultBranch = "main"
			}
		}
		p.Repository = r
		changes.Repository = strictjson.Nullable[Repository]{Set: true, Value: p.Repository}
	}
	if in.MergePolicy.Set {
		m := defaultMergePolicy() // null: the default policy
		if in.MergePolicy.Value != nil {
			m = mergePolicy(p.MergePolicy, *in.MergePolicy.Value)
		}
		if m.RequiredChecks == nil {
			m.RequiredChecks = []string{}
		}
		p.MergePolicy = m
		changes.MergePolicy = new(p.MergePolicy)
	}
	if in.ConcurrencyLimit != nil {
		p.ConcurrencyLimit = *in.ConcurrencyLimit
		changes.ConcurrencyLimit = new(p.ConcurrencyLimit)
	}
	if in.Budgets.Set {
		b := Budgets{} // null: no limits
		if in.Budgets.Value != nil {
			b = mergeBudgets(p.Budgets, *in.Budgets.Value)
		}
		p.Budgets = b
		changes.Budgets = new(p.Budgets)
	}
	if in.TicketTypes != nil {
		p.TicketTypes = in.TicketTypes
		changes.TicketTypes = p.TicketTypes
	}
	if in.Paused != nil {
		p.Paused = *in.Paused
		changes.Paused = new(p.Paused)
	}
	if in.Notify.Set {
		n := Notify{} // null: the platform's settings
		if in.Notify.Value != nil {
			n = p.Notify
			if e := in.Notify.Value.EscalateAfter; e.Set {
				n.EscalateAfter = e.Value
			}
		}
		p.Notify = n
		changes.Notify = new(p.Notify)
	}
	validateProject(&v, &p)
	if err := v.Err(); err != nil {
		return Project{}, changes, err
	}
	if changes.empty() {
		return Project{}, changes, apperr.New(apperr.Invalid, "nothing to change: name a field to update")
	}
	return p, changes, nil
}

// UpdateProject applies a patch to the project as read, at the version
// the caller read; a stale version is a conflict.
func (s *Service) UpdateProject(ctx context.Context, actor event.Actor, p Project, version int64, in ProjectPatch) (Project, error) {
	p, changes, err := patchProject(p, version, in)
	if err != nil {
		return Project{}, err
	}
	if in.Repository.Set {
		// Both references are checked whenever the repository changes: a
		// reference saved under an older allow list must not follow the
		// repository to a new URL.
		if err := s.checkSecretRefs(ctx, p.OrganizationID, p.Repository); err != nil {
			return Project{}, err
		}
	}
	now := s.now()
	payload := ProjectUpdated{Changes: changes}
	t := &transition.Transition{
		Events: []event.Event{event.Of(actor, p.OrganizationID, p.ID, p.ID, payload)},
		Guarded: []store.Statement{store.Stmt(`UPDATE projects SET name = ?, repo_forge = ?, repo_url = ?, repo_default_branch = ?,
repo_credentials_ref = ?, repo_api_url = ?, repo_webhook_secret_ref = ?, merge_policy = ?, required_approvals = ?, required_checks = ?, concurrency_limit = ?, budget_ticket_micros = ?,
budget_day_micros = ?, ticket_types = ?, paused = ?, notify_escalate_after = ?, updated_at = ?, version = version + 1 WHERE id = ? AND version = ?`,
			append(projectValues(&p), now.UnixMilli(), p.ID, version)...)},
	}
	if s.Hooks.ProjectChanged != nil {
		t.Jobs = append(t.Jobs, s.Hooks.ProjectChanged(p, changes)...)
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		return Project{}, transition.Stale(err, "the project")
	}
	p.Version = version + 1
	p.UpdatedAt = now
	return p, nil
}
