package tenancy

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestLastAdminSurvivesConcurrentChanges: the finding "the last admin can
// be demoted twice at once". Many organizations have exactly two admins;
// in each, two changes race that would each leave one admin — demote
// both, remove both, or demote one and remove the other. In every
// organization exactly one succeeds, the other is refused as a conflict
// naming the last admin, and an admin remains, on both engines.
func TestLastAdminSurvivesConcurrentChanges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := clock.Real{}
		svc := New(st, &transition.Applier{Store: st, Clock: c, Attempts: 200}, c, Hooks{})
		actor := event.Actor{Kind: event.ActorHuman, Sub: "bootstrap"}
		const orgs = 40
		type change func(orgID, subject string) error
		demote := func(orgID, subject string) error {
			_, err := svc.SetMember(ctx, actor, orgID, "", subject, "member")
			return err
		}
		remove := func(orgID, subject string) error { return svc.RemoveMember(ctx, actor, orgID, "", subject) }
		pairs := [][2]change{{demote, demote}, {remove, remove}, {demote, remove}, {remove, demote}}
		ids := make([]string, orgs)
		for i := range ids {
			o, err := svc.CreateOrganization(ctx, actor, OrganizationInput{Slug: fmt.Sprintf("org-%02d", i), Name: "Org"})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = o.ID
			for _, sub := range []string{"ada", "bea", "vic"} {
				role := "admin"
				if sub == "vic" {
					role = "viewer"
				}
				if _, err := svc.SetMember(ctx, actor, o.ID, "", sub, role); err != nil {
					t.Fatal(err)
				}
			}
		}
		errs := make([][2]error, orgs)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, id := range ids {
			for j, sub := range []string{"ada", "bea"} {
				wg.Go(func() {
					<-start
					errs[i][j] = pairs[i%len(pairs)][j](id, sub)
				})
			}
		}
		close(start)
		wg.Wait()
		for i, id := range ids {
			ok := 0
			for _, err := range errs[i] {
				switch {
				case err == nil:
					ok++
				case apperr.Code(err) != apperr.Conflict:
					t.Errorf("org %d: %v, want a conflict", i, err)
				}
			}
			admins, err := svc.ListMembers(ctx, id, "")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range admins {
				if m.Role == "admin" {
					n++
				}
			}
			if ok != 1 || n != 1 {
				t.Errorf("org %d: %d of 2 changes succeeded (%v), %d admins left; want exactly 1 and 1", i, ok, errs[i], n)
			}
		}
	})
}

// TestEveryMembershipChangeBumpsTheVersion: organization roles and project
// overrides, set and removed, each move the organization's membership
// version once, in the change's own batch; an idempotent repeat does not.
func TestEveryMembershipChangeBumpsTheVersion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newWorld(t, st)
		ctx := context.Background()
		version := func() int64 {
			t.Helper()
			rows, err := st.Query(ctx, `SELECT COALESCE((SELECT version FROM member_versions WHERE organization_id = ?), 0)`, w.org.ID)
			var v int64
			if err != nil || rows.Scan(0, &v) != nil {
				t.Fatalf("read member version: %v", err)
			}
			return v
		}
		set := func(projectID, subject, role string) func() error {
			return func() error {
				_, err := w.svc.SetMember(ctx, alice, w.org.ID, projectID, subject, role)
				return err
			}
		}
		remove := func(projectID, subject string) func() error {
			return func() error { return w.svc.RemoveMember(ctx, alice, w.org.ID, projectID, subject) }
		}
		steps := []func() error{
			set("", "ada", "admin"), set("", "bea", "admin"), set("", "bea", "viewer"),
			set(w.p.ID, "bea", "member"), remove(w.p.ID, "bea"), remove("", "bea"),
		}
		for i, step := range steps {
			if err := step(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if v := version(); v != int64(i+1) {
				t.Fatalf("after step %d the version is %d, want %d", i, v, i+1)
			}
		}
		if err := set("", "ada", "admin")(); err != nil || version() != int64(len(steps)) {
			t.Fatalf("an idempotent repeat: %v, version %d", err, version())
		}
		if err := remove("", "ada")(); apperr.Code(err) != apperr.Conflict {
			t.Fatalf("removing the last admin: %v", err)
		}
	})
}
