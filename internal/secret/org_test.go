package secret

import (
	"errors"
	"strings"
	"testing"
)

// TestOrgPlaceholderKeepsEachOrganizationToItsOwn: with a pattern holding
// the organization's placeholder, acme's reference to globex's credential
// is refused at save and at use (the cross-tenant theft of issue 23), and
// each organization resolves its own.
func TestOrgPlaceholderKeepsEachOrganizationToItsOwn(t *testing.T) {
	t.Parallel()
	p := &Policy{Allow: []string{"env:GITEA_{ORG}_TOKEN", "file:/etc/ballet/forge/{org}/*"},
		LookupEnv: env(map[string]string{"GITEA_GLOBEX_TOKEN": "globex-secret", "GITEA_ACME_TOKEN": "acme-secret", "GITEA_ACME_X_TOKEN": "acmex-secret"})}
	for _, c := range []struct{ org, ref string }{
		{"acme", "env:GITEA_GLOBEX_TOKEN"},
		{"globex", "env:GITEA_ACME_TOKEN"},
		{"acme", "env:GITEA_ACME_X_TOKEN"}, // acme-x's
		{"acme-x", "env:GITEA_ACME_TOKEN"},
		{"acme", "file:/etc/ballet/forge/globex/token"},
		{"acme", "file:/etc/ballet/forge/acme-x/token"},
		{"acme", "file:/etc/ballet/forge/acme/sub/token"}, // '*' never crosses '/'
		{"", "env:GITEA_ACME_TOKEN"},
		{"acme", "env:GITEA_acme_TOKEN"},
	} {
		if err := p.Check(c.org, c.ref); !errors.Is(err, ErrRefused) {
			t.Errorf("Check(%q, %q) = %v, want refused", c.org, c.ref, err)
		}
		if v, err := p.Resolve(c.org, c.ref); !errors.Is(err, ErrRefused) || v != "" {
			t.Errorf("Resolve(%q, %q) = %q, %v, want refused", c.org, c.ref, v, err)
		}
	}
	for org, want := range map[string]string{"acme": "acme-secret", "globex": "globex-secret", "acme-x": "acmex-secret"} {
		if v, err := p.Resolve(org, "env:GITEA_"+EnvSlug(org)+"_TOKEN"); err != nil || v != want {
			t.Errorf("%s: %q, %v", org, v, err)
		}
	}
	if err := p.Check("acme-x", "file:/etc/ballet/forge/acme-x/token"); err != nil {
		t.Errorf("acme-x's own file: %v", err)
	}
}

// TestOrgNamesOutrankSharedPatterns: a name a placeholder pattern gives to
// an organization stays that organization's even where a shared pattern
// (without the placeholder) matches it; other names under the shared
// pattern are every organization's.
func TestOrgNamesOutrankSharedPatterns(t *testing.T) {
	t.Parallel()
	p := &Policy{Allow: []string{"env:GITEA_*", "env:GITEA_{ORG}_TOKEN"}}
	err := p.Check("acme", "env:GITEA_GLOBEX_TOKEN")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `organization "globex"`) {
		t.Fatalf("acme → globex's token under a shared pattern: %v", err)
	}
	for _, org := range []string{"acme", "globex"} {
		if err := p.Check(org, "env:GITEA_SHARED_CA"); err != nil {
			t.Errorf("%s: a shared credential: %v", org, err)
		}
	}
}

// TestOrgPlaceholderAmbiguity: two placeholder patterns that give one
// name to two organizations give it to neither.
func TestOrgPlaceholderAmbiguity(t *testing.T) {
	t.Parallel()
	// GITEA_ACME_X_TOKEN: acme-x's by the first, acme's by the second.
	p := &Policy{Allow: []string{"env:GITEA_{ORG}_TOKEN", "env:GITEA_{ORG}_X_TOKEN"}}
	for _, org := range []string{"acme", "acme-x"} {
		if err := p.Check(org, "env:GITEA_ACME_X_TOKEN"); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: an ambiguous name: %v", org, err)
		}
	}
	if err := p.Check("acme", "env:GITEA_ACME_TOKEN"); err != nil {
		t.Errorf("acme's unambiguous name: %v", err)
	}
}

// TestCheckPatternPlaceholder: the placeholder once, in the name, never
// after (env) or before (both) a wildcard that could reach another
// organization's names, a whole component in file patterns.
func TestCheckPatternPlaceholder(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"env:GITEA_{ORG}_TOKEN", "env:{ORG}", "env:GITEA_{ORG}", "file:/etc/ballet/forge/{org}/*",
		"file:/etc/ballet/forge/{org}", "file:/etc/ballet/{org}/forge/t[a-z]*"} {
		if err := CheckPattern(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"env:GITEA_{ORG}_*":                "no wildcard may follow",
		"env:GITEA_{ORG}?":                 "no wildcard may follow",
		"env:*_{ORG}_TOKEN":                "no wildcard may come before",
		"env:{ORG}_{ORG}":                  "at most once",
		"env:GITEA_{org}_TOKEN":            "write the organization as {ORG}",
		"file:/etc/{ORG}/x":                "write the organization as {org}",
		"file:/etc/ballet/forge/{org}*":    "whole path component",
		"file:/etc/ballet/forge/{org}-x/t": "whole path component",
		"file:/etc/*/{org}/t":              "no wildcard may come before",
		"file:/etc/ballet/{org}/{org}/t":   "at most once",
		"{ORG}:GITEA":                      "must be env:PATTERN",
	} {
		if err := CheckPattern(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", p, err, want)
		}
	}
}

// TestEnvSlug: one to one between slugs and their variable form.
func TestEnvSlug(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"acme", "acme-x", "a-b-c", "x9-0"} {
		if got := slugOfEnv(EnvSlug(s)); got != s {
			t.Errorf("%q → %q → %q", s, EnvSlug(s), got)
		}
	}
	for _, s := range []string{"", "_A", "A_", "a", "A-B"} {
		if got := slugOfEnv(s); got != "" {
			t.Errorf("slugOfEnv(%q) = %q", s, got)
		}
	}
}
