package tenancy

import (
	"context"
	"testing"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

var alice = event.Actor{Kind: event.ActorHuman, Sub: "alice"}

// world is a tenancy with organization acme and its project ACME.
type world struct {
	svc *Service
	org Organization
	p   Project
}

func newWorld(t *testing.T, st store.Store) *world {
	t.Helper()
	ctx := context.Background()
	c := clock.Real{}
	svc := New(st, &transition.Applier{Store: st, Clock: c, Attempts: 200}, c, Hooks{})
	o, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.CreateProject(ctx, alice, o.ID, ProjectInput{Key: "ACME", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	return &world{svc: svc, org: o, p: p}
}
