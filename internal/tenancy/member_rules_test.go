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
