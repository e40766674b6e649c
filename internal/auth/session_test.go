package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

const bootstrapSecret = "bootstrap-secret-0123456789"

// sessionFixture is setup's organization with an authenticator that
// knows the bootstrap token, and browser sessions of 8 hours.
func sessionFixture(t *testing.T, s store.Store) (*fixture, *auth.Sessions) {
	t.Helper()
	f := setup(t, s)
	f.authn = auth.NewAuthenticator(s, f.clock, bootstrapSecret, []string{"root"}, auth.OIDCConfig{})
	return f, &auth.Sessions{Auth: f.authn, Applier: &transition.Applier{Store: s, Clock: f.clock}, TTL: 8 * time.Hour}
}

// wantUnauthenticated fails unless err is unauthenticated and says why.
func wantUnauthenticated(t *testing.T, what string, p *auth.Principal, err error, why string) {
	t.Helper()
	if apperr.Code(err) != apperr.Unauthenticated || !strings.Contains(err.Error(), why) {
		t.Errorf("%s: %+v, %v; want unauthenticated: …%s…", what, p, err, why)
	}
}

// sessionEvents lists the types of the sessions' events, in order.
func sessionEvents(t *testing.T, s store.Store) []string {
	t.Helper()
	evs, err := event.List(context.Background(), s, event.Filter{Limit: event.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if strings.HasPrefix(e.Type, "session.") {
			out = append(out, e.Type)
		}
	}
	return out
}

// TestABootstrapSessionLastsWhileTheBootstrapTokenDoes: a session started
// with the bootstrap token acts as the bootstrap platform admin until its
// absolute lifetime ends (not a millisecond before), or the bootstrap
// token changes or is switched off.
func TestABootstrapSessionLastsWhileTheBootstrapTokenDoes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		boot, err := f.authenticate(bootstrapSecret)
		if err != nil {
			t.Fatal(err)
		}
		secret, sess, err := sessions.Start(ctx, boot)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, auth.SessionPrefix) || len(secret) < len(auth.SessionPrefix)+40 || sess.Source != auth.SourceBootstrap ||
			sess.Name != auth.BootstrapSubject || !sess.PlatformAdmin || !sess.ExpiresAt.Equal(start.Add(8*time.Hour)) || !sess.CreatedAt.Equal(start) {
			t.Fatalf("Start = %q, %+v", secret, sess)
		}
		f.clock.Advance(8*time.Hour - time.Millisecond)
		p, err := f.authenticate(secret)
		if err != nil || p.Subject != auth.BootstrapSubject || !p.PlatformAdmin || p.SessionID != sess.ID || p.Name != auth.BootstrapSubject ||
			!p.ExpiresAt.Equal(sess.ExpiresAt) || p.TokenID != "" {
			t.Errorf("the session at its last millisecond: %+v, %v", p, err)
		}
		for _, other := range []*auth.Authenticator{
			auth.NewAuthenticator(s, f.clock, "another-bootstrap-secret-0123", nil, auth.OIDCConfig{}),
			auth.NewAuthenticator(s, f.clock, "", nil, auth.OIDCConfig{}),
		} {
			p, err := other.Authenticate(ctx, "Bearer "+secret)
			wantUnauthenticated(t, "the bootstrap token changed", p, err, "bootstrap token it was started with has changed")
		}
		f.clock.Advance(time.Millisecond)
		p, err = f.authenticate(secret)
		wantUnauthenticated(t, "the session at its end", p, err, "session expired")
	})
}

// TestATokenSessionActsAsItsTokenAndEndsWithIt: a session started with an
// API token acts as that token (capped as ever), never outlives it, and
// ends when the token is revoked; runner tokens and sessions cannot start
// one.
func TestATokenSessionActsAsItsTokenAndEndsWithIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "laptop", Organization: "acme", Role: "member", ExpiresIn: "1h", Scopes: []string{"tracker.read"}})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := f.authenticate(c.Secret)
		if err != nil {
			t.Fatal(err)
		}
		secret, sess, err := sessions.Start(ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Source != auth.SourceToken || sess.TokenID != c.ID || sess.Name != "laptop" || !sess.ExpiresAt.Equal(start.Add(time.Hour)) {
			t.Fatalf("Start = %+v, want a token session ending with the token, in an hour", sess)
		}
		p, err := f.authenticate(secret)
		if err != nil || p.TokenID != c.ID || p.TokenKind != auth.KindAPI || p.CappedBy != "max" || p.SessionID != sess.ID || p.Name != "laptop" ||
			!p.ExpiresAt.Equal(start.Add(time.Hour)) || !p.HasScope("tracker.read") || p.HasScope("tracker.write") {
			t.Errorf("the token session: %+v, %v", p, err)
		}
		if _, _, err := sessions.Start(ctx, p); apperr.Code(err) != apperr.Invalid {
			t.Errorf("a session starting a session: %v, want invalid", err)
		}
		if err := f.svc.Revoke(ctx, member, c.ID); err != nil {
			t.Fatal(err)
		}
		p, err = f.authenticate(secret)
		wantUnauthenticated(t, "after the token's revocation", p, err, "session ended")

		runner, err := f.svc.Create(ctx, root, auth.TokenInput{Name: "runner", Kind: auth.KindRunner})
		if err != nil {
			t.Fatal(err)
		}
		rp, err := f.authenticate(runner.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := sessions.Start(ctx, rp); apperr.Code(err) != apperr.Forbidden {
			t.Errorf("a runner token signing in: %v, want forbidden", err)
		}
	})
}

// TestATokenSessionEndsWhenItsTokenExpires: a token session's own
// lifetime may be longer than what is left of its token's; the token's
// expiry ends it.
func TestATokenSessionEndsWhenItsTokenExpires(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "laptop", Organization: "acme", Role: "viewer", ExpiresIn: "10h"})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := f.authenticate(c.Secret)
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(9 * time.Hour)
		secret, sess, err := sessions.Start(ctx, tp)
		if err != nil || !sess.ExpiresAt.Equal(start.Add(10*time.Hour)) {
			t.Fatalf("Start an hour before the token expires: %+v, %v", sess, err)
		}
		f.clock.Advance(time.Hour)
		p, err := f.authenticate(secret)
		wantUnauthenticated(t, "the token expired", p, err, "expired")
	})
}

// TestAnOIDCSessionActsAsItsSubject: a session started from an identity
// acts as its subject, named by its name (else its subject), a platform
// admin only while listed as one.
func TestAnOIDCSessionActsAsItsSubject(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		idExpiry := start.Add(time.Hour).Add(123 * time.Microsecond)
		for _, c := range []struct {
			p     *auth.Principal
			name  string
			admin bool
		}{
			{&auth.Principal{Kind: event.ActorHuman, Subject: "olga", ExpiresAt: idExpiry}, "olga", false},
			{&auth.Principal{Kind: event.ActorHuman, Subject: "root", Name: "Root Admin", PlatformAdmin: true}, "Root Admin", true},
		} {
			secret, sess, err := sessions.Start(ctx, c.p)
			if err != nil || sess.Source != auth.SourceOIDC || sess.Name != c.name || sess.TokenID != "" {
				t.Fatalf("Start(%s) = %+v, %v", c.p.Subject, sess, err)
			}
			if c.p.ExpiresAt.IsZero() != sess.ExpiresAt.Equal(start.Add(8*time.Hour)) {
				t.Errorf("%s: the session expires at %s", c.p.Subject, sess.ExpiresAt)
			}
			if !c.p.ExpiresAt.IsZero() && !sess.ExpiresAt.Equal(idExpiry.Truncate(time.Millisecond)) {
				t.Errorf("%s: the session expires at %s, want with its identity token, %s", c.p.Subject, sess.ExpiresAt, idExpiry)
			}
			p, err := f.authenticate(secret)
			if err != nil || p.Subject != c.p.Subject || p.Kind != event.ActorHuman || p.PlatformAdmin != c.admin || p.Name != c.name || p.SessionID != sess.ID {
				t.Errorf("the session of %s: %+v, %v", c.p.Subject, p, err)
			}
		}
		p, err := f.authenticate(auth.SessionPrefix + "nothing-like-this")
		wantUnauthenticated(t, "an unknown session", p, err, "unknown session")
	})
}

// TestSigningOutEndsThatSessionOnly: ending a session records
// session.ended once and leaves the others, and a credential that is no
// session has nothing to end.
func TestSigningOutEndsThatSessionOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		secrets := map[string]string{}
		for _, sub := range []string{"olga", "pia"} {
			secret, _, err := sessions.Start(ctx, &auth.Principal{Kind: event.ActorHuman, Subject: sub})
			if err != nil {
				t.Fatal(err)
			}
			secrets[sub] = secret
		}
		olga, err := f.authenticate(secrets["olga"])
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := sessions.End(ctx, olga); err != nil {
				t.Fatal(err)
			}
		}
		if err := sessions.End(ctx, &auth.Principal{Kind: event.ActorHuman, Subject: "olga"}); err != nil {
			t.Fatal(err)
		}
		p, err := f.authenticate(secrets["olga"])
		wantUnauthenticated(t, "a signed-out session", p, err, "session ended")
		if p, err := f.authenticate(secrets["pia"]); err != nil || p.Subject != "pia" {
			t.Errorf("another session after a sign-out: %+v, %v", p, err)
		}
		if got := strings.Join(sessionEvents(t, s), " "); got != "session.started session.started session.ended" {
			t.Errorf("events %s", got)
		}
	})
}

// TestASessionsLastUseIsWrittenAtMostOnceAMinute: each use a minute or
// more after the last one written moves last_seen_at; a use within the
// minute writes nothing.
func TestASessionsLastUseIsWrittenAtMostOnceAMinute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f, sessions := sessionFixture(t, s)
		secret, sess, err := sessions.Start(ctx, &auth.Principal{Kind: event.ActorHuman, Subject: "olga"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := sessions.Start(ctx, &auth.Principal{Kind: event.ActorHuman, Subject: "pia"}); err != nil {
			t.Fatal(err)
		}
		seen := func(id string) time.Time {
			t.Helper()
			rows, err := s.Query(ctx, `SELECT last_seen_at FROM sessions WHERE id = ?`, id)
			if err != nil || rows.Len() != 1 {
				t.Fatalf("read last_seen_at: %v", err)
			}
			var ms int64
			if err := rows.Scan(0, &ms); err != nil {
				t.Fatal(err)
			}
			return time.UnixMilli(ms).UTC()
		}
		for _, step := range []struct {
			advance time.Duration
			want    time.Time
		}{
			{time.Minute - time.Millisecond, start},
			{time.Millisecond, start.Add(time.Minute)},
			{30 * time.Second, start.Add(time.Minute)},
			{30 * time.Second, start.Add(2 * time.Minute)},
		} {
			f.clock.Advance(step.advance)
			if _, err := f.authenticate(secret); err != nil {
				t.Fatal(err)
			}
			if got := seen(sess.ID); !got.Equal(step.want) {
				t.Errorf("at %s: last seen %s, want %s", f.clock.Now().Sub(start), got.Sub(start), step.want.Sub(start))
			}
		}
		rows, err := s.Query(ctx, `SELECT MIN(last_seen_at) FROM sessions`)
		var ms int64
		if err != nil || rows.Scan(0, &ms) != nil || ms != start.UnixMilli() {
			t.Errorf("the other session's last use moved: %d %v", ms, err)
		}
	})
}
