package tenancy

import (
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/transition"
)

var decideNow = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// outcome sums up a decision: the error code, or the event type it
// records ("" for none).
func outcome(t *transition.Transition, err error) string {
	switch {
	case err != nil:
		return "error " + apperr.Code(err)
	case t == nil:
		return "nothing"
	}
	return t.Events[0].Type
}

func acme(t *testing.T) Project {
	t.Helper()
	five := budget.Dollars(5_000_000)
	p, err := newProject("p1", "o1", ProjectInput{Key: "ACME", Name: "Acme", Repository: &Repository{Forge: "git", URL: "/srv/acme.git", CredentialsRef: "env:GIT"},
		Budgets: &Budgets{PerTicketUSD: &five}}, decideNow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewProject: a new project takes the defaults for what its input
// leaves out, and every rule is checked at once.
func TestNewProject(t *testing.T) {
	p := acme(t)
	if p.MergePolicy.Mode != "manual" || p.MergePolicy.RequiredChecks == nil || strings.Join(p.TicketTypes, ",") != "task,bug,docs" ||
		p.Repository.DefaultBranch != "main" || p.Version != 1 {
		t.Fatalf("defaults: %+v", p)
	}
	limit := -1
	_, err := newProject("p2", "o1", ProjectInput{Key: "acme", Name: " ", ConcurrencyLimit: &limit, TicketTypes: []string{"epic"}}, decideNow)
	var fields []string
	for _, f := range err.(*apperr.Error).FieldErrors() {
		fields = append(fields, f.Field)
	}
	if got := strings.Join(fields, " "); got != "key name concurrency_limit ticket_types[0]" {
		t.Fatalf("problems with %s", got)
	}
}

// TestPatchProject: a patch is a pure function of the project as read, the
// version the caller read and the patch; repository, merge policy and
// budgets are merged field by field (null: the default).
func TestPatchProject(t *testing.T) {
	s := func(v string) *string { return &v }
	fifty := budget.Dollars(50_000_000)
	set := func(v string) strictjson.Nullable[string] { return strictjson.Nullable[string]{Set: true, Value: &v} }
	null := strictjson.Nullable[string]{Set: true}
	for _, c := range []struct {
		name    string
		version int64
		in      ProjectPatch
		field   string // the field named in the error ("" for none)
		check   func(p Project, ch ProjectChanges) bool
	}{
		{"a name", 1, ProjectPatch{Name: s("  Acme app ")}, "", func(p Project, ch ProjectChanges) bool {
			return p.Name == "Acme app" && *ch.Name == "Acme app" && ch.Budgets == nil
		}},
		{"no repository", 1, ProjectPatch{Repository: strictjson.Nullable[RepositoryPatch]{Set: true}}, "", func(p Project, ch ProjectChanges) bool {
			return p.Repository == nil && ch.Repository.Set && ch.Repository.Value == nil
		}},
		{"a url", 1, ProjectPatch{Repository: strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{URL: set("/srv/b.git"), CredentialsRef: null}}}, "",
			func(p Project, ch ProjectChanges) bool {
				return *p.Repository == Repository{Forge: "git", URL: "/srv/b.git", DefaultBranch: "main"} && *ch.Repository.Value == *p.Repository
			}},
		{"a budget", 1, ProjectPatch{Budgets: strictjson.Nullable[BudgetsPatch]{Set: true, Value: &BudgetsPatch{PerDayUSD: strictjson.Nullable[budget.Dollars]{Set: true, Value: &fifty}}}}, "",
			func(p Project, ch ProjectChanges) bool {
				return *p.Budgets.PerDayUSD == fifty && *p.Budgets.PerTicketUSD == 5_000_000 && *ch.Budgets == p.Budgets
			}},
		{"no budgets", 1, ProjectPatch{Budgets: strictjson.Nullable[BudgetsPatch]{Set: true}}, "", func(p Project, ch ProjectChanges) bool {
			return p.Budgets == Budgets{} && ch.Budgets != nil
		}},
		{"a mode", 1, ProjectPatch{MergePolicy: strictjson.Nullable[MergePolicyPatch]{Set: true, Value: &MergePolicyPatch{Mode: set("auto")}}}, "",
			func(p Project, ch ProjectChanges) bool {
				return p.MergePolicy.Mode == "auto" && p.MergePolicy.RequiredChecks != nil && ch.MergePolicy.Mode == "auto"
			}},
		{"no version", 0, ProjectPatch{Name: s("x")}, "version", nil},
		{"a bad forge", 1, ProjectPatch{Repository: strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{Forge: set("svn")}}}, "repository.forge", nil},
		{"no url", 1, ProjectPatch{Repository: strictjson.Nullable[RepositoryPatch]{Set: true, Value: &RepositoryPatch{URL: null}}}, "repository.url", nil},
		{"nothing", 1, ProjectPatch{}, "", nil},
	} {
		p, ch, err := patchProject(acme(t), c.version, c.in)
		switch {
		case c.check != nil && (err != nil || !c.check(p, ch)):
			t.Errorf("%s: %+v %+v %v", c.name, p, ch, err)
		case c.check == nil && apperr.Code(err) != apperr.Invalid:
			t.Errorf("%s: %v, want invalid", c.name, err)
		case c.field != "" && err.(*apperr.Error).FieldErrors()[0].Field != c.field:
			t.Errorf("%s: %v, want a problem with %s", c.name, err, c.field)
		}
	}
}

// TestMembershipDecisions: setting and removing a role are pure functions
// of the membership state read (the subject's row, the other admins).
func TestMembershipDecisions(t *testing.T) {
	bump := store.Stmt(`UPDATE member_versions …`)
	admin := Member{OrganizationID: "o1", Subject: "ada", Role: "admin", Version: 2}
	lastAdmin := membershipState{cur: admin, found: true, bump: bump}
	for _, c := range []struct {
		name string
		st   membershipState
		role string // "" removes
		want string
	}{
		{"a new member", membershipState{cur: Member{OrganizationID: "o1", Subject: "bea"}, bump: bump}, "member", "member.role_set"},
		{"the same role", lastAdmin, "admin", "nothing"},
		{"demote the last admin", lastAdmin, "member", "error conflict"},
		{"remove the last admin", lastAdmin, "", "error conflict"},
		{"demote one of two admins", membershipState{cur: admin, found: true, otherAdmins: 1, bump: bump}, "viewer", "member.role_set"},
		{"remove one of two admins", membershipState{cur: admin, found: true, otherAdmins: 1, bump: bump}, "", "member.removed"},
		{"a project override", membershipState{projectID: "p1", cur: Member{OrganizationID: "o1", ProjectID: "p1", Subject: "ada", Role: "admin"},
			found: true, bump: bump}, "viewer", "member.role_set"},
		{"remove no one", membershipState{cur: Member{Subject: "zed"}, bump: bump}, "", "error not_found"},
	} {
		var tr *transition.Transition
		var err error
		if c.role == "" {
			tr, err = c.st.remove(alice)
		} else {
			var m Member
			m, tr, err = c.st.set(alice, c.role, decideNow)
			if tr != nil && (m.Role != c.role || m.Version != c.st.cur.Version+1 || len(tr.Guarded) != 2 || tr.Guarded[1].SQL != bump.SQL) {
				t.Errorf("%s: member %+v, guarded %v", c.name, m, tr.Guarded)
			}
		}
		if got := outcome(tr, err); got != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}

// TestPlatformPause: pulling or releasing the kill switch is a pure
// function of the platform read; doing it twice records nothing.
func TestPlatformPause(t *testing.T) {
	p := Platform{Version: 3}
	next, tr := p.pause(alice, true, decideNow)
	if outcome(tr, nil) != "platform.paused" || !next.Paused || next.Version != 4 {
		t.Fatalf("pause: %+v %v", next, tr)
	}
	if again, tr := next.pause(alice, true, decideNow); tr != nil || again != next {
		t.Fatalf("pause again: %+v %v", again, tr)
	}
	if _, tr := next.pause(alice, false, decideNow); outcome(tr, nil) != "platform.resumed" {
		t.Fatalf("resume: %v", tr)
	}
}
