package realtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// tokenFor issues an API token created by subject (a person) with role in
// the organization, expiring at exp (nil: never); it returns the secret
// and the token's id.
func (e *env) tokenFor(subject, orgID, role string, exp *time.Time, now time.Time) (string, string) {
	e.t.Helper()
	secret, tk, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: subject}, auth.KindAPI, "test "+role, orgID, role, nil, exp, now)
	if err := e.core.Applier.Apply(context.Background(), tr); err != nil {
		e.t.Fatal(err)
	}
	return secret, tk.ID
}

// lastLogged is the log's last seq.
func (e *env) lastLogged() int64 {
	e.t.Helper()
	seq, err := event.LastSeq(context.Background(), e.st)
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

// endsBefore reads sub until it ends, failing on any event after seq
// (committed after the change that ended it) and unless it ended with an
// error of code.
func endsBefore(t *testing.T, sub *realtime.Subscription, seq int64, code int) *realtime.Error {
	t.Helper()
	timeout := time.After(hangGuard)
	for {
		select {
		case e, ok := <-sub.C():
			if !ok {
				re, isRPC := sub.Err().(*realtime.Error)
				if !isRPC || re.Code != code {
					t.Fatalf("subscription ended with %v, want code %d", sub.Err(), code)
				}
				return re
			}
			if e.Seq > seq {
				t.Fatalf("event %d (%s) delivered after the change at seq %d", e.Seq, e.Type, seq)
			}
		case <-timeout:
			t.Fatalf("the subscription is still open, want it ended with code %d", code)
		}
	}
}

// closedAsRevoked waits for the connection to close with 1008.
func closedAsRevoked(t *testing.T, c *realtime.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatal("the connection of a dead credential is still open")
	}
	if st := websocket.CloseStatus(c.Err()); st != websocket.StatusPolicyViolation {
		t.Fatalf("connection ended with %v, want close status 1008", c.Err())
	}
}

// TestRevokedTokenStopsStreaming: the finding "a revoked credential keeps
// streaming". Once the token is revoked, each open subscription of it ends
// with -32004 before delivering any event committed after the revocation,
// and the connection closes with 1008.
func TestRevokedTokenStopsStreaming(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Interval: 50 * time.Millisecond})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		secret, id := e.tokenFor("bootstrap", org, "viewer", nil, time.Now())
		c := dial(t, e.URL, secret, false)
		sub := subscribe(t, c, "project:ACME", realtime.LiveOnly)
		osub := subscribe(t, c, "org:acme", realtime.LiveOnly)
		e.touch(org, pid, "t1", 2)
		collect(t, sub, e.lastLogged())

		e.admin(204, "DELETE", "/api/v1/tokens/"+id, nil)
		revoked := e.lastLogged()
		e.touch(org, pid, "t1", 3)
		endsBefore(t, sub, revoked, realtime.CodeUnauthorized)
		if re := endsBefore(t, osub, revoked, realtime.CodeUnauthorized); !strings.Contains(re.Message, "revoked") {
			t.Errorf("ended with %q, want the reason", re.Message)
		}
		closedAsRevoked(t, c)
	})
}

// TestRemovedRoleStopsStreaming: a token's subscriptions end with -32003
// once its creator's role is gone — the organization role, or the project
// role of a project-only member — before any later event, while the
// connection and unaffected subscriptions go on. In a project a token acts
// at most with its creator's role there (item 1 of the same issue).
func TestRemovedRoleStopsStreaming(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Interval: 50 * time.Millisecond})
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		e.project("acme", "OTHER")
		_, key := e.item("ACME", "one")
		e.admin(200, "PUT", "/api/v1/orgs/acme/members/vera", map[string]any{"role": "viewer"})
		e.admin(200, "PUT", "/api/v1/projects/ACME/members/pam", map[string]any{"role": "member"})
		vera, _ := e.tokenFor("vera", org, "viewer", nil, time.Now())
		pam, _ := e.tokenFor("pam", org, "member", nil, time.Now())

		cp := dial(t, e.URL, pam, true)
		psub := subscribe(t, cp, "project:ACME", realtime.LiveOnly)
		isub := subscribe(t, cp, "item:"+key, realtime.LiveOnly)
		for _, stream := range []string{"project:OTHER", "org:acme"} {
			if _, err := cp.Subscribe(context.Background(), stream, 0); !realtime.IsForbidden(err) {
				t.Fatalf("the token of a member of ACME only subscribes to %s: %v", stream, err)
			}
		}
		cv := dial(t, e.URL, vera, false)
		vsub := subscribe(t, cv, "project:ACME", realtime.LiveOnly)
		vosub := subscribe(t, cv, "org:acme", realtime.LiveOnly)

		e.admin(204, "DELETE", "/api/v1/orgs/acme/members/vera", nil)
		removed := e.lastLogged()
		e.touch(org, pid, "t1", 3)
		endsBefore(t, vsub, removed, realtime.CodeForbidden)
		endsBefore(t, vosub, removed, realtime.CodeForbidden)
		if err := cv.Ping(context.Background()); err != nil {
			t.Fatalf("the connection of a valid credential closed: %v", err)
		}
		if _, err := cv.Subscribe(context.Background(), "project:ACME", 0); !realtime.IsForbidden(err) {
			t.Fatalf("subscribing again: %v", err)
		}
		collect(t, psub, e.lastLogged()) // pam's role is intact: her token streams on

		e.admin(204, "DELETE", "/api/v1/projects/ACME/members/pam", nil)
		removed = e.lastLogged()
		e.admin(200, "PATCH", "/api/v1/items/"+key, map[string]any{"title": "one!", "version": 1})
		endsBefore(t, psub, removed, realtime.CodeForbidden)
		endsBefore(t, isub, removed, realtime.CodeForbidden)
	})
}

// TestExpiredTokenStopsStreaming: a subscription ends with -32004 at its
// token's expiry on the injected clock; a millisecond before, after the
// periodic re-checks due by then have run, it still streams.
func TestExpiredTokenStopsStreaming(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Now())
		e := newEnvOn(t, s, feed.Config{Interval: 50 * time.Millisecond}, fc)
		org := e.org("acme")
		pid := e.project("acme", "ACME")
		exp := fc.Now().Add(time.Hour).Truncate(time.Millisecond)
		secret, _ := e.tokenFor("bootstrap", org, "viewer", &exp, fc.Now())
		c := dial(t, e.URL, secret, true)
		sub := subscribe(t, c, "project:ACME", realtime.LiveOnly)
		blockUntil(t, fc, 2) // the guard's expiry and re-check timers
		fc.Advance(exp.Sub(fc.Now()) - time.Millisecond)
		blockUntil(t, fc, 2) // it re-checked (still valid) and waits again
		e.touch(org, pid, "t1", 1)
		collect(t, sub, e.lastLogged())

		fc.Advance(time.Millisecond)
		if re := endsBefore(t, sub, e.lastLogged(), realtime.CodeUnauthorized); !strings.Contains(re.Message, "expired") {
			t.Errorf("ended with %q, want the reason", re.Message)
		}
		closedAsRevoked(t, c)
	})
}

// TestRecheckIsASafetyNet: access lost without an event the feed could
// see (a membership deleted behind Ballet's back) ends the subscription at
// the next periodic re-check.
func TestRecheckIsASafetyNet(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Now())
		e := newEnvOn(t, s, feed.Config{Interval: 50 * time.Millisecond}, fc)
		org := e.org("acme")
		e.project("acme", "ACME")
		e.admin(200, "PUT", "/api/v1/orgs/acme/members/vera", map[string]any{"role": "viewer"})
		secret, _ := e.tokenFor("vera", org, "viewer", nil, fc.Now())
		c := dial(t, e.URL, secret, false)
		sub := subscribe(t, c, "project:ACME", realtime.LiveOnly)
		if _, err := s.Exec(context.Background(), store.Stmt(`DELETE FROM memberships WHERE subject = 'vera'`)); err != nil {
			t.Fatal(err)
		}
		blockUntil(t, fc, 1) // the guard's re-check timer
		fc.Advance(time.Minute)
		endsBefore(t, sub, e.lastLogged(), realtime.CodeForbidden)
		if err := c.Ping(context.Background()); err != nil {
			t.Fatalf("connection: %v", err)
		}
	})
}
