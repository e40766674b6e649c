package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
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
