// Package credential reads the credential of an Authorization header: the
// one parser of the Bearer scheme, shared by Core and the Knowledge service
// (a leaf: any package may use it).
package credential

import "strings"

// Bearer parses an Authorization header value carrying a bearer
// credential: the scheme "Bearer" in any case (RFC 9110 §11.1: schemes are
// case-insensitive), one or more spaces, then the credential, trimmed. ok
// is false for another scheme or an empty credential. It is the one parser
// of the scheme: Core's API, realtime, the runner protocol, the Knowledge
// proxy and the Knowledge service all read the header through it.
func Bearer(header string) (credential string, ok bool) {
	scheme, cred, found := strings.Cut(strings.TrimLeft(header, " "), " ")
	cred = strings.TrimSpace(cred)
	if !found || !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return "", false
	}
	return cred, true
}
