package apitest

import (
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/store"
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

// World is the shared state of a matrix run: two organizations, each with
// a project, and a token per role.
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

// NewWorld builds the matrix world on s.
func NewWorld(t testing.TB, s store.Store) *World {
	e := New(t, s)
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
	return w
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
		for _, role := range MatrixRoles {
			want, ok := c.Want[role]
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
