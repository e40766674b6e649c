package apitest_test

import (
	"github.com/ballet/ballet/internal/testkit/apitest"
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

// The tenancy checks of the mail's reads: a person's own settings, and the
// platform's mail status (platform admins).
func init() {
	coreReads["GET /api/v1/me/notifications"] = tenancyRead{path: fixedPath("/api/v1/me/notifications"),
		neutral: "the caller's own settings: no organization's row"}
	coreReads["GET /api/v1/platform/mail"] = tenancyRead{path: fixedPath("/api/v1/platform/mail"),
		token:   func(*tenant) string { return apitest.BootstrapToken },
		neutral: "the platform's mail counts, read by the platform admin: no organization's row"}
}
