package skill

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/tenancy"
)

// TestDecideUpdate: a new version of a skill is a pure function of the
// skill read, the version the caller read and the patch.
func TestDecideUpdate(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	bob := event.Actor{Kind: event.ActorHuman, Sub: "bob"}
	p := tenancy.Project{ID: "p1", OrganizationID: "o1", Key: "ACME"}
	k := Skill{ID: "k1", ProjectID: "p1", Name: "go", Description: "Go", Content: "gofmt", Version: 2}
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		name    string
		version int64
		in      Patch
		code    string // "" for success
	}{
		{"content", 2, Patch{Content: s("gofmt and vet")}, ""},
		{"description", 2, Patch{Description: s("Go style")}, ""},
		{"a stale version", 1, Patch{Content: s("x")}, apperr.Conflict},
		{"empty content", 2, Patch{Content: s("")}, apperr.Invalid},
	} {
		next, tr, err := update(bob, p, k, c.version, c.in, now)
		if code := apperr.Code(err); (err == nil) != (c.code == "") || (err != nil && code != c.code) {
			t.Errorf("%s: %v, want code %q", c.name, err, c.code)
			continue
		}
		if err != nil {
			continue
		}
		if next.Version != 3 || next.UpdatedBy != "bob" || !next.UpdatedAt.Equal(now) || tr.Events[0].Type != "skill.updated" ||
			len(tr.Guarded) != 1 || len(tr.Statements) != 1 {
			t.Errorf("%s: %+v, %+v", c.name, next, tr)
		}
		if (c.in.Content == nil && next.Content != k.Content) || (c.in.Description == nil && next.Description != k.Description) {
			t.Errorf("%s: a field not sent changed: %+v", c.name, next)
		}
	}
	tr := remove(bob, p, k, now)
	if tr.Events[0].Type != "skill.deleted" || string(tr.Events[0].Payload) != `{"name":"go","version":3}` {
		t.Errorf("delete: %s %s", tr.Events[0].Type, tr.Events[0].Payload)
	}
}
