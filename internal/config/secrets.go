package config

import (
	"fmt"

	"github.com/ballet/ballet/internal/secret"
)

// Secrets configures which secret references projects may use (a
// repository's credentials_ref and webhook_secret_ref).
type Secrets struct {
	// Allow lists what a platform admin made referable: patterns env:GLOB
	// (a variable of Core's environment) or file:/GLOB (a file on Core's
	// machine), '*' never crossing '/'. Empty (the default): no reference
	// resolves. Ballet's own credentials never resolve, whatever it says.
	Allow []string `toml:"allow"`
}

// MaxSecretPatterns bounds [secrets] allow.
const MaxSecretPatterns = 100

func (s Secrets) validate() []error {
	var errs []error
	if len(s.Allow) > MaxSecretPatterns {
		errs = append(errs, fmt.Errorf("secrets.allow: has %d patterns; at most %d", len(s.Allow), MaxSecretPatterns))
	}
	for _, p := range s.Allow {
		if err := secret.CheckPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("secrets.allow: %w", err))
		}
	}
	return errs
}
