package auth_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestAuthListsEveryEventItWrites: a token's creation and revocation and a
// session's start and end write exactly the event types auth.Events lists
// (what the event catalogue, the API's history and the OpenAPI document
// are built from), and each decodes as its payload type.
func TestAuthListsEveryEventItWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "laptop", Organization: "acme", Role: "member", ExpiresIn: "1h"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := f.authenticate(c.Secret)
		if err != nil {
			t.Fatal(err)
		}
		secret, _, err := sessions.Start(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := f.authenticate(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := sessions.End(ctx, sp); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Revoke(ctx, member, c.ID); err != nil {
			t.Fatal(err)
		}
		evs, err := event.List(ctx, s, event.Filter{Limit: event.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		catalogue := event.NewCatalogue(auth.Events)
		var written []string
		for _, e := range evs {
			if !slices.Contains(written, e.Type) {
				written = append(written, e.Type)
			}
			if _, err := catalogue.Decode(e); err != nil {
				t.Errorf("event %s is not in auth.Events: %v", e.Type, err)
			}
		}
		slices.Sort(written)
		if listed := catalogue.Types(); !slices.Equal(listed, written) {
			t.Errorf("auth.Events lists %v; the token and session lifecycle wrote %v", listed, written)
		}
	})
}

// TestATokenWithoutScopesListsNone: a token issued without scopes holds an
// empty list, never null, in its record and in its token.created event.
func TestATokenWithoutScopesListsNone(t *testing.T) {
	actor := event.Actor{Kind: event.ActorHuman, Sub: "max"}
	_, tok, tr := auth.Issue(actor, auth.KindAPI, "ci", "o1", "viewer", nil, nil, start)
	if tok.Scopes == nil || len(tok.Scopes) != 0 {
		t.Errorf("scopes of a token issued without: %#v, want an empty list", tok.Scopes)
	}
	if len(tr.Events) != 1 || !strings.Contains(string(tr.Events[0].Payload), `"scopes":[]`) {
		t.Errorf("token.created of a token without scopes: %s, want \"scopes\":[]", tr.Events[0].Payload)
	}
}
