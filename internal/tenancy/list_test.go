package tenancy

import (
	"slices"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestListsShowOnlyTheirOrganization: with three organizations, each
// with projects and members, on both engines: a person lists only the
// organizations they hold a role in (a project override counts), a
// platform admin all, by slug; an organization's projects and members,
// and a project's overrides, are its own only, by key and by subject; a
// taken slug is a conflict that names it.
func TestListsShowOnlyTheirOrganization(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		w := newWorld(t, st) // acme, ACME
		svc := w.svc
		globex, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "globex", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		initech, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "initech", Name: "Initech"})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := svc.CreateProject(ctx, alice, w.org.ID, ProjectInput{Key: "OPS", Name: "Ops"})
		if err != nil {
			t.Fatal(err)
		}
		glx, err := svc.CreateProject(ctx, alice, globex.ID, ProjectInput{Key: "GLX", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		set := func(org, project, subject, role string) {
			t.Helper()
			if _, err := svc.SetMember(ctx, alice, org, project, subject, role); err != nil {
				t.Fatal(err)
			}
		}
		set(w.org.ID, "", "zoe", "admin")
		set(w.org.ID, "", "ann", "viewer")
		set(globex.ID, "", "gus", "admin")
		set(globex.ID, "", "ann", "member")
		set(globex.ID, glx.ID, "pam", "member") // a project role only
		set(w.org.ID, w.p.ID, "ann", "member")

		slugs := func(subject string, all bool) []string {
			t.Helper()
			os, err := svc.ListOrganizations(ctx, subject, all)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, o := range os {
				out = append(out, o.Slug)
			}
			return out
		}
		for _, c := range []struct {
			subject string
			all     bool
			want    []string
		}{
			{"root", true, []string{"acme", "globex", "initech"}},
			{"ann", false, []string{"acme", "globex"}},
			{"zoe", false, []string{"acme"}},
			{"pam", false, []string{"globex"}},
			{"nobody", false, []string{}},
		} {
			if got := slugs(c.subject, c.all); !slices.Equal(got, c.want) {
				t.Errorf("%s (all %v) lists %v, want %v", c.subject, c.all, got, c.want)
			}
		}
		if os, err := svc.ListOrganizations(ctx, "ann", false); err != nil || os[1].ID != globex.ID || os[1].Name != "Globex" {
			t.Errorf("ann's second organization: %+v %v", os, err)
		}

		keys := func(orgID string) []string {
			ps, err := svc.ListProjects(ctx, orgID)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, p := range ps {
				out = append(out, p.Key)
			}
			return out
		}
		if got := keys(w.org.ID); !slices.Equal(got, []string{"ACME", "OPS"}) {
			t.Errorf("acme's projects: %v", got)
		}
		if got := keys(globex.ID); !slices.Equal(got, []string{"GLX"}) {
			t.Errorf("globex's projects: %v", got)
		}
		if got := keys(initech.ID); len(got) != 0 {
			t.Errorf("initech's projects: %v", got)
		}

		members := func(orgID, projectID string) []string {
			ms, err := svc.ListMembers(ctx, orgID, projectID)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, m := range ms {
				out = append(out, m.Subject+":"+m.Role)
			}
			return out
		}
		if got := members(w.org.ID, ""); !slices.Equal(got, []string{"ann:viewer", "zoe:admin"}) {
			t.Errorf("acme's members: %v", got)
		}
		if got := members(globex.ID, ""); !slices.Equal(got, []string{"ann:member", "gus:admin"}) {
			t.Errorf("globex's members: %v", got)
		}
		if got := members(w.org.ID, w.p.ID); !slices.Equal(got, []string{"ann:member"}) {
			t.Errorf("ACME's overrides: %v", got)
		}
		if got := members(w.org.ID, ops.ID); len(got) != 0 {
			t.Errorf("OPS' overrides: %v", got)
		}

		_, err = svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "globex", Name: "Again"})
		if apperr.Code(err) != apperr.Conflict {
			t.Errorf("a taken slug: %v, want a conflict", err)
		}
	})
}
