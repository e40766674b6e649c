package auth

import (
	"encoding/json"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Token is an issued opaque token as stored (never with its secret).
type Token struct {
	ID             string     `json:"id"`
	Kind           string     `json:"kind"`
	Name           string     `json:"name"`
	Subject        string     `json:"subject"`
	ActingFor      string     `json:"acting_for,omitempty"`
	OrganizationID string     `json:"organization_id,omitempty"`
	Role           string     `json:"role,omitempty"`
	Scopes         []string   `json:"scopes"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	RevokedAt      *time.Time `json:"revoked_at,omitempty"`
	CreatedBy      string     `json:"created_by"`
	CreatedAt      time.Time  `json:"created_at"`
	Version        int64      `json:"version"`
}

// TokenCreated is the payload of token.created: the token (no secret, no
// hash).
type TokenCreated Token

// TokenRevoked is the payload of token.revoked.
type TokenRevoked struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// SessionStarted is the payload of session.started: the session as stored
// (never its value).
type SessionStarted BrowserSession

func (TokenCreated) EventType() string   { return "token.created" }
func (TokenRevoked) EventType() string   { return "token.revoked" }
func (SessionStarted) EventType() string { return "session.started" }
func (SessionEnded) EventType() string   { return "session.ended" }

// Events are the payload types of the events tokens and sessions write.
var Events = []event.Payload{TokenCreated{}, TokenRevoked{}, SessionStarted{}, SessionEnded{}}

// Issue returns a new token's secret, its record and the transition that
// stores it (hashed) with its token.created event. The subject of an API
// token is "token:<id>"; it acts for its creator.
func Issue(actor event.Actor, kind, name, orgID, role string, scopes []string, expiresAt *time.Time, now time.Time) (string, Token, *transition.Transition) {
	secret, hash := NewSecret()
	id := transition.NewID()
	if scopes == nil {
		scopes = []string{}
	}
	t := Token{ID: id, Kind: kind, Name: name, Subject: "token:" + id, ActingFor: actor.Sub, OrganizationID: orgID, Role: role,
		Scopes: scopes, ExpiresAt: expiresAt, CreatedBy: actor.Sub, CreatedAt: now, Version: 1}
	sc, _ := json.Marshal(scopes)
	var exp any
	if expiresAt != nil {
		exp = expiresAt.UnixMilli()
	}
	e := event.Of(actor, orgID, "", id, TokenCreated(t)) // no secret, no hash
	return secret, t, &transition.Transition{
		Events: []event.Event{e},
		Statements: []store.Statement{store.Stmt(`INSERT INTO tokens (id, hash, kind, name, subject, acting_for, organization_id, role, scopes,
expires_at, revoked_at, created_by, created_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, 1)`,
			id, hash, kind, name, t.Subject, nullable(t.ActingFor), nullable(orgID), nullable(role), string(sc), exp, actor.Sub, now.UnixMilli())},
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
