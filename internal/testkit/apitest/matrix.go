package apitest

import (
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/oidctest"
)

// Roles of the authorization matrix. OrgA is the organization under test;
// Other is an admin of a second organization, which must see nothing of
// the first (404, not 403).
const (
	None     = "none"
	Viewer   = "viewer"
	Member   = "member"
	Admin    = "admin"
	Other    = "other"
	Platform = "platform"
)

// MatrixRoles lists the roles in the order each case tries them: least
// privileged first, so failed attempts leave the state for the next.
var MatrixRoles = []string{None, Other, Viewer, Member, Admin, Platform}

// Override rows: people (OIDC identities) whose role in project ACME is not
// their organization role, and an API token each of them created with the
// highest role they hold in acme. Each acts, on a route, as the base role
// it holds in the scope the route touches: InProject on routes of project
// ACME (its items, runs, skills, pipelines, members…), InOrg on routes of
// the organization and on routes of no organization. A token row must get
// exactly what its creator gets: a token never acts above the person
// behind it, in any project.
type Override struct {
	Name      string // the person's row; the token's row is "token of " + Name
	Subject   string // OIDC subject
	OrgRole   string // role in acme ("" for none)
	Project   string // override in ACME
	InProject string // base role whose status it gets on ACME routes
	InOrg     string // … on organization routes and elsewhere
}

// Overrides: the rows of project overrides.
var Overrides = []Override{
	{Name: "viewer, ACME member", Subject: "oidc|vic", OrgRole: "viewer", Project: "member", InProject: Member, InOrg: Viewer},
	{Name: "admin, ACME viewer", Subject: "oidc|ava", OrgRole: "admin", Project: "viewer", InProject: Viewer, InOrg: Admin},
	{Name: "ACME-only member", Subject: "oidc|pam", OrgRole: "", Project: "member", InProject: Member, InOrg: Other},
}

// TokenRow names the row of the token an override's person created.
func TokenRow(o Override) string { return "token of " + o.Name }

// routeScope tells which scope of the matrix world a route touches:
// "project" (ACME: every case of a route naming a project, an item, a run
// or a question works in ACME), "org" (acme), or "" (none: the platform,
// the caller's own tokens, runners, pure functions).
func routeScope(route string) string {
	_, path, _ := strings.Cut(route, " ")
	switch {
	case strings.Contains(path, "{project}"), strings.Contains(path, "{item}"), strings.Contains(path, "{run}"),
		strings.HasPrefix(path, "/api/v1/questions/"):
		return "project"
	case strings.Contains(path, "{org}"):
		return "org"
	}
	return ""
}

// want returns the status a caller must get on route: the case's own
// expectation for base roles and, for an override row, its explicit one
// (Case.Override) or else the one of the base role it acts as there.
func (c Case) want(route, caller string) (int, bool) {
	if w, ok := c.Override[caller]; ok {
		return w, true
	}
	if w, ok := c.Want[caller]; ok {
		return w, true
	}
	for _, o := range Overrides {
		if caller == o.Name || caller == TokenRow(o) {
			as := o.InOrg
			if routeScope(route) == "project" {
				as = o.InProject
			}
			w, ok := c.Want[as]
			return w, ok
		}
	}
	return 0, false
}

// World is the shared state of a matrix run: two organizations, each with
// a project, and a credential per caller (MatrixCallers).
type World struct {
	*Env
	OrgA, OrgB         string // ids
	SlugA, SlugB       string
	ProjectA, ProjectB string // ids
	KeyA, KeyB         string
	Tokens             map[string]string
	n                  int
}

// Unique returns a fresh suffix for names within the world.
func (w *World) Unique() int { w.n++; return w.n }

// Case is one route's row of the matrix.
type Case struct {
	// Prepare returns the request path and body for one attempt; it may
	// create whatever the attempt needs (as the platform admin).
	Prepare func(w *World) (path string, body any)
	// Want maps each role of MatrixRoles to the exact status.
	Want map[string]int
	// Override, optional, gives an override row (Overrides, by row name)
	// a status other than that of the base role it acts as.
	Override map[string]int
}

var (
	casesMu sync.Mutex
	cases   = map[string]Case{}
)

// Register adds the case for a route, keyed "METHOD /path/{pattern}".
// Test files of each area register their routes in init.
func Register(route string, c Case) {
	casesMu.Lock()
	defer casesMu.Unlock()
	if _, dup := cases[route]; dup {
		panic("matrix case registered twice: " + route)
	}
	cases[route] = c
}

// Standard expectations.
var (
	// ReadOK: any role in the organization may read.
	ReadOK = func(ok int) map[string]int {
		return map[string]int{None: 401, Other: 404, Viewer: ok, Member: ok, Admin: ok, Platform: ok}
	}
	// WriteOK: members and admins may write (tracker.write, run.manage).
	WriteOK = func(ok int) map[string]int {
		return map[string]int{None: 401, Other: 404, Viewer: 403, Member: ok, Admin: ok, Platform: ok}
	}
	// AdminOK: only admins (project.update, member.manage).
	AdminOK = func(ok int) map[string]int {
		return map[string]int{None: 401, Other: 404, Viewer: 403, Member: 403, Admin: ok, Platform: ok}
	}
	// PlatformOK: only platform admins.
	PlatformOK = func(ok int) map[string]int {
		return map[string]int{None: 401, Other: 403, Viewer: 403, Member: 403, Admin: 403, Platform: ok}
	}
	// AnyOK: any authenticated caller.
	AnyOK = func(ok int) map[string]int {
		return map[string]int{None: 401, Other: ok, Viewer: ok, Member: ok, Admin: ok, Platform: ok}
	}
)

// NewWorld builds the matrix world on s: Core trusts an OIDC issuer, so
// that the override rows are real people and tokens they created through
// the API.
func NewWorld(t testing.TB, s store.Store) *World {
	iss := oidctest.New(t)
	e := New(t, s, func(c *config.Config) { c.Auth.OIDCIssuer, c.Auth.OIDCAudience = iss.URL, iss.Audience })
	w := &World{Env: e, SlugA: "acme", SlugB: "globex", KeyA: "ACME", KeyB: "GLX"}
	w.OrgA, w.OrgB = e.Org(w.SlugA), e.Org(w.SlugB)
	w.ProjectA, w.ProjectB = e.Project(w.SlugA, w.KeyA), e.Project(w.SlugB, w.KeyB)
	w.Tokens = map[string]string{
		None:     "",
		Viewer:   e.RoleToken(w.OrgA, "viewer"),
		Member:   e.RoleToken(w.OrgA, "member"),
		Admin:    e.RoleToken(w.OrgA, "admin"),
		Other:    e.RoleToken(w.OrgB, "admin"),
		Platform: BootstrapToken,
	}
	for _, o := range Overrides {
		if o.OrgRole != "" {
			e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+o.Subject, map[string]any{"role": o.OrgRole})
		}
		e.Admin(200, "PUT", "/api/v1/projects/ACME/members/"+o.Subject, map[string]any{"role": o.Project})
		person := iss.Token(t, o.Subject) // valid for an hour
		w.Tokens[o.Name] = person
		role := o.Project
		if o.OrgRole == Admin {
			role = Admin
		}
		var tk struct{ Token, Role string }
		e.Must(201, person, "POST", "/api/v1/tokens", map[string]any{"name": "matrix " + o.Name, "organization": w.SlugA, "role": role}).JSON(t, &tk)
		w.Tokens[TokenRow(o)] = tk.Token
	}
	return w
}

// MatrixCallers lists every caller of the matrix: the base roles, then the
// override rows (each person, then the token it created).
func MatrixCallers() []string {
	out := append([]string{}, MatrixRoles...)
	for _, o := range Overrides {
		out = append(out, o.Name, TokenRow(o))
	}
	return out
}

// RunMatrix checks every route of the API against its registered case:
// each route must have one, and every role must get exactly the status
// the case names.
func RunMatrix(t *testing.T, s store.Store) {
	w := NewWorld(t, s)
	routes := map[string]bool{}
	for _, rt := range w.Core.API.Routes() {
		routes[rt.Method+" "+rt.Path] = true
	}
	casesMu.Lock()
	defer casesMu.Unlock()
	var missing, stale []string
	for r := range routes {
		if _, ok := cases[r]; !ok {
			missing = append(missing, r)
		}
	}
	for r := range cases {
		if !routes[r] {
			stale = append(stale, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("authorization matrix out of date:\n  routes without a case: %s\n  cases without a route: %s",
			strings.Join(missing, ", "), strings.Join(stale, ", "))
	}
	keys := make([]string, 0, len(cases))
	for k := range cases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, route := range keys {
		c := cases[route]
		method, _, _ := strings.Cut(route, " ")
		for _, role := range MatrixCallers() {
			want, ok := c.want(route, role)
			if !ok {
				t.Errorf("%s: no expectation for role %s", route, role)
				continue
			}
			path, body := c.Prepare(w)
			r := w.Do(w.Tokens[role], method, path, body)
			if r.Status != want {
				t.Errorf("%s as %s (%s): status %d, want %d: %s", route, role, path, r.Status, want, r.Body)
			}
		}
	}
}
