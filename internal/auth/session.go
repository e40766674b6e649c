package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Browser sessions. A person signs in once (with the bootstrap token, an
// API token or through the OIDC issuer) and the browser then carries an
// opaque session value in the SessionCookie cookie: Ballet stores only its
// hash (the sessions table, so every Core instance honours it), and on each
// use the session acts as the credential that started it, re-checked:
//
//   - from an API token: that token, capped by its creator as ever, until
//     the token is revoked or expires (its revocation also ends the
//     session's row, in the token.revoked batch);
//   - from the bootstrap token: a platform admin, until the bootstrap token
//     changes;
//   - from an OIDC identity: that subject (a platform admin while listed in
//     [auth] platform_admins).
//
// A session's lifetime is absolute: [auth] session_ttl from sign-in, never
// extended by use, and never beyond its credential's expiry. Starting and
// ending one are events (session.started, session.ended); last_seen_at is
// an operational column, written at most once a minute, without an event.

// SessionCookie is the cookie that carries a browser session.
const SessionCookie = "ballet_session"

// SessionPrefix starts every session value (and no other credential).
const SessionPrefix = "ballet-session_"

// Session sources: the credential a session acts as.
const (
	SourceBootstrap = "bootstrap"
	SourceToken     = "token"
	SourceOIDC      = "oidc"
)

// lastSeenEvery is how stale last_seen_at may get before a use writes it.
const lastSeenEvery = time.Minute

// BrowserSession is a browser session as stored (never with its value).
type BrowserSession struct {
	ID            string    `json:"id"`
	Source        string    `json:"source"` // bootstrap, token or oidc
	Subject       string    `json:"subject"`
	Kind          string    `json:"kind"` // human or service
	Name          string    `json:"name"`
	PlatformAdmin bool      `json:"platform_admin"`
	TokenID       string    `json:"token_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// SessionEnded is the payload of session.ended.
type SessionEnded struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"` // signed_out
}

// Sessions starts and ends browser sessions.
type Sessions struct {
	Auth    *Authenticator
	Applier *transition.Applier
	// TTL is a session's lifetime ([auth] session_ttl).
	TTL time.Duration
}

// newSessionSecret returns a fresh session value and the hash to store.
func newSessionSecret() (secret, hash string) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	secret = SessionPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, Hash(secret)
}

// Start starts a session acting as p (who just presented its credential)
// and returns its value, shown only this once. Sessions, runner and run
// tokens cannot start one.
func (s *Sessions) Start(ctx context.Context, p *Principal) (string, BrowserSession, error) {
	a := s.Auth
	now := a.clock.Now().Truncate(time.Millisecond)
	sess := BrowserSession{ID: transition.NewID(), Subject: p.Subject, Kind: p.Kind, Name: p.Name, PlatformAdmin: p.PlatformAdmin,
		CreatedAt: now, ExpiresAt: now.Add(s.TTL)}
	var sourceHash any
	switch {
	case p.SessionID != "":
		return "", BrowserSession{}, apperr.Fields([]apperr.FieldError{{Field: "token", Message: "is a session: sign in with a bootstrap or API token"}})
	case p.TokenID != "" && p.TokenKind != KindAPI:
		return "", BrowserSession{}, apperr.New(apperr.Forbidden, "a %s token cannot sign in: use an API token", p.TokenKind)
	case p.TokenID != "":
		sess.Source, sess.TokenID = SourceToken, p.TokenID
	case p.Subject == BootstrapSubject:
		sess.Source, sourceHash = SourceBootstrap, Hash(a.bootstrap)
	default:
		sess.Source = SourceOIDC
	}
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Before(sess.ExpiresAt) {
		sess.ExpiresAt = p.ExpiresAt.Truncate(time.Millisecond)
	}
	if sess.Name == "" {
		sess.Name = p.Subject
	}
	secret, hash := newSessionSecret()
	e := event.Of(p.Actor(), "", "", sess.ID, SessionStarted(sess))
	t := &transition.Transition{Events: []event.Event{e}, Statements: []store.Statement{store.Stmt(`INSERT INTO sessions (id, hash, source,
subject, kind, name, platform_admin, token_id, source_hash, created_at, expires_at, last_seen_at, ended_at, version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 1)`, sess.ID, hash, sess.Source, sess.Subject, sess.Kind, sess.Name, p.PlatformAdmin,
		nullable(sess.TokenID), sourceHash, now.UnixMilli(), sess.ExpiresAt.UnixMilli(), now.UnixMilli())}}
	if err := s.Applier.Apply(ctx, t); err != nil {
		return "", BrowserSession{}, fmt.Errorf("start session: %w", err)
	}
	return secret, sess, nil
}

// End ends p's session (signed out). Ending an ended session, or a
// credential that is no session, changes nothing.
func (s *Sessions) End(ctx context.Context, p *Principal) error {
	if p.SessionID == "" {
		return nil
	}
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		rows, err := s.Auth.store.Query(ctx, `SELECT subject, COALESCE(ended_at, 0), version FROM sessions WHERE id = ?`, p.SessionID)
		if err != nil {
			return nil, fmt.Errorf("read session: %w", err)
		}
		if rows.Len() == 0 {
			return nil, nil
		}
		var subject string
		var ended, version int64
		if err := rows.Scan(0, &subject, &ended, &version); err != nil {
			return nil, err
		}
		if ended != 0 {
			return nil, nil
		}
		now := s.Auth.clock.Now().Truncate(time.Millisecond)
		e := event.Of(p.Actor(), "", "", p.SessionID, SessionEnded{ID: p.SessionID, Subject: subject, Reason: "signed_out"})
		return &transition.Transition{Events: []event.Event{e}, Guarded: []store.Statement{store.Stmt(
			`UPDATE sessions SET ended_at = ?, version = version + 1 WHERE id = ? AND version = ?`, now.UnixMilli(), p.SessionID, version)}}, nil
	})
	return err
}

// session authenticates a session value: the credential that started it,
// re-checked now, as the session.
func (a *Authenticator) session(ctx context.Context, secret string) (*Principal, error) {
	rows, err := a.store.Query(ctx, `SELECT id, source, subject, name, COALESCE(token_id, ''), COALESCE(source_hash, ''), expires_at, last_seen_at,
COALESCE(ended_at, 0) FROM sessions WHERE hash = ?`, Hash(secret))
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if rows.Len() == 0 {
		return nil, unauthenticated("unknown session: sign in again")
	}
	var id, source, subject, name, tokenID, sourceHash string
	var expires, seen, ended int64
	if err := rows.Scan(0, &id, &source, &subject, &name, &tokenID, &sourceHash, &expires, &seen, &ended); err != nil {
		return nil, err
	}
	now := a.clock.Now()
	switch {
	case ended != 0:
		return nil, unauthenticated("session ended: sign in again")
	case now.UnixMilli() >= expires:
		return nil, unauthenticated("session expired: sign in again")
	}
	var p *Principal
	switch source {
	case SourceToken:
		if p, err = a.load(ctx, `id = ?`, tokenID); err == nil {
			p, err = a.tokenPrincipal(ctx, p)
		}
		if err != nil {
			if apperr.Code(err) == apperr.Unauthenticated {
				var ae *apperr.Error
				_ = errors.As(err, &ae)
				return nil, unauthenticated("session ended: the token it was started with is no longer valid (%s)", ae.Message)
			}
			return nil, err
		}
	case SourceBootstrap:
		if a.bootstrap == "" || subtle.ConstantTimeCompare([]byte(Hash(a.bootstrap)), []byte(sourceHash)) != 1 {
			return nil, unauthenticated("session ended: the bootstrap token it was started with has changed")
		}
		p = &Principal{Kind: event.ActorHuman, Subject: BootstrapSubject, PlatformAdmin: true}
	case SourceOIDC:
		p = &Principal{Kind: event.ActorHuman, Subject: subject, PlatformAdmin: a.IsPlatformAdmin(subject)}
	default:
		return nil, fmt.Errorf("session %s: unknown source %q", id, source)
	}
	p.SessionID, p.Name = id, name
	if exp := time.UnixMilli(expires).UTC(); p.ExpiresAt.IsZero() || exp.Before(p.ExpiresAt) {
		p.ExpiresAt = exp
	}
	if now.Sub(time.UnixMilli(seen)) >= lastSeenEvery {
		if _, err := a.store.Exec(ctx, store.Stmt(`UPDATE sessions SET last_seen_at = MAX(last_seen_at, ?) WHERE id = ?`, now.UnixMilli(), id)); err != nil {
			return nil, fmt.Errorf("touch session %s: %w", id, err)
		}
	}
	return p, nil
}
