package tenancy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// fakeWorld is a tenancy on a fake clock (on a whole second plus some
// microseconds, so a time not cut to milliseconds shows) with hooks that
// enqueue one job each, and organization acme with its project ACME.
func fakeWorld(t *testing.T, st store.Store) (*Service, *clock.Fake, Organization, Project) {
	t.Helper()
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 123_456_789, time.UTC))
	svc := New(st, &transition.Applier{Store: st, Clock: c, Attempts: 200}, c, Hooks{
		ProjectChanged: func(p Project, _ ProjectChanges) []job.Spec {
			return []job.Spec{{Kind: "test.project_changed", Payload: p.ID}}
		},
		PlatformPaused: func(paused bool) []job.Spec { return []job.Spec{{Kind: "test.platform_paused", Payload: paused}} },
	})
	o, err := svc.CreateOrganization(ctx, alice, OrganizationInput{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.CreateProject(ctx, alice, o.ID, ProjectInput{Key: "ACME", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	return svc, c, o, p
}

// jobKinds lists the kinds of the jobs enqueued, in the order they were.
func jobKinds(t *testing.T, st store.Store) []string {
	t.Helper()
	rows, err := st.Query(context.Background(), `SELECT kind FROM jobs ORDER BY created_at, kind`)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for i := range rows.Len() {
		var k string
		if err := rows.Scan(i, &k); err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

// fieldsOf names the fields an Invalid error lists ("" for none).
func fieldsOf(err error) []string {
	ae, ok := err.(*apperr.Error)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range ae.FieldErrors() {
		out = append(out, f.Field)
	}
	return out
}

// TestUpdatePlatformChangesTheLimitAtTheVersionRead: the platform's
// concurrency limit is required, within 0 … 10,000, and changed only at
// the version the caller read; the change answers what a later read
// finds (version one up, the time of the change) and records
// platform.updated with the new limit.
func TestUpdatePlatformChangesTheLimitAtTheVersionRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, c, _, _ := fakeWorld(t, st)
		p0, err := svc.GetPlatform(ctx)
		if err != nil {
			t.Fatal(err)
		}
		limit := func(n int) PlatformPatch { return PlatformPatch{ConcurrencyLimit: &n} }
		for _, bad := range []struct {
			name    string
			version int64
			in      PlatformPatch
			field   string
		}{
			{"no version", 0, limit(3), "version"},
			{"no limit", p0.Version, PlatformPatch{}, "concurrency_limit"},
			{"a negative limit", p0.Version, limit(-1), "concurrency_limit"},
			{"a limit over 10,000", p0.Version, limit(10_001), "concurrency_limit"},
		} {
			_, err := svc.UpdatePlatform(ctx, alice, bad.version, bad.in)
			if got := fieldsOf(err); !slices.Equal(got, []string{bad.field}) {
				t.Errorf("%s: %v, want 400 naming %s", bad.name, err, bad.field)
			}
		}
		if p, _ := svc.GetPlatform(ctx); p != p0 {
			t.Fatalf("refused changes changed the platform: %+v, was %+v", p, p0)
		}

		c.Advance(time.Minute)
		got, err := svc.UpdatePlatform(ctx, alice, p0.Version, limit(10_000))
		if err != nil {
			t.Fatal(err)
		}
		want := Platform{Paused: p0.Paused, ConcurrencyLimit: 10_000, UpdatedAt: c.Now().Truncate(time.Millisecond), Version: p0.Version + 1}
		if got != want {
			t.Errorf("UpdatePlatform = %+v, want %+v", got, want)
		}
		if read, err := svc.GetPlatform(ctx); err != nil || read != want {
			t.Errorf("GetPlatform after the change = %+v, %v; want %+v", read, err, want)
		}
		evs, err := event.List(ctx, st, event.Filter{EntityType: "platform"})
		if err != nil || len(evs) != 1 {
			t.Fatalf("platform events %+v %v, want platform.updated only", evs, err)
		}
		if pu, ok, err := event.Decode[PlatformUpdated](evs[0]); !ok || err != nil || pu.Changes.ConcurrencyLimit != 10_000 || evs[0].OrganizationID != "" {
			t.Errorf("event %+v: %+v %v %v", evs[0], pu, ok, err)
		}

		if _, err := svc.UpdatePlatform(ctx, alice, p0.Version, limit(0)); apperr.Code(err) != apperr.Conflict {
			t.Errorf("a change at the version before: %v, want conflict", err)
		}
		if read, _ := svc.GetPlatform(ctx); read != want {
			t.Errorf("a stale change changed the platform: %+v", read)
		}
	})
}

// TestPlatformWithoutItsRowIsNotFound: the platform's settings are one
// row; without it (a store not migrated) reading, pausing and changing
// the platform answer not found and write nothing.
func TestPlatformWithoutItsRowIsNotFound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, _, _, _ := fakeWorld(t, st)
		if _, err := st.Exec(ctx, store.Stmt(`DELETE FROM platform`)); err != nil {
			t.Fatal(err)
		}
		n := 3
		if _, err := svc.GetPlatform(ctx); apperr.Code(err) != apperr.NotFound {
			t.Errorf("GetPlatform: %v, want not found", err)
		}
		if _, err := svc.SetPlatformPaused(ctx, alice, true); apperr.Code(err) != apperr.NotFound {
			t.Errorf("SetPlatformPaused: %v, want not found", err)
		}
		if _, err := svc.UpdatePlatform(ctx, alice, 1, PlatformPatch{ConcurrencyLimit: &n}); apperr.Code(err) != apperr.NotFound {
			t.Errorf("UpdatePlatform: %v, want not found", err)
		}
		if evs, err := event.List(ctx, st, event.Filter{EntityType: "platform"}); err != nil || len(evs) != 0 {
			t.Errorf("platform events %+v %v, want none", evs, err)
		}
	})
}

// TestPausingThePlatformEnqueuesItsHookAndAnswersWhatIsStored: pulling
// the kill switch answers the platform a later read finds (its time cut
// to milliseconds) and enqueues the hook's jobs with it; pulling it again
// enqueues nothing.
func TestPausingThePlatformEnqueuesItsHookAndAnswersWhatIsStored(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, c, _, _ := fakeWorld(t, st)
		c.Advance(time.Second)
		got, err := svc.SetPlatformPaused(ctx, alice, true)
		if err != nil {
			t.Fatal(err)
		}
		read, err := svc.GetPlatform(ctx)
		if err != nil || read != got || !got.Paused || !got.UpdatedAt.Equal(c.Now().Truncate(time.Millisecond)) {
			t.Errorf("SetPlatformPaused = %+v; GetPlatform = %+v, %v", got, read, err)
		}
		if _, err := svc.SetPlatformPaused(ctx, alice, true); err != nil {
			t.Fatal(err)
		}
		if kinds := jobKinds(t, st); !slices.Equal(kinds, []string{"test.platform_paused"}) {
			t.Errorf("jobs %v, want one test.platform_paused", kinds)
		}
	})
}

// TestEventsListsEveryTypeTenancyWrites: tenancy.Events (what the event
// catalogue, the API's event types and docs/events.md are built from)
// lists exactly the types of the events tenancy's changes write.
func TestEventsListsEveryTypeTenancyWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, _, o, p := fakeWorld(t, st)
		name := "Acme 2"
		n := 4
		steps := []func() error{
			func() error {
				_, err := svc.UpdateProject(ctx, alice, p, p.Version, ProjectPatch{Name: &name})
				return err
			},
			func() error {
				_, err := svc.UpdateOrganization(ctx, alice, o, o.Version, OrganizationPatch{Name: &name})
				return err
			},
			func() error { _, err := svc.SetMember(ctx, alice, o.ID, "", "bea", "member"); return err },
			func() error { return svc.RemoveMember(ctx, alice, o.ID, "", "bea") },
			func() error { _, err := svc.SetPlatformPaused(ctx, alice, true); return err },
			func() error { _, err := svc.SetPlatformPaused(ctx, alice, false); return err },
			func() error {
				pl, err := svc.GetPlatform(ctx)
				if err == nil {
					_, err = svc.UpdatePlatform(ctx, alice, pl.Version, PlatformPatch{ConcurrencyLimit: &n})
				}
				return err
			},
		}
		for i, step := range steps {
			if err := step(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		evs, err := event.List(ctx, st, event.Filter{Limit: event.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		written := map[string]bool{}
		for _, e := range evs {
			written[e.Type] = true
		}
		listed := map[string]bool{}
		for _, pl := range Events {
			listed[pl.EventType()] = true
		}
		for typ := range written {
			if !listed[typ] {
				t.Errorf("tenancy writes %s, which tenancy.Events does not list", typ)
			}
		}
		for typ := range listed {
			if !written[typ] {
				t.Errorf("tenancy.Events lists %s, which no change wrote", typ)
			}
		}
	})
}

// TestAPauseDecidedOnAStaleReadLoses: pulling the kill switch is written
// only over the platform version it was decided on, so of two pauses
// decided on the same read only the first is recorded (the other decides
// again and finds nothing to do).
func TestAPauseDecidedOnAStaleReadLoses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		svc, c, _, _ := fakeWorld(t, st)
		read, err := svc.GetPlatform(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, stale := read.pause(alice, true, c.Now())
		if _, err := svc.SetPlatformPaused(ctx, alice, true); err != nil {
			t.Fatal(err)
		}
		if err := svc.Applier.Apply(ctx, stale); err == nil {
			t.Error("a pause decided on the version before was written")
		}
		evs, err := event.List(ctx, st, event.Filter{EntityType: "platform"})
		if err != nil || len(evs) != 1 {
			t.Errorf("platform events %d, %v; want one platform.paused", len(evs), err)
		}
		if p, err := svc.GetPlatform(ctx); err != nil || p.Version != read.Version+1 {
			t.Errorf("platform %+v %v, want version %d", p, err, read.Version+1)
		}
	})
}
