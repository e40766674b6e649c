package secret

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Placeholders of an allow-list pattern: the organization a reference is
// checked for. In an env pattern it stands for EnvSlug(slug) (acme-corp:
// ACME_CORP); in a file pattern for the slug as it is (acme-corp).
const (
	PlaceholderEnv  = "{ORG}"
	PlaceholderFile = "{org}"
)

// EnvSlug is an organization's slug as it appears in a variable name:
// upper case, '-' as '_' (acme-corp: ACME_CORP). Slugs are lower-case
// letters, digits and '-', so the mapping is one to one.
func EnvSlug(slug string) string {
	return strings.ReplaceAll(strings.ToUpper(slug), "-", "_")
}

// slugOfEnv is EnvSlug's inverse: "" for a text no slug maps to.
func slugOfEnv(s string) string {
	if s == "" || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") ||
		strings.ContainsFunc(s, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') }) {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

// validFileSlug reports whether s can be a slug (lower-case letters,
// digits and '-', not starting or ending with '-').
func validFileSlug(s string) bool {
	return s != "" && !strings.HasPrefix(s, "-") && !strings.HasSuffix(s, "-") &&
		!strings.ContainsFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') })
}

const globChars = `*?[\`

// checkPlaceholder checks where a pattern holds its placeholder: at most
// once, nothing but literal text before it, and after it (env) only
// literal text or (file) '/' or the end. Then the name a pattern matches
// determines the one organization it belongs to: for env, the text
// between a fixed prefix and a fixed suffix, which EnvSlug maps one to
// one; for file, the path component after a fixed prefix (a slug holds no
// '/').
func checkPlaceholder(p, scheme, glob string) error {
	ph, other := PlaceholderEnv, PlaceholderFile
	if scheme == SchemeFile {
		ph, other = PlaceholderFile, PlaceholderEnv
	}
	if strings.Contains(glob, other) {
		return fmt.Errorf("%q: write the organization as %s in a %s pattern", p, ph, scheme)
	}
	n := strings.Count(glob, ph)
	if n == 0 {
		return nil
	}
	if n > 1 {
		return fmt.Errorf("%q: %s may appear at most once", p, ph)
	}
	before, after, _ := strings.Cut(glob, ph)
	if strings.ContainsAny(before, globChars) {
		return fmt.Errorf("%q: no wildcard may come before %s (it could reach another organization's names)", p, ph)
	}
	if scheme == SchemeEnv && strings.ContainsAny(after, globChars) {
		return fmt.Errorf("%q: no wildcard may follow %s in an env pattern: %s_* for acme would match ACME_X_…, the names of organization acme-x; name the variable, such as env:GITEA_%s_TOKEN", p, ph, ph, ph)
	}
	if scheme == SchemeFile && after != "" && !strings.HasPrefix(after, "/") {
		return fmt.Errorf("%q: %s must be a whole path component (followed by '/' or the end), such as file:/etc/ballet/forge/%s/token", p, ph, ph)
	}
	return nil
}

// claimant is the organization (slug) a placeholder pattern gives the
// reference r to, "" when it gives r to none; shared reports a pattern
// without a placeholder.
func claimant(pat string, r Ref) (slug string, shared bool) {
	scheme, glob, ok := strings.Cut(pat, ":")
	if !ok || scheme != r.Scheme {
		return "", false
	}
	ph := PlaceholderEnv
	if scheme == SchemeFile {
		ph = PlaceholderFile
	}
	before, after, has := strings.Cut(glob, ph)
	if !has {
		return "", true
	}
	if !strings.HasPrefix(r.Name, before) {
		return "", false
	}
	rest := r.Name[len(before):]
	var sub string
	switch scheme {
	case SchemeEnv:
		if !strings.HasSuffix(rest, after) {
			return "", false
		}
		slug = slugOfEnv(rest[:len(rest)-len(after)])
		sub = EnvSlug(slug)
	case SchemeFile:
		slug, _, _ = strings.Cut(rest, "/")
		if !validFileSlug(slug) {
			slug = ""
		}
		sub = slug
	}
	if slug == "" {
		return "", false
	}
	if m, err := path.Match(before+sub+after, r.Name); err != nil || !m {
		return "", false
	}
	return slug, false
}

// allowedFor says why r is not referable by the organization org ("":
// it is). A name a pattern with the placeholder matches for an
// organization belongs to that organization alone, even where a shared
// pattern (one without the placeholder) matches it too; a name no such
// pattern claims is referable by every organization when a shared pattern
// matches it.
func (p *Policy) allowedFor(org string, r Ref) string {
	var claims []string
	sharedMatch := false
	for _, pat := range p.Allow {
		slug, shared := claimant(pat, r)
		switch {
		case shared:
			_, glob, _ := strings.Cut(pat, ":")
			if m, err := path.Match(glob, r.Name); err == nil && m {
				sharedMatch = true
			}
		case slug != "" && !slices.Contains(claims, slug):
			claims = append(claims, slug)
		}
	}
	switch {
	case len(claims) == 1 && claims[0] == org && org != "":
		return ""
	case len(claims) > 0:
		return fmt.Sprintf("belongs to organization %q under the platform's [secrets] allow list, not to organization %q", strings.Join(claims, `" and "`), org)
	case sharedMatch:
		return ""
	}
	return "is not in the platform's [secrets] allow list for organization " + fmt.Sprintf("%q", org) + "; a platform admin makes references referable there"
}
