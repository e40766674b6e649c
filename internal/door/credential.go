package door

import (
	"net/http"
	"strings"

	"github.com/ballet/ballet/internal/auth"
)

// Credential returns the request's credential as an Authorization header
// value: the header itself, else the browser session cookie as a bearer
// (cookie = true). A request with both acts with the header. The cookie
// carries sessions only: any other credential in it is ignored.
func Credential(hr *http.Request) (header string, cookie bool) {
	if h := hr.Header.Get("Authorization"); h != "" {
		return h, false
	}
	if c, err := hr.Cookie(auth.SessionCookie); err == nil && strings.HasPrefix(c.Value, auth.SessionPrefix) {
		return "Bearer " + c.Value, true
	}
	return "", false
}
