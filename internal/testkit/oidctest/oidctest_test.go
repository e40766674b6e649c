package oidctest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/ballet/ballet/internal/testkit/oidctest"
)

// TestIssuerWithGoOIDC checks the issuer against the relying-party library
// Core uses: discovery, keys, a valid token, and each kind of bad token.
func TestIssuerWithGoOIDC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	iss := oidctest.New(t)
	p, err := oidc.NewProvider(ctx, iss.URL)
	if err != nil {
		t.Fatal(err)
	}
	v := p.Verifier(&oidc.Config{ClientID: iss.Audience})
	tok, err := v.Verify(ctx, iss.Token(t, "alice"))
	if err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if tok.Subject != "alice" {
		t.Errorf("subject %q", tok.Subject)
	}
	for name, c := range map[string]struct {
		opt  oidctest.Option
		want string
	}{
		"expired":       {oidctest.Expired(), "expired"},
		"audience":      {oidctest.Audience("someone-else"), "audience"},
		"issuer":        {oidctest.IssuedBy("http://127.0.0.1:1/elsewhere"), "issued by a different provider"},
		"bad signature": {oidctest.BadSignature(), "signature"},
		"tampered":      {oidctest.Tampered(), "signature"},
	} {
		_, err := v.Verify(ctx, iss.Token(t, "alice", c.opt))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one mentioning %q", name, err, c.want)
		}
	}
	c, err := oidctest.Claims(iss.Token(t, "bob", oidctest.Claim("email", "bob@example.com")))
	if err != nil || c["sub"] != "bob" || c["email"] != "bob@example.com" {
		t.Errorf("claims %v, %v", c, err)
	}
}

func TestIssuerStopStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	iss := oidctest.New(t)
	iss.Stop()
	if _, err := oidc.NewProvider(ctx, iss.URL); err == nil {
		t.Fatal("discovery succeeded while the issuer was stopped")
	}
	iss.Start()
	if _, err := oidc.NewProvider(ctx, iss.URL); err != nil {
		t.Fatalf("after Start: %v", err)
	}
	if iss.Requests() != 1 {
		t.Errorf("requests %d, want 1", iss.Requests())
	}
}
