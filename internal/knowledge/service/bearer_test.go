package service

import (
	"context"
	"testing"
)

// The Authorization scheme is case-insensitive (RFC 9110): the service
// accepts "bearer", "BEARER" and extra spaces (issue 23, finding 6: the
// service refused "bearer", so Core's proxy did).
func TestBearerSchemeAnyCase(t *testing.T) {
	tok := "knowledge-service-credential-0123456789abcdef"
	a := &Authenticator{ServiceToken: tok}
	for _, h := range []string{"Bearer " + tok, "bearer " + tok, "BEARER  " + tok, "bEaReR " + tok + " "} {
		p, err := a.Authenticate(context.Background(), h)
		if err != nil || p == nil || !p.Service {
			t.Errorf("%q: %v, %+v; want the service principal", h, err, p)
		}
	}
	for _, h := range []string{"Basic " + tok, "Bearer", "Bearer   ", tok} {
		if _, err := a.Authenticate(context.Background(), h); err == nil {
			t.Errorf("%q: accepted", h)
		}
	}
}
