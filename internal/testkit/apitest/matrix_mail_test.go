package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Mail routes: a caller's own notification settings, for any credential;
// the mail status only for platform admins.
func init() {
	Register("GET /api/v1/me/notifications", Case{Prepare: fixed("/api/v1/me/notifications", nil), Want: AnyOK(200)})
	Register("PUT /api/v1/me/notifications", Case{Prepare: fixed("/api/v1/me/notifications", map[string]any{"time_zone": "Europe/Paris"}),
		Want: AnyOK(200)})
	Register("GET /api/v1/platform/mail", Case{Prepare: fixed("/api/v1/platform/mail", nil), Want: PlatformOK(200)})
}
