package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// The introspection endpoint takes only the Knowledge service credential:
// every user credential of the matrix gets 401 (knowledge_test.go calls it
// with the service credential).
func init() {
	Register("POST /api/v1/internal/introspect", Case{
		Prepare: fixed("/api/v1/internal/introspect", map[string]any{"credential": BootstrapToken}),
		Want:    map[string]int{None: 401, Other: 401, Viewer: 401, Member: 401, Admin: 401, Platform: 401},
	})
}
