package apitest_test

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestFieldErrorsLimited: a body with a long list of bad entries (here
// 100,000 ticket types) answers with the first problems and their count,
// not with one problem per entry. The body is refused before anything is
// stored, so one engine is enough.
func TestFieldErrorsLimited(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, storetest.Open(t, "sqlite"))
	e.Org("acme")
	types := make([]string, 100_000)
	for i := range types {
		types[i] = "X"
	}
	var bad struct {
		Error struct {
			Message string
			Details []apperr.FieldError
		}
	}
	e.Admin(400, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme", "ticket_types": types}).JSON(t, &bad)
	if len(bad.Error.Details) != apperr.MaxFieldErrors || bad.Error.Details[0].Field != "ticket_types" ||
		!strings.HasSuffix(bad.Error.Message, "invalid fields; the first 100 are listed") {
		t.Fatalf("%d problems: %s", len(bad.Error.Details), bad.Error.Message)
	}
}
