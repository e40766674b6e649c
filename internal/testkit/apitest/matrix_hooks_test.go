package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Webhook deliveries authenticate by their signature with the project's
// webhook secret, never a bearer credential: every matrix role sends an
// unsigned delivery and gets 401 (the flow package's webhook tests sign).
func init() {
	Register("POST /api/v1/hooks/{forge}/{project}", Case{
		Prepare: fixed("/api/v1/hooks/gitea/ACME", map[string]any{"number": 1}),
		Want:    map[string]int{None: 401, Other: 401, Viewer: 401, Member: 401, Admin: 401, Platform: 401},
	})
}
