package forge

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/text"
)

// Forge kinds, as a project's repository names them.
const (
	KindGit    = "git"
	KindGitea  = "gitea"
	KindGitHub = "github"
)

// Kinds lists every forge kind a project's repository may name.
var Kinds = []string{KindGit, KindGitea, KindGitHub}

// MaxLocation bounds a repository location, in bytes.
const MaxLocation = 2000

// Locations git may be given: these and nothing else reach a git command
// line (gitforge also allows git only these transports).
//
//   - an absolute local path: /srv/git/acme.git
//   - file:///srv/git/acme.git (host empty or localhost)
//   - https://host/path and http://host/path, without credentials (those
//     belong in the credentials reference, not in a URL every viewer reads)
//   - ssh://[user@]host[:port]/path
//   - scp-like [user@]host:path, as git reads it (no '/' before the ':')
//
// Refused: relative paths; other schemes — git:// (unauthenticated: whoever
// sits on the network could answer whether a branch is merged), ftp…; git's
// remote-helper syntax transport::address (ext::sh -c … runs a command, fd::
// reads a descriptor); anything starting with '-', which git or ssh would
// read as an option (-oProxyCommand=…, --upload-pack=…), in the location or
// in its host or user; control characters.
//
// Gitea and GitHub take the repository's clone URL: https:// or http://,
// without credentials, whose path ends in owner/repo (with or without
// .git): https://gitea.example.com/acme/app.git.
func CheckLocation(kind, location string) error {
	switch {
	case location == "":
		return fmt.Errorf("must name the repository")
	case len(location) > MaxLocation:
		return fmt.Errorf("must be at most %d bytes", MaxLocation)
	case strings.HasPrefix(location, "-"):
		return fmt.Errorf("%q starts with '-', which git would read as an option", location)
	case strings.TrimSpace(location) != location:
		return fmt.Errorf("%q starts or ends with white space", location)
	}
	if err := text.Line(location); err != nil {
		return err
	}
	if m := helperRE.FindStringSubmatch(location); m != nil {
		return fmt.Errorf("%q uses git's remote-helper syntax (%s::…), which can run commands: use a path or an http(s)/ssh URL", location, m[1])
	}
	switch kind {
	case KindGit:
		return checkGitLocation(location)
	case KindGitea, KindGitHub:
		u, err := url.Parse(location)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%q must be the repository's http(s) URL", location)
		}
		if err := checkURL(u, location); err != nil {
			return err
		}
		if _, _, ok := OwnerRepo(u.Path); !ok || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%q must be the repository's clone URL, http(s)://host/owner/repo (with or without .git)", location)
		}
		return nil
	}
	return fmt.Errorf("the forge %q is not git, gitea or github", kind)
}

var (
	helperRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)::`)
	// scpRE is git's scp-like syntax: [user@]host:path.
	scpRE = regexp.MustCompile(`^(?:([^@/:]+)@)?([^@/:\[\]]+|\[[0-9A-Fa-f:.]+\]):(.+)$`)
	// nameRE is a host or user name that no program can read as an option.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._~+-]*$`)
	hostRE = regexp.MustCompile(`^(?:[A-Za-z0-9_][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\])$`)
)

// OwnerRepo splits the path of a Gitea or GitHub clone URL into the
// repository's owner and name: its last two parts, without a trailing
// ".git" or "/" (a forge served under a sub-path has more parts before).
func OwnerRepo(path string) (owner, repo string, ok bool) {
	p := strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) < 2 {
		return "", "", false
	}
	for _, s := range parts {
		if s == "" || s == "." || s == ".." {
			return "", "", false
		}
	}
	return parts[len(parts)-2], parts[len(parts)-1], true
}

// CheckAPIURL checks a repository's API base override: "" (derived from
// the repository's URL) or an http(s) URL without credentials, query or
// fragment, such as https://github.example.com/api/v3.
func CheckAPIURL(api string) error {
	if api == "" {
		return nil
	}
	if len(api) > MaxLocation {
		return fmt.Errorf("must be at most %d bytes", MaxLocation)
	}
	if err := text.Line(api); err != nil {
		return err
	}
	u, err := url.Parse(api)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("%q must be an http(s) URL such as https://gitea.example.com/api/v1, without a query", api)
	}
	return checkURL(u, api)
}

func checkGitLocation(location string) error {
	if strings.HasPrefix(location, "/") {
		return nil // an absolute local path
	}
	if strings.Contains(location, "://") {
		u, err := url.Parse(location)
		if err != nil {
			return fmt.Errorf("%q is not a valid URL: %v", location, err)
		}
		switch u.Scheme {
		case "file":
			if (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") || u.User != nil {
				return fmt.Errorf("%q must be file:///absolute/path", location)
			}
			return nil
		case "http", "https", "ssh":
			if u.Host == "" || (u.Path == "" || u.Path == "/") {
				return fmt.Errorf("%q must name a host and the repository's path", location)
			}
			return checkURL(u, location)
		}
		return fmt.Errorf("%q: the %s:// transport is not allowed; use a path, file://, http(s)://, ssh:// or user@host:path", location, u.Scheme)
	}
	m := scpRE.FindStringSubmatch(location)
	if m == nil {
		return fmt.Errorf("%q must be an absolute path, a file://, http(s):// or ssh:// URL, or user@host:path", location)
	}
	if m[1] != "" && !nameRE.MatchString(m[1]) {
		return fmt.Errorf("%q: the user %q is not a plain user name", location, m[1])
	}
	if !hostRE.MatchString(m[2]) {
		return fmt.Errorf("%q: the host %q is not a plain host name", location, m[2])
	}
	return nil
}

// checkURL refuses credentials and option-like hosts and users in an
// http(s) or ssh URL.
func checkURL(u *url.URL, location string) error {
	if h := u.Hostname(); !nameRE.MatchString(h) && net.ParseIP(h) == nil {
		return fmt.Errorf("%q: the host %q is not a plain host name", location, h)
	}
	if u.User == nil {
		return nil
	}
	if _, hasPassword := u.User.Password(); hasPassword || u.Scheme != "ssh" {
		return fmt.Errorf("%q holds credentials: put them behind credentials_ref, not in the URL", redacted(u))
	}
	if !nameRE.MatchString(u.User.Username()) {
		return fmt.Errorf("%q: the user %q is not a plain user name", location, u.User.Username())
	}
	return nil
}

func redacted(u *url.URL) string {
	c := *u
	c.User = url.User("xxxxx")
	return c.String()
}

// CheckBranch accepts what `git check-ref-format --branch` accepts (the
// rules of git-check-ref-format(1) for refs/heads/<name>), except git's
// @{-N} shorthand for a previous branch; and it is stricter: at most 255
// bytes of valid UTF-8.
func CheckBranch(name string) error {
	bad := func(why string) error { return fmt.Errorf("%q is not a branch name: %s", name, why) }
	switch {
	case name == "":
		return bad("it is empty")
	case len(name) > 255:
		return bad("it is longer than 255 bytes")
	case !utf8.ValidString(name):
		return bad("it is not valid UTF-8")
	case strings.HasPrefix(name, "-"):
		return bad("it starts with '-'")
	case name == "HEAD":
		return bad("HEAD names the current commit, not a branch")
	case strings.HasSuffix(name, "."):
		return bad("it ends with '.'")
	case strings.Contains(name, ".."):
		return bad(`it holds ".."`)
	case strings.Contains(name, "@{"):
		return bad(`it holds "@{"`)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return bad(fmt.Sprintf("it holds %q", r))
		}
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case c == "":
			return bad("it starts or ends with '/' or holds '//'")
		case strings.HasPrefix(c, "."):
			return bad("a part of it starts with '.'")
		case strings.HasSuffix(c, ".lock"):
			return bad(`a part of it ends with ".lock"`)
		}
	}
	return nil
}

// CheckCredentialsRef checks the syntax of the reference to a
// repository's credentials: "" (none: git's own credentials — ssh agent,
// credential helper), env:NAME (a variable of Core's environment) or
// file:/path (a file on Core's machine). Whether the platform lets it
// resolve is the policy's (Secrets) decision.
func CheckCredentialsRef(ref string) error {
	if ref == "" {
		return nil
	}
	_, err := secret.Parse(ref)
	return err
}

// CheckWebhookSecretRef checks the reference to the secret a forge signs
// webhook deliveries with: "" (no webhooks), env:NAME or file:/path, like
// CheckCredentialsRef.
func CheckWebhookSecretRef(ref string) error {
	if err := CheckCredentialsRef(ref); err != nil {
		return fmt.Errorf("%w (such as env:ACME_WEBHOOK_SECRET)", err)
	}
	return nil
}

// Secrets resolves a secret reference under the platform's policy
// (secret.Policy): an error wrapping secret.ErrRefused for a reference it
// does not let resolve, secret.ErrMissing for one that names nothing.
// A reference resolves for an organization (its slug): the allow list
// may give a name to one organization alone.
type Secrets interface {
	Resolve(org, ref string) (string, error)
}

// denyAll is the Secrets of a forge given none: nothing resolves.
var denyAll Secrets = &secret.Policy{}

// OrDenyAll returns s, or a policy that refuses every reference when s is
// nil.
func OrDenyAll(s Secrets) Secrets {
	if s == nil {
		return denyAll
	}
	return s
}

// ResolveSecret reads the bare secret a reference names through s, whole:
// a webhook secret has no user name. The errors name the reference, never
// the value. org is the slug of the organization the reference is
// resolved for.
func ResolveSecret(org, ref string, s Secrets) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("no secret reference")
	}
	return OrDenyAll(s).Resolve(org, ref)
}

// DefaultCredentialUser is the user name git sends with a credential that
// is a bare token: what GitHub expects with its tokens, and what Gitea
// accepts (it authenticates the token whatever the name).
const DefaultCredentialUser = "x-access-token"

// ErrCredentialMissing: the variable or file a credentials reference
// names is not set, empty or unreadable.
var ErrCredentialMissing = secret.ErrMissing

// ResolveCredentials reads the secret a credentials reference (checked by
// CheckCredentialsRef) names through s: "username:secret", or a bare token
// sent as DefaultCredentialUser. The errors name the reference, never the
// value. org is the slug of the organization the reference is resolved
// for (Repo.Organization).
func ResolveCredentials(org, ref string, s Secrets) (username, token string, err error) {
	if ref == "" {
		return "", "", fmt.Errorf("no credentials reference")
	}
	v, err := OrDenyAll(s).Resolve(org, ref)
	if err != nil {
		return "", "", fmt.Errorf("repository.credentials_ref: %w", err)
	}
	user, tok, found := strings.Cut(v, ":")
	switch {
	case !found:
		return DefaultCredentialUser, v, nil
	case user == "" || tok == "":
		return "", "", fmt.Errorf("%w: %s (repository.credentials_ref) must hold \"username:secret\" or a bare token", ErrCredentialMissing, ref)
	}
	return user, tok, nil
}
