// Package outbound holds the one rule for Ballet's HTTP clients that carry
// a credential (the Knowledge client, the forges' API clients, the runner's
// client of Core, the OIDC sign-in, the up command's health checks): they
// never follow a redirect. A redirect would send the credential (Go keeps
// Authorization on a same-host redirect, and a transport adding its own
// header sees every hop) to a path or host the caller never chose; the
// caller sees the 3xx answer instead and treats it as an error.
package outbound

import (
	"net/http"
	"time"
)

// NoRedirect is an http.Client's CheckRedirect that stops at the first
// redirect: the client returns the 3xx answer itself.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client returns an http.Client with timeout that never follows a
// redirect (Go's default transport).
func Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, CheckRedirect: NoRedirect}
}

// Guard returns a copy of c (a fresh client when nil) that never follows a
// redirect, whatever c's own CheckRedirect: a caller holding a credential
// must not follow any.
func Guard(c *http.Client) *http.Client {
	if c == nil {
		return Client(0)
	}
	g := *c
	g.CheckRedirect = NoRedirect
	return &g
}
