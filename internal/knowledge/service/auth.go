package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/credential"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/outbound"
)

// Roles, as Core names them (an organization's viewer, member, admin).
const (
	RoleViewer = "viewer"
	RoleMember = "member"
	RoleAdmin  = "admin"
)

var roleRank = map[string]int{RoleViewer: 1, RoleMember: 2, RoleAdmin: 3}

// Principal is who called, as Core's introspection described it (or the
// service credential itself).
type Principal struct {
	Subject       string
	Name          string
	Kind          string // event.ActorHuman or event.ActorService
	PlatformAdmin bool
	Orgs          map[string]string // organization slug → role
	// Service is the service credential: read-only on every organization.
	Service bool
}

// Role returns p's role in the organization ("" when it has none there,
// or the organization does not exist). Core's introspection lists every
// organization a platform admin may manage, so they need no exception
// here.
func (p *Principal) Role(org string) string {
	if p.Service {
		return RoleViewer
	}
	return p.Orgs[org]
}

// Actor is p as the event log records it.
func (p *Principal) Actor() event.Actor {
	return event.Actor{Kind: p.Kind, Sub: p.Subject}
}

// serviceSubject is the service credential's subject in the log (it only
// reads, so it never appears there).
const serviceSubject = "knowledge-service"

// IntrospectRequest is the body Core's introspection endpoint takes.
type IntrospectRequest struct {
	Credential string `json:"credential"`
}

// IntrospectOrg is one organization of an introspection answer.
type IntrospectOrg struct {
	Slug string `json:"slug"`
	ID   string `json:"id"`
	Role string `json:"role"`
}

// IntrospectResponse is Core's answer (ui-contract: POST
// /api/v1/internal/introspect).
type IntrospectResponse struct {
	Active        bool            `json:"active"`
	Subject       string          `json:"subject,omitempty"`
	Name          string          `json:"name,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	PlatformAdmin bool            `json:"platform_admin,omitempty"`
	Orgs          []IntrospectOrg `json:"orgs,omitempty"`
	// ExpiresAt is when the credential expires, if it does: the answer is
	// not used past it.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// IntrospectPath is Core's introspection endpoint.
const IntrospectPath = "/api/v1/internal/introspect"

// Authenticator resolves a request's bearer credential: the service
// credential itself, or whatever Core's introspection says, cached for at
// most TTL since Core answered. So a credential Core revoked stops working
// here within TTL; while Core cannot be reached, a cached answer serves
// until its TTL and an unknown credential gets 503.
type Authenticator struct {
	Core         string // Core's base URL
	ServiceToken string
	TTL          time.Duration
	// MaxEntries bounds the cache (10,000 when 0): past it the oldest
	// answers go first.
	MaxEntries int
	Client     *http.Client
	Clock      clock.Clock

	mu       sync.Mutex
	cache    map[[32]byte]cached
	inflight singleflight.Group // one introspection per credential at a time
}

type cached struct {
	p     *Principal // nil: inactive
	at    time.Time  // when Core answered
	until time.Time  // used before then: at + TTL, or the credential's expiry if sooner
}

// Authenticate resolves an Authorization header.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (*Principal, error) {
	cred, ok := credential.Bearer(header)
	if !ok {
		return nil, apperr.New(apperr.Unauthenticated, "send a bearer credential: Authorization: Bearer <token>")
	}
	if a.ServiceToken != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(a.ServiceToken)) == 1 {
		return &Principal{Subject: serviceSubject, Name: "Knowledge service credential", Kind: event.ActorService, Service: true}, nil
	}
	key := sha256.Sum256([]byte(cred))
	now := a.Clock.Now()
	a.mu.Lock()
	c, hit := a.cache[key]
	a.mu.Unlock()
	if !hit || !now.Before(c.until) {
		// Requests that arrive together with one new credential (a page's
		// first requests) share one call to Core, which no single caller's
		// going away cancels (the client's timeout bounds it).
		v, err, _ := a.inflight.Do(string(key[:]), func() (any, error) {
			p, expires, err := a.introspect(context.WithoutCancel(ctx), cred)
			if err != nil {
				return nil, err
			}
			c := cached{p: p, at: now, until: now.Add(a.TTL)}
			if expires != nil && expires.Before(c.until) {
				c.until = *expires
			}
			a.put(key, c)
			return c, nil
		})
		if err != nil {
			return nil, err
		}
		c = v.(cached)
	}
	if c.p == nil {
		return nil, apperr.New(apperr.Unauthenticated, "the credential is not valid (unknown, expired or revoked)")
	}
	return c.p, nil
}

func (a *Authenticator) put(key [32]byte, c cached) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache == nil {
		a.cache = map[[32]byte]cached{}
	}
	limit := a.MaxEntries
	if limit <= 0 {
		limit = 10000
	}
	if len(a.cache) >= limit {
		// Drop what has expired; if that is not enough, the oldest.
		var oldest [32]byte
		var oldestAt time.Time
		for k, v := range a.cache {
			if !c.at.Before(v.until) {
				delete(a.cache, k)
				continue
			}
			if oldestAt.IsZero() || v.at.Before(oldestAt) {
				oldest, oldestAt = k, v.at
			}
		}
		if len(a.cache) >= limit {
			delete(a.cache, oldest)
		}
	}
	a.cache[key] = c
}

// introspect asks Core about cred: the principal and when the credential
// expires (nil: it does not say), a nil principal when Core says the
// credential is not active, an Unavailable error when Core cannot answer.
func (a *Authenticator) introspect(ctx context.Context, cred string) (*Principal, *time.Time, error) {
	body, _ := json.Marshal(IntrospectRequest{Credential: cred})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.Core, "/")+IntrospectPath, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("introspection request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.ServiceToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := outbound.Guard(a.Client).Do(req) // the service credential never follows a redirect
	if err != nil {
		return nil, nil, apperr.New(apperr.Unavailable, "Core cannot be reached to check the credential; try again shortly")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, apperr.New(apperr.Unavailable, "Core's answer about the credential broke off; try again shortly")
	}
	if resp.StatusCode != http.StatusOK {
		// 401/403 here mean the service credential itself is wrong: an
		// operator's problem, not the caller's.
		return nil, nil, apperr.New(apperr.Unavailable, "Core's introspection answered %d; try again shortly", resp.StatusCode)
	}
	var r IntrospectResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, nil, apperr.New(apperr.Unavailable, "Core's introspection answer is not JSON: %v", err)
	}
	if !r.Active {
		return nil, nil, nil
	}
	p := &Principal{Subject: r.Subject, Name: r.Name, Kind: r.Kind, PlatformAdmin: r.PlatformAdmin, Orgs: map[string]string{}}
	if p.Kind != event.ActorHuman {
		p.Kind = event.ActorService
	}
	for _, o := range r.Orgs {
		if roleRank[o.Role] > 0 {
			p.Orgs[o.Slug] = o.Role
		}
	}
	return p, r.ExpiresAt, nil
}
