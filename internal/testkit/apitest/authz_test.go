package apitest_test

import (
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestAuthorizationMatrix: every endpoint × role (none, viewer, member,
// admin, another organization's admin, platform admin) gets exactly the
// status its case names, on both engines.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		apitest.RunMatrix(t, s)
	})
}
