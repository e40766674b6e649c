package flow

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/tenancy"
)

// orgsOf is a ProjectSource that knows organizations only.
type orgsOf map[string]string // id → slug

func (orgsOf) FindProject(context.Context, string) (tenancy.Project, error) {
	return tenancy.Project{}, errors.New("not here")
}

func (o orgsOf) FindOrganization(_ context.Context, id string) (tenancy.Organization, error) {
	return tenancy.Organization{ID: id, Slug: o[id]}, nil
}

// TestASessionGetsOnlyItsOrganizationsCredential: a run of acme's project
// whose credentials_ref names globex's token (under
// env:GITEA_{ORG}_TOKEN, and a shared env:GITEA_* beside it) is
// unrunnable, naming the field, and the session carries no credential;
// globex's project gets it.
func TestASessionGetsOnlyItsOrganizationsCredential(t *testing.T) {
	s := &Sessions{Projects: orgsOf{"o-acme": "acme", "o-globex": "globex"},
		Secrets: &secret.Policy{Allow: []string{"env:GITEA_*", "env:GITEA_{ORG}_TOKEN"},
			LookupEnv: func(string) (string, bool) { return "globex-token-0123456789", true }}}
	proj := func(org string) tenancy.Project {
		return tenancy.Project{Key: "P", OrganizationID: org, Repository: &tenancy.Repository{Forge: "gitea",
			URL: "https://evil.example.com/x/y", CredentialsRef: "env:GITEA_GLOBEX_TOKEN"}}
	}
	c, err := s.credential(context.Background(), proj("o-acme"))
	if !errors.Is(err, run.ErrUnrunnable) || !strings.Contains(err.Error(), "repository.credentials_ref") ||
		!strings.Contains(err.Error(), "refused") || c != nil {
		t.Fatalf("acme's session with globex's credential: %v, %v; want unrunnable, refused, naming the field", c, err)
	}
	if c, err := s.credential(context.Background(), proj("o-globex")); err != nil || c == nil || c.Secret != "globex-token-0123456789" {
		t.Fatalf("globex's own: %v, %v", c, err)
	}
}
