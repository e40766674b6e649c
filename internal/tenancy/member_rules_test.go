package tenancy

import (
	"context"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestMemberSubjectIs1To255CharactersOnOneLine: a subject is 1–255
// characters of one line; the error names the field.
func TestMemberSubjectIs1To255CharactersOnOneLine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		for _, c := range []struct {
			subject string
			ok      bool
		}{
			{"", false}, {strings.Repeat("a", 255), true}, {strings.Repeat("a", 256), false},
			{"ann\nbob", false}, {"ann\x00", false}, {"ann", true},
		} {
			_, err := w.svc.SetMember(ctx, alice, w.org.ID, "", c.subject, "viewer")
			if c.ok && err != nil {
				t.Errorf("subject of %d characters: %v", len(c.subject), err)
			}
			if !c.ok && (apperr.Code(err) != apperr.Invalid || !strings.Contains(err.Error(), "subject")) {
				t.Errorf("subject %q: %v, want a 400 naming subject", c.subject, err)
			}
		}
	})
}

// TestSetMemberAnswersTheMembershipAndListsItsTimes: SetMember answers
// the membership it wrote, and the list shows its creation and update
// times and version.
func TestSetMemberAnswersTheMembershipAndListsItsTimes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		m, err := w.svc.SetMember(ctx, alice, w.org.ID, "", "ann", "member")
		if err != nil || m.Subject != "ann" || m.Role != "member" || m.OrganizationID != w.org.ID || m.Version != 1 || m.CreatedAt.IsZero() {
			t.Fatalf("SetMember: %+v %v", m, err)
		}
		l, err := w.svc.ListMembers(ctx, w.org.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l {
			if x.Subject == "ann" && (!x.CreatedAt.Equal(m.CreatedAt) || !x.UpdatedAt.Equal(m.UpdatedAt) || x.Version != 1) {
				t.Errorf("listed %+v, set %+v", x, m)
			}
		}
	})
}

// TestAProjectOverrideAdminIsNoOrganizationAdmin: the last organization
// admin cannot be removed or demoted even when someone else is admin of a
// project by an override: that is not an organization admin.
func TestAProjectOverrideAdminIsNoOrganizationAdmin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		if _, err := w.svc.SetMember(ctx, alice, w.org.ID, "", "ada", "admin"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.SetMember(ctx, alice, w.org.ID, w.p.ID, "pat", "admin"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.SetMember(ctx, alice, w.org.ID, "", "ada", "viewer"); apperr.Code(err) != apperr.Conflict {
			t.Errorf("demoting the last organization admin beside a project admin: %v", err)
		}
		if err := w.svc.RemoveMember(ctx, alice, w.org.ID, "", "ada"); apperr.Code(err) != apperr.Conflict {
			t.Errorf("removing the last organization admin beside a project admin: %v", err)
		}
	})
}

// TestMembershipChangesTouchOnlyTheirOwnRow: changing or removing a
// subject's organization role leaves the same subject's project override
// and its role in another organization as they were (same version, same
// role), and bumps only its own organization's membership version; each
// change of a row moves its version by one.
func TestMembershipChangesTouchOnlyTheirOwnRow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		other, err := w.svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "globex", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		must := func(_ Member, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(w.svc.SetMember(ctx, alice, w.org.ID, "", "ada", "admin"))
		must(w.svc.SetMember(ctx, alice, other.ID, "", "ada", "admin"))
		must(w.svc.SetMember(ctx, alice, w.org.ID, "", "ann", "viewer"))
		must(w.svc.SetMember(ctx, alice, w.org.ID, w.p.ID, "ann", "viewer"))
		must(w.svc.SetMember(ctx, alice, other.ID, "", "ann", "viewer"))
		memberVersion := func(orgID string) int64 {
			t.Helper()
			rows, err := st.Query(ctx, `SELECT version FROM member_versions WHERE organization_id = ?`, orgID)
			var v int64
			if err != nil || rows.Scan(0, &v) != nil {
				t.Fatalf("read member version: %v", err)
			}
			return v
		}
		otherVersion := memberVersion(other.ID)
		role := func(orgID, projectID, subject string) (string, int64) {
			t.Helper()
			l, err := w.svc.ListMembers(ctx, orgID, projectID)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range l {
				if m.Subject == subject {
					return m.Role, m.Version
				}
			}
			return "", 0
		}
		must(w.svc.SetMember(ctx, alice, w.org.ID, "", "ann", "member"))
		must(w.svc.SetMember(ctx, alice, w.org.ID, "", "ann", "admin"))
		if r, v := role(w.org.ID, "", "ann"); r != "admin" || v != 3 {
			t.Errorf("ann's organization role after two changes: %s version %d, want admin version 3", r, v)
		}
		if r, v := role(w.org.ID, w.p.ID, "ann"); r != "viewer" || v != 1 {
			t.Errorf("ann's project override after her organization role changed: %s version %d", r, v)
		}
		if r, v := role(other.ID, "", "ann"); r != "viewer" || v != 1 {
			t.Errorf("ann's role in another organization after a change in acme: %s version %d", r, v)
		}
		if v := memberVersion(other.ID); v != otherVersion {
			t.Errorf("globex's membership version moved from %d to %d by acme's changes", otherVersion, v)
		}
		must(w.svc.SetMember(ctx, alice, other.ID, "", "ann", "member"))
		must(w.svc.SetMember(ctx, alice, other.ID, "", "ann", "admin"))
		if err := w.svc.RemoveMember(ctx, alice, w.org.ID, "", "ann"); err != nil {
			t.Fatal(err)
		}
		if r, _ := role(w.org.ID, w.p.ID, "ann"); r != "viewer" {
			t.Errorf("ann's project override after her organization role was removed: %q", r)
		}
		if r, _ := role(other.ID, "", "ann"); r != "admin" {
			t.Errorf("ann's role in another organization after her removal from acme: %q", r)
		}
		// Rows of the same version: removing cid's organization role
		// (version 1) leaves his override (version 1 too).
		must(w.svc.SetMember(ctx, alice, w.org.ID, "", "cid", "viewer"))
		must(w.svc.SetMember(ctx, alice, w.org.ID, w.p.ID, "cid", "member"))
		if err := w.svc.RemoveMember(ctx, alice, w.org.ID, "", "cid"); err != nil {
			t.Fatal(err)
		}
		if r, _ := role(w.org.ID, w.p.ID, "cid"); r != "member" {
			t.Errorf("cid's project override after his organization role was removed: %q", r)
		}
	})
}

// TestTheLastAdminRuleIsAboutOrganizationAdmins: a project override is no
// organization role, so demoting or removing the only organization
// admin's own admin override is allowed; and in an organization without
// any admin, other members' roles change freely.
func TestTheLastAdminRuleIsAboutOrganizationAdmins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		if _, err := w.svc.SetMember(ctx, alice, w.org.ID, "", "bea", "viewer"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.SetMember(ctx, alice, w.org.ID, "", "bea", "member"); err != nil {
			t.Errorf("changing a viewer to member in an organization with no admin: %v", err)
		}
		for _, step := range []func() error{
			func() error { _, err := w.svc.SetMember(ctx, alice, w.org.ID, "", "ada", "admin"); return err },
			func() error { _, err := w.svc.SetMember(ctx, alice, w.org.ID, w.p.ID, "ada", "admin"); return err },
			func() error { _, err := w.svc.SetMember(ctx, alice, w.org.ID, w.p.ID, "ada", "viewer"); return err },
			func() error { return w.svc.RemoveMember(ctx, alice, w.org.ID, w.p.ID, "ada") },
		} {
			if err := step(); err != nil {
				t.Errorf("the only organization admin's own project override: %v", err)
			}
		}
	})
}

// TestOrganizationInputIsChecked: a slug is 3–40 lower-case letters,
// digits or dashes, not starting or ending with a dash; a name is 1–200
// characters on one line; each error names its field.
func TestOrganizationInputIsChecked(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		for _, c := range []struct {
			slug, name, field string
		}{
			{"ab", "N", "slug"}, {"-abc", "N", "slug"}, {"abc-", "N", "slug"}, {"Abc", "N", "slug"},
			{strings.Repeat("a", 41), "N", "slug"}, {"ok-slug", "", "name"}, {"ok-slug", "  ", "name"},
			{"ok-slug", strings.Repeat("n", 201), "name"}, {"ok-slug", "a\nb", "name"},
			{strings.Repeat("a", 40), strings.Repeat("n", 200), ""}, {"abc", "N", ""},
		} {
			_, err := w.svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: c.slug, Name: c.name})
			if c.field == "" {
				if err != nil {
					t.Errorf("slug %q, name of %d: %v", c.slug, len(c.name), err)
				}
				continue
			}
			if apperr.Code(err) != apperr.Invalid || !strings.HasPrefix(err.Error(), c.field) && !strings.Contains(err.Error(), c.field+":") {
				t.Errorf("slug %q, name %q: %v, want a 400 naming %s", c.slug, c.name, err, c.field)
			}
		}
	})
}

// TestFindOrganizationFindsThatOneOrNone: an organization is found by its
// slug or its id, never another one; an unknown reference is not found
// while others exist; a listed organization has its times.
func TestFindOrganizationFindsThatOneOrNone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		globex, err := w.svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "globex", Name: "Globex"})
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"globex", globex.ID} {
			if o, err := w.svc.FindOrganization(ctx, ref); err != nil || o.ID != globex.ID || o.CreatedAt.IsZero() || !o.UpdatedAt.Equal(globex.UpdatedAt) {
				t.Errorf("find %s: %+v %v, want globex", ref, o, err)
			}
		}
		if o, err := w.svc.FindOrganization(ctx, "acme"); err != nil || o.ID != w.org.ID {
			t.Errorf("find acme: %+v %v", o, err)
		}
		if o, err := w.svc.FindOrganization(ctx, "nope"); apperr.Code(err) != apperr.NotFound {
			t.Errorf("find an unknown organization: %+v %v, want not found", o, err)
		}
	})
}

// TestEveryPlatformPauseMovesItsVersionByOne: pausing and resuming each
// move the platform's version by one, as GetPlatform reads it.
func TestEveryPlatformPauseMovesItsVersionByOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		p0, err := w.svc.GetPlatform(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, paused := range []bool{true, false, true} {
			if _, err := w.svc.SetPlatformPaused(ctx, alice, paused); err != nil {
				t.Fatal(err)
			}
			p, err := w.svc.GetPlatform(ctx)
			if err != nil || p.Paused != paused || p.Version != p0.Version+int64(i+1) {
				t.Errorf("after step %d: %+v %v, want paused %v version %d", i, p, err, paused, p0.Version+int64(i+1))
			}
		}
	})
}
