package config

import (
	"github.com/ballet/ballet/internal/secret"
)

// Secrets configures which secret references projects may use (a
// repository's credentials_ref and webhook_secret_ref).
type Secrets struct {
	// Allow lists what a platform admin made referable: patterns env:GLOB
	// (a variable of Core's environment) or file:/GLOB (a file on Core's
	// machine), '*' never crossing '/', naming the project's organization
	// at most once as {ORG} (env: the slug upper case, '-' as '_') or
	// {org} (file: the slug, a whole path component); a pattern without it
	// is a credential every organization may use. Empty (the default): no
	// reference resolves. Ballet's own credentials never resolve, whatever it says.
	Allow []string `toml:"allow"`
}

// MaxSecretPatterns bounds [secrets] allow.
const MaxSecretPatterns = 100

func (s Secrets) validate(p *problems) {
	if len(s.Allow) > MaxSecretPatterns {
		p.bad("allow", "has %d patterns; at most %d", len(s.Allow), MaxSecretPatterns)
	}
	for _, pat := range s.Allow {
		if err := secret.CheckPattern(pat); err != nil {
			p.bad("allow", "%v", err)
		}
	}
}
