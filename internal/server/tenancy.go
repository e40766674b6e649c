package server

import (
	"context"
	"net/http"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/tenancy"
)

// Tenancy serves organizations, projects, members and the platform.
type Tenancy struct {
	T *tenancy.Service
}

// OrganizationCreate is the body of POST /orgs.
type OrganizationCreate struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
}

// OrganizationUpdate is the body of PATCH /orgs/{org}: the version read and
// the new name. slug may be sent only unchanged: an organization's slug
// never changes (docs/api.md).
type OrganizationUpdate struct {
	Version int64   `json:"version"`
	Name    *string `json:"name,omitempty"`
	Slug    *string `json:"slug,omitempty"`
}

// ProjectCreate is the body of POST /orgs/{org}/projects.
type ProjectCreate struct {
	Key              string               `json:"key"`
	Name             string               `json:"name"`
	Repository       *tenancy.Repository  `json:"repository,omitempty"`
	MergePolicy      *tenancy.MergePolicy `json:"merge_policy,omitempty"`
	ConcurrencyLimit *int                 `json:"concurrency_limit,omitempty"`
	Budgets          *tenancy.Budgets     `json:"budgets,omitempty"`
	TicketTypes      []string             `json:"ticket_types,omitempty"`
}

// ProjectUpdate is the body of PATCH /projects/{project}: absent fields
// stay; version is the one read. repository, merge_policy and budgets are
// JSON merge patches (RFC 7386) of the project's own (tenancy.ProjectPatch
// says what null does).
type ProjectUpdate struct {
	Version          int64                                 `json:"version"`
	Name             *string                               `json:"name,omitempty"`
	Repository       strictjson.Nullable[RepositoryPatch]  `json:"repository,omitzero"`
	MergePolicy      strictjson.Nullable[MergePolicyPatch] `json:"merge_policy,omitzero"`
	ConcurrencyLimit *int                                  `json:"concurrency_limit,omitempty"`
	Budgets          strictjson.Nullable[BudgetsPatch]     `json:"budgets,omitzero"`
	TicketTypes      []string                              `json:"ticket_types,omitempty"`
	Paused           *bool                                 `json:"paused,omitempty"`
	Notify           strictjson.Nullable[NotifyPatch]      `json:"notify,omitzero"`
}

// NotifyPatch is notify in ProjectUpdate.
type NotifyPatch struct {
	// EscalateAfter: a Go duration, 1m … 720h ("2h"); null: the platform's
	// [notify] escalate_after.
	EscalateAfter strictjson.Nullable[string] `json:"escalate_after,omitzero"`
}

// RepositoryPatch is repository in ProjectUpdate.
type RepositoryPatch struct {
	Forge          strictjson.Nullable[string] `json:"forge,omitzero"`
	URL            strictjson.Nullable[string] `json:"url,omitzero"`
	DefaultBranch  strictjson.Nullable[string] `json:"default_branch,omitzero"`  // null: main
	CredentialsRef strictjson.Nullable[string] `json:"credentials_ref,omitzero"` // null: none
	// APIURL overrides the API base of a Gitea or GitHub repository; null:
	// derived from url.
	APIURL strictjson.Nullable[string] `json:"api_url,omitzero"`
	// WebhookSecretRef names the secret webhook deliveries are signed with
	// (env:NAME); null: no webhooks.
	WebhookSecretRef strictjson.Nullable[string] `json:"webhook_secret_ref,omitzero"`
}

// MergePolicyPatch is merge_policy in ProjectUpdate.
type MergePolicyPatch struct {
	Mode              strictjson.Nullable[string]   `json:"mode,omitzero"`               // null: manual
	RequiredApprovals strictjson.Nullable[int]      `json:"required_approvals,omitzero"` // null: 0
	RequiredChecks    strictjson.Nullable[[]string] `json:"required_checks,omitzero"`    // null: none
}

// BudgetsPatch is budgets in ProjectUpdate.
type BudgetsPatch struct {
	PerTicketUSD strictjson.Nullable[budget.Dollars] `json:"per_ticket_usd,omitzero"` // null: no limit
	PerDayUSD    strictjson.Nullable[budget.Dollars] `json:"per_day_usd,omitzero"`    // null: no limit
}

// patch is the update without its version.
func (in ProjectUpdate) patch() tenancy.ProjectPatch {
	return tenancy.ProjectPatch{Name: in.Name,
		Repository:       strictjson.Nullable[tenancy.RepositoryPatch]{Set: in.Repository.Set, Value: (*tenancy.RepositoryPatch)(in.Repository.Value)},
		MergePolicy:      strictjson.Nullable[tenancy.MergePolicyPatch]{Set: in.MergePolicy.Set, Value: (*tenancy.MergePolicyPatch)(in.MergePolicy.Value)},
		ConcurrencyLimit: in.ConcurrencyLimit,
		Budgets:          strictjson.Nullable[tenancy.BudgetsPatch]{Set: in.Budgets.Set, Value: (*tenancy.BudgetsPatch)(in.Budgets.Value)},
		TicketTypes:      in.TicketTypes, Paused: in.Paused,
		Notify: strictjson.Nullable[tenancy.NotifyPatch]{Set: in.Notify.Set, Value: (*tenancy.NotifyPatch)(in.Notify.Value)}}
}

// MemberSet is the body of PUT …/members/{subject}.
type MemberSet struct {
	Role string `json:"role"`
}

// PlatformUpdate is the body of PATCH /platform.
type PlatformUpdate struct {
	Version          int64 `json:"version"`
	ConcurrencyLimit *int  `json:"concurrency_limit,omitempty"`
}

// OrganizationList is the body of GET /orgs.
type OrganizationList struct {
	Organizations []tenancy.Organization `json:"organizations"`
}

// ProjectList is the body of GET /orgs/{org}/projects.
type ProjectList struct {
	Projects []tenancy.Project `json:"projects"`
}

// MemberList is the body of GET …/members.
type MemberList struct {
	Members []tenancy.Member `json:"members"`
}

// Routes returns the tenancy endpoints.
func (h *Tenancy) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/orgs", Perm: access.PlatformAdmin, Summary: "Create an organization",
			Request: OrganizationCreate{}, Response: tenancy.Organization{}, Status: http.StatusCreated, Handle: h.createOrg},
		{Method: "GET", Path: "/api/v1/orgs", Perm: access.Authenticated, Summary: "List the organizations the caller belongs to (all for platform admins)",
			Response: OrganizationList{}, Handle: h.listOrgs},
		{Method: "GET", Path: "/api/v1/orgs/{org}", Perm: access.TrackerRead, Summary: "Get an organization by slug or id",
			Response: tenancy.Organization{}, Handle: h.getOrg},
		{Method: "PATCH", Path: "/api/v1/orgs/{org}", Perm: access.ProjectUpdate,
			Summary: "Rename an organization (organization admins; optimistic: send the version read, 409 when stale; the slug never changes)",
			Request: OrganizationUpdate{}, Response: tenancy.Organization{}, Handle: h.updateOrg},
		{Method: "POST", Path: "/api/v1/orgs/{org}/projects", Perm: access.ProjectUpdate, Summary: "Create a project (organization admins)",
			Request: ProjectCreate{}, Response: tenancy.Project{}, Status: http.StatusCreated, Handle: h.createProject},
		{Method: "GET", Path: "/api/v1/orgs/{org}/projects", Perm: access.TrackerRead, Summary: "List an organization's projects",
			Response: ProjectList{}, Handle: h.listProjects},
		{Method: "GET", Path: "/api/v1/projects/{project}", Perm: access.TrackerRead, Summary: "Get a project by key or id",
			Response: tenancy.Project{}, Handle: h.getProject},
		{Method: "GET", Path: "/api/v1/projects/{project}/permissions", Perm: access.TrackerRead,
			Summary: "The caller's permissions in the project (a UI hides the controls it lacks)", Response: PermissionList{}, Handle: h.permissions},
		{Method: "PATCH", Path: "/api/v1/projects/{project}", Perm: access.ProjectUpdate, Summary: "Update a project's settings (optimistic: send the version read)",
			Request: ProjectUpdate{}, Response: tenancy.Project{}, Handle: h.updateProject},
		{Method: "GET", Path: "/api/v1/orgs/{org}/members", Perm: access.TrackerRead, Summary: "List an organization's members",
			Response: MemberList{}, Handle: h.listOrgMembers},
		{Method: "PUT", Path: "/api/v1/orgs/{org}/members/{subject}", Perm: access.MemberManage, Summary: "Set a subject's role in the organization",
			Request: MemberSet{}, Response: tenancy.Member{}, Handle: h.setOrgMember},
		{Method: "DELETE", Path: "/api/v1/orgs/{org}/members/{subject}", Perm: access.MemberManage, Summary: "Remove a subject from the organization",
			Status: http.StatusNoContent, Handle: h.removeOrgMember},
		{Method: "GET", Path: "/api/v1/projects/{project}/members", Perm: access.TrackerRead, Summary: "List a project's role overrides",
			Response: MemberList{}, Handle: h.listProjectMembers},
		{Method: "PUT", Path: "/api/v1/projects/{project}/members/{subject}", Perm: access.MemberManage, Summary: "Override a subject's role in one project",
			Request: MemberSet{}, Response: tenancy.Member{}, Handle: h.setProjectMember},
		{Method: "DELETE", Path: "/api/v1/projects/{project}/members/{subject}", Perm: access.MemberManage, Summary: "Remove a project role override",
			Status: http.StatusNoContent, Handle: h.removeProjectMember},
		{Method: "GET", Path: "/api/v1/platform", Perm: access.Authenticated, Summary: "Read the platform switches",
			Response: tenancy.Platform{}, Handle: h.getPlatform},
		{Method: "PATCH", Path: "/api/v1/platform", Perm: access.PlatformAdmin, Summary: "Set the platform-wide concurrency limit",
			Request: PlatformUpdate{}, Response: tenancy.Platform{}, Handle: h.updatePlatform},
		{Method: "POST", Path: "/api/v1/platform/pause", Perm: access.PlatformAdmin, Summary: "Pull the kill switch: pause the whole platform",
			Response: tenancy.Platform{}, Handle: h.pausePlatform(true)},
		{Method: "POST", Path: "/api/v1/platform/resume", Perm: access.PlatformAdmin, Summary: "Release the kill switch",
			Response: tenancy.Platform{}, Handle: h.pausePlatform(false)},
	}
}

func (h *Tenancy) createOrg(r *Request) (any, error) {
	var in OrganizationCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.CreateOrganization(r.Context(), r.Principal.Actor(), tenancy.OrganizationInput(in))
}

func (h *Tenancy) listOrgs(r *Request) (any, error) {
	r.Checked() // filtered to the caller's memberships below
	orgs, err := orgsOf(r.Context(), h.T, r.Principal)
	return OrganizationList{Organizations: orgs}, err
}

// OrgReader lists and finds organizations: tenancy.Service.
type OrgReader interface {
	OrgLister
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
}

// orgsOf lists the organizations p may see: every one for a platform
// admin, a person's memberships, and for an API token its one
// organization while its creator (if anyone caps it) still has a role
// there. Never nil.
func orgsOf(ctx context.Context, t OrgReader, p *auth.Principal) ([]tenancy.Organization, error) {
	g, token := p.TokenGrant()
	if !token || p.PlatformAdmin {
		orgs, err := t.ListOrganizations(ctx, p.Subject, p.PlatformAdmin)
		if orgs == nil {
			orgs = []tenancy.Organization{}
		}
		return orgs, err
	}
	out := []tenancy.Organization{}
	if g.OrgID == "" || g.Role == "" {
		return out, nil
	}
	var orgs []tenancy.Organization
	var err error
	if g.CappedBy == "" {
		var o tenancy.Organization
		switch o, err = t.FindOrganization(ctx, g.OrgID); {
		case err == nil:
			orgs = append(orgs, o)
		case apperr.Code(err) == apperr.NotFound:
			err = nil
		}
	} else {
		orgs, err = t.ListOrganizations(ctx, g.CappedBy, false)
	}
	for _, o := range orgs {
		if o.ID == g.OrgID {
			out = append(out, o)
		}
	}
	return out, err
}

func (h *Tenancy) getOrg(r *Request) (any, error) { return r.Org() }

func (h *Tenancy) updateOrg(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	var in OrganizationUpdate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.UpdateOrganization(r.Context(), r.Principal.Actor(), o, in.Version, tenancy.OrganizationPatch{Name: in.Name, Slug: in.Slug})
}

func (h *Tenancy) createProject(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	var in ProjectCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.CreateProject(r.Context(), r.Principal.Actor(), o.ID, tenancy.ProjectInput(in))
}

func (h *Tenancy) listProjects(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	ps, err := h.T.ListProjects(r.Context(), o.ID)
	return ProjectList{Projects: ps}, err
}

func (h *Tenancy) getProject(r *Request) (any, error) { return r.Project() }

// PermissionList is the body of GET /projects/{project}/permissions.
type PermissionList struct {
	Permissions []access.Permission `json:"permissions"`
}

func (h *Tenancy) permissions(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	out := PermissionList{Permissions: []access.Permission{}}
	for _, perm := range access.Scoped {
		err := r.api.access.Check(r.Context(), r.Principal, perm, p.OrganizationID, p.ID)
		switch {
		case err == nil:
			out.Permissions = append(out.Permissions, perm)
		case apperr.Code(err) != apperr.Forbidden && apperr.Code(err) != apperr.NotFound:
			return nil, err
		}
	}
	return out, nil
}

func (h *Tenancy) updateProject(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	var in ProjectUpdate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.UpdateProject(r.Context(), r.Principal.Actor(), p, in.Version, in.patch())
}

func (h *Tenancy) listOrgMembers(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	ms, err := h.T.ListMembers(r.Context(), o.ID, "")
	return MemberList{Members: ms}, err
}

func (h *Tenancy) setOrgMember(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	var in MemberSet
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.SetMember(r.Context(), r.Principal.Actor(), o.ID, "", r.PathValue("subject"), in.Role)
}

func (h *Tenancy) removeOrgMember(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	return nil, h.T.RemoveMember(r.Context(), r.Principal.Actor(), o.ID, "", r.PathValue("subject"))
}

func (h *Tenancy) listProjectMembers(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	ms, err := h.T.ListMembers(r.Context(), p.OrganizationID, p.ID)
	return MemberList{Members: ms}, err
}

func (h *Tenancy) setProjectMember(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	var in MemberSet
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.SetMember(r.Context(), r.Principal.Actor(), p.OrganizationID, p.ID, r.PathValue("subject"), in.Role)
}

func (h *Tenancy) removeProjectMember(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	return nil, h.T.RemoveMember(r.Context(), r.Principal.Actor(), p.OrganizationID, p.ID, r.PathValue("subject"))
}

func (h *Tenancy) getPlatform(r *Request) (any, error) {
	r.Checked() // any authenticated caller may read the switches
	return h.T.GetPlatform(r.Context())
}

func (h *Tenancy) updatePlatform(r *Request) (any, error) {
	var in PlatformUpdate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.UpdatePlatform(r.Context(), r.Principal.Actor(), in.Version, tenancy.PlatformPatch{ConcurrencyLimit: in.ConcurrencyLimit})
}

func (h *Tenancy) pausePlatform(paused bool) func(*Request) (any, error) {
	return func(r *Request) (any, error) {
		return h.T.SetPlatformPaused(r.Context(), r.Principal.Actor(), paused)
	}
}
