package skill_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

var alice = event.Actor{Kind: event.ActorHuman, Sub: "alice"}

// skillSetup returns skills on a fake clock with project ACME.
func skillSetup(t *testing.T, s store.Store) (*skill.Service, tenancy.Project, *clock.Fake) {
	t.Helper()
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	a := &transition.Applier{Store: s, Clock: c}
	ten := tenancy.New(s, a, c, tenancy.Hooks{})
	svc := skill.New(s, a, c)
	o, err := ten.CreateOrganization(ctx, alice, tenancy.OrganizationInput{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.CreateProject(ctx, alice, o.ID, tenancy.ProjectInput{Key: "ACME", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	return svc, p, c
}

func errCode(err error) string {
	if err == nil {
		return "ok"
	}
	return apperr.Code(err)
}

func ptr(s string) *string { return &s }

func TestSkillVersions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		svc, p, c := skillSetup(t, s)
		k, err := svc.Create(ctx, alice, p, skill.Input{Name: "go-style", Description: "Go style", Content: "gofmt everything"})
		if err != nil {
			t.Fatal(err)
		}
		if k.Version != 1 || k.ProjectID != p.ID || k.UpdatedBy != "alice" {
			t.Fatalf("created %+v", k)
		}
		if _, err := svc.Create(ctx, alice, p, skill.Input{Name: "go-style", Content: "again"}); errCode(err) != apperr.Conflict {
			t.Fatalf("duplicate: %v", err)
		}
		c.Advance(time.Minute)
		bob := event.Actor{Kind: event.ActorHuman, Sub: "bob"}
		k2, err := svc.Update(ctx, bob, p, "go-style", 1, skill.Patch{Content: ptr("gofmt and go vet")})
		if err != nil {
			t.Fatal(err)
		}
		if k2.Version != 2 || k2.Description != "Go style" || k2.Content != "gofmt and go vet" || k2.UpdatedBy != "bob" || !k2.CreatedAt.Equal(k.CreatedAt) {
			t.Fatalf("updated %+v", k2)
		}
		if _, err := svc.Update(ctx, bob, p, "go-style", 1, skill.Patch{Content: ptr("stale")}); errCode(err) != apperr.Conflict {
			t.Fatalf("stale update: %v", err)
		}
		got, err := svc.Find(ctx, p.ID, "go-style")
		if err != nil || got != k2 {
			t.Fatalf("find: %+v, %v (want %+v)", got, err, k2)
		}
		old, err := svc.FindVersion(ctx, p.ID, "go-style", 1)
		if err != nil || old.Content != "gofmt everything" || old.Version != 1 || old.UpdatedBy != "alice" || old.ID != k.ID {
			t.Fatalf("version 1: %+v, %v", old, err)
		}
		if _, err := svc.FindVersion(ctx, p.ID, "go-style", 3); errCode(err) != apperr.NotFound {
			t.Fatalf("version 3: %v", err)
		}
		vs, err := svc.Versions(ctx, p.ID, "go-style")
		if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || vs[0].ContentBytes != len("gofmt and go vet") || vs[0].CreatedBy != "bob" {
			t.Fatalf("versions %+v, %v", vs, err)
		}

		// Delete keeps the versions, frees the name; the new skill is a
		// different one with its own history.
		if err := svc.Delete(ctx, alice, p, "go-style"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Find(ctx, p.ID, "go-style"); errCode(err) != apperr.NotFound {
			t.Fatalf("deleted skill found: %v", err)
		}
		if err := svc.Delete(ctx, alice, p, "go-style"); errCode(err) != apperr.NotFound {
			t.Fatalf("deleting twice: %v", err)
		}
		rows, err := s.Query(ctx, `SELECT version, deleted FROM skill_versions WHERE skill_id = ? ORDER BY version`, k.ID)
		if err != nil || rows.Len() != 3 {
			t.Fatalf("kept versions: %v, %v", rows, err)
		}
		var last int64
		var deleted bool
		if err := rows.Scan(2, &last, &deleted); err != nil || last != 3 || !deleted {
			t.Fatalf("final version %d deleted=%v (%v)", last, deleted, err)
		}
		again, err := svc.Create(ctx, alice, p, skill.Input{Name: "go-style", Content: "new"})
		if err != nil || again.ID == k.ID || again.Version != 1 {
			t.Fatalf("reused name: %+v, %v", again, err)
		}

		evs, err := event.List(ctx, s, event.Filter{EntityType: "skill"})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range evs {
			var pl struct {
				Name    string
				Version int64
			}
			if err := json.Unmarshal(e.Payload, &pl); err != nil || pl.Name != "go-style" || e.ProjectID != p.ID || e.OrganizationID != p.OrganizationID {
				t.Errorf("event %+v", e)
			}
			types = append(types, e.Type+"@"+itoa(pl.Version))
		}
		if got := strings.Join(types, " "); got != "skill.created@1 skill.updated@2 skill.deleted@3 skill.created@1" {
			t.Errorf("events: %s", got)
		}
	})
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestSkillValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		svc, p, _ := skillSetup(t, s)
		for _, c := range []struct {
			in    skill.Input
			field string
		}{
			{skill.Input{Name: "Go", Content: "x"}, "name"},
			{skill.Input{Name: "-go", Content: "x"}, "name"},
			{skill.Input{Name: "", Content: "x"}, "name"},
			{skill.Input{Name: strings.Repeat("a", 65), Content: "x"}, "name"},
			{skill.Input{Name: "go", Content: ""}, "content"},
			{skill.Input{Name: "go", Content: strings.Repeat("x", skill.MaxSkillContent+1)}, "content"},
			{skill.Input{Name: "go", Description: strings.Repeat("d", skill.MaxSkillDescription+1), Content: "x"}, "description"},
		} {
			_, err := svc.Create(ctx, alice, p, c.in)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.Invalid || len(ae.FieldErrors()) != 1 || ae.FieldErrors()[0].Field != c.field {
				t.Errorf("create %.40q/%.20q: %v, want a problem with %s", c.in.Name, c.in.Content, err, c.field)
			}
		}
		if _, err := svc.Create(ctx, alice, p, skill.Input{Name: strings.Repeat("a", 64), Description: strings.Repeat("d", skill.MaxSkillDescription),
			Content: strings.Repeat("x", skill.MaxSkillContent)}); err != nil {
			t.Fatalf("at the limits: %v", err)
		}
		if _, err := svc.Create(ctx, alice, p, skill.Input{Name: "go_1-x", Content: "x"}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			version int64
			in      skill.Patch
			field   string
		}{
			{0, skill.Patch{Content: ptr("y")}, "version"},
			{1, skill.Patch{}, "content"},
			{1, skill.Patch{Content: ptr("")}, "content"},
			{1, skill.Patch{Description: ptr(strings.Repeat("d", 1025))}, "description"},
		} {
			_, err := svc.Update(ctx, alice, p, "go_1-x", c.version, c.in)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.Invalid || len(ae.FieldErrors()) == 0 || ae.FieldErrors()[0].Field != c.field {
				t.Errorf("update v%d %+v: %v, want a problem with %s", c.version, c.in, err, c.field)
			}
		}
		if _, err := svc.Update(ctx, alice, p, "missing", 1, skill.Patch{Content: ptr("y")}); errCode(err) != apperr.NotFound {
			t.Errorf("update missing: %v", err)
		}
	})
}

func TestSkillsForRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		svc, p, _ := skillSetup(t, s)
		for _, n := range []string{"review", "go", "docs", "gone"} {
			if _, err := svc.Create(ctx, alice, p, skill.Input{Name: n, Content: n + " content"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := svc.Delete(ctx, alice, p, "gone"); err != nil {
			t.Fatal(err)
		}
		names := func(allowed []string) string {
			ks, err := svc.ForRun(ctx, p.ID, allowed)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, k := range ks {
				out = append(out, k.Name)
				if k.Content != k.Name+" content" {
					t.Errorf("%s content %q", k.Name, k.Content)
				}
			}
			return strings.Join(out, ",")
		}
		if got := names(nil); got != "docs,go,review" {
			t.Errorf("all: %s", got)
		}
		if got := names([]string{"review", "go", "gone", "unknown"}); got != "go,review" {
			t.Errorf("allowed: %s", got)
		}
		if got, err := svc.ForRun(ctx, "other-project", nil); err != nil || len(got) != 0 {
			t.Errorf("other project: %v, %v", got, err)
		}
	})
}

// TestConcurrentSkillUpdate: many writers on the same version, exactly one
// wins; the others get a conflict and no version is lost or doubled.
func TestConcurrentSkillUpdate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		svc, p, _ := skillSetup(t, s)
		if _, err := svc.Create(ctx, alice, p, skill.Input{Name: "go", Content: "v1"}); err != nil {
			t.Fatal(err)
		}
		const n = 8
		codes := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := svc.Update(ctx, alice, p, "go", 1, skill.Patch{Content: ptr("v2 by " + itoa(int64(i)))})
				codes[i] = errCode(err)
			})
		}
		wg.Wait()
		ok := 0
		for _, c := range codes {
			switch c {
			case "ok":
				ok++
			case apperr.Conflict:
			default:
				t.Errorf("unexpected %s", c)
			}
		}
		if ok != 1 {
			t.Fatalf("%d writers won: %v", ok, codes)
		}
		vs, err := svc.Versions(ctx, p.ID, "go")
		if err != nil || len(vs) != 2 {
			t.Fatalf("versions %+v, %v", vs, err)
		}
	})
}
