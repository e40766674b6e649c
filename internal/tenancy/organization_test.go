package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestSlugShapedLikeAnID: organizations are found by slug or id, so a slug
// that looks like an id is refused; and should one exist already (stored
// before this rule), looking up an id finds the organization with that id.
func TestSlugShapedLikeAnID(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc := New(st, &transition.Applier{Store: st, Clock: clock.Real{}}, clock.Real{}, Hooks{})
		acme, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "acme", Name: "Acme"})
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		for _, slug := range []string{acme.ID, id, strings.ReplaceAll(id, "-", "")} {
			_, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: slug, Name: "Shadow"})
			var ae *apperr.Error
			if !errors.As(err, &ae) || len(ae.FieldErrors()) != 1 || ae.FieldErrors()[0].Field != "slug" || !strings.Contains(ae.Message, "shape of an id") {
				t.Fatalf("slug %s: %v, want 400 naming slug", slug, err)
			}
		}
		// An older organization whose slug is acme's id, written directly.
		if _, err := st.Exec(ctx, store.Stmt(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version)
VALUES (?, ?, 'Shadow', 0, 0, 1)`, "00000000-0000-7000-8000-000000000000", acme.ID)); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			o, err := svc.FindOrganization(ctx, acme.ID)
			if err != nil || o.ID != acme.ID {
				t.Fatalf("FindOrganization(acme's id) = %+v, %v; want acme", o, err)
			}
		}
	})
}

// TestUpdateOrganization: a rename is one guarded batch with its event
// organization.updated (the new name, nothing else); a second writer with
// the version both read gets 409 and changes nothing; the slug never
// changes (sending it unchanged is allowed); the name is checked as at
// creation; a rename to the same name writes nothing.
func TestUpdateOrganization(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc := New(st, &transition.Applier{Store: st, Clock: clock.Real{}}, clock.Real{}, Hooks{})
		acme, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "acme", Name: "Acme"})
		if err != nil {
			t.Fatal(err)
		}
		name, slug := "Acme Corp", "acme"
		got, err := svc.UpdateOrganization(ctx, alice, acme, acme.Version, OrganizationPatch{Name: &name, Slug: &slug})
		if err != nil || got.Name != "Acme Corp" || got.Slug != "acme" || got.Version != acme.Version+1 {
			t.Fatalf("rename: %+v (%v)", got, err)
		}
		stored, err := svc.FindOrganization(ctx, "acme")
		if err != nil || stored.Name != "Acme Corp" || stored.Version != got.Version {
			t.Fatalf("stored %+v (%v)", stored, err)
		}
		evs, err := event.List(ctx, st, event.Filter{EntityType: "organization", EntityID: acme.ID})
		if err != nil || len(evs) != 2 || evs[1].Type != "organization.updated" || evs[1].OrganizationID != acme.ID {
			t.Fatalf("events %+v (%v)", evs, err)
		}
		if string(evs[1].Payload) != `{"changes":{"name":"Acme Corp"}}` {
			t.Fatalf("payload %s", evs[1].Payload)
		}

		stale := "Stale"
		if _, err := svc.UpdateOrganization(ctx, alice, stored, acme.Version, OrganizationPatch{Name: &stale}); apperr.Code(err) != apperr.Conflict {
			t.Fatalf("stale version: %v, want 409", err)
		}
		same := "Acme Corp"
		if _, err := svc.UpdateOrganization(ctx, alice, stored, acme.Version, OrganizationPatch{Name: &same}); apperr.Code(err) != apperr.Conflict {
			t.Fatalf("stale version of a no-op: %v, want 409", err)
		}
		if o, err := svc.UpdateOrganization(ctx, alice, stored, stored.Version, OrganizationPatch{Name: &same}); err != nil || o.Version != stored.Version {
			t.Fatalf("same name: %+v (%v), want unchanged", o, err)
		}
		for _, c := range []struct {
			patch OrganizationPatch
			field string
		}{
			{OrganizationPatch{Name: new("Acme"), Slug: new("acme-two")}, "slug"},
			{OrganizationPatch{Name: new("  ")}, "name"},
			{OrganizationPatch{Name: new("bad\x00name")}, "name"},
			{OrganizationPatch{}, "name"},
		} {
			_, err := svc.UpdateOrganization(ctx, alice, stored, stored.Version, c.patch)
			var ae *apperr.Error
			if !errors.As(err, &ae) || len(ae.FieldErrors()) != 1 || ae.FieldErrors()[0].Field != c.field {
				t.Fatalf("%+v: %v, want 400 naming %s", c.patch, err, c.field)
			}
		}
		if evs, _ := event.List(ctx, st, event.Filter{EntityType: "organization", EntityID: acme.ID}); len(evs) != 2 {
			t.Fatalf("%d events after the refused and no-op patches, want 2", len(evs))
		}
	})
}
