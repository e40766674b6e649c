// Package secret resolves secret references — where a project keeps a
// credential (env:NAME, a variable of Core's environment; file:/path, a
// file on Core's machine), never the credential itself — under the
// platform's policy: a reference of an organization resolves only when it
// matches a pattern a platform admin put in [secrets] allow for that
// organization (a pattern naming it, {ORG} or {org}, or one naming none,
// unless a pattern naming another organization claims the name), and never when it names one of
// Ballet's own credentials (its BALLET_* variables, the model providers'
// keys, the variables passed on to agent sessions, its configuration,
// data folder and token files, or any value equal to a credential Ballet
// holds), whatever the allow-list says.
//
// Check is the save-time verdict (syntax, allow-list, Ballet's own names);
// Resolve is the use-time one, which also reads the value and refuses a
// file that leads (by symbolic or hard link) to Ballet's own, and a value
// holding one of Ballet's credentials. Errors name the reference, never a
// value.
package secret

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Schemes of a reference.
const (
	SchemeEnv  = "env"
	SchemeFile = "file"
)

// MaxRef bounds a reference's length; MaxFile a referenced file's size.
const (
	MaxRef  = 1024
	MaxFile = 64 << 10
)

// ErrRefused marks a reference the policy does not let resolve: outside
// the allow-list, or one of Ballet's own credentials.
var ErrRefused = errors.New("secret reference refused")

// ErrMissing marks a reference the policy allows whose variable is unset
// or empty, or whose file cannot be read or is empty.
var ErrMissing = errors.New("secret missing")

// Ref is a parsed reference.
type Ref struct {
	Scheme string // SchemeEnv or SchemeFile
	Name   string // the variable's name, or the file's absolute, clean path
}

// String is the reference as written.
func (r Ref) String() string { return r.Scheme + ":" + r.Name }

var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// Parse reads a reference: env:NAME (a variable name, [A-Za-z_][A-Za-z0-9_]*)
// or file:/absolute/clean/path. The scheme is lower case; no part may hold
// spaces or control characters.
func Parse(s string) (Ref, error) {
	if len(s) > MaxRef {
		return Ref{}, fmt.Errorf("a reference has at most %d characters", MaxRef)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == 0x85 || r == 0xa0 }); i >= 0 {
		return Ref{}, fmt.Errorf("%q holds a space or control character", s)
	}
	scheme, name, ok := strings.Cut(s, ":")
	if !ok {
		return Ref{}, fmt.Errorf("%q must be scheme:name, such as env:ACME_GIT_TOKEN or file:/etc/ballet/acme-token", s)
	}
	switch scheme {
	case SchemeEnv:
		if !envRE.MatchString(name) {
			return Ref{}, fmt.Errorf("%q: %q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", s, name)
		}
	case SchemeFile:
		if !strings.HasPrefix(name, "/") || path.Clean(name) != name || name == "/" {
			return Ref{}, fmt.Errorf("%q: %q must be an absolute, clean path to a file (no '..', '.', '//' or trailing '/')", s, name)
		}
	default:
		return Ref{}, fmt.Errorf("%q: the scheme %q is unknown; use env:NAME or file:/path (lower case)", s, scheme)
	}
	return Ref{Scheme: scheme, Name: name}, nil
}

// CheckPattern checks an allow-list pattern: env:GLOB or file:/GLOB, a
// glob of path.Match ('*' never crosses '/'), holding at most once the
// organization's placeholder ({ORG} in env, {org} in file patterns) where
// it cannot reach another organization's names (checkPlaceholder).
func CheckPattern(p string) error {
	scheme, glob, ok := strings.Cut(p, ":")
	if !ok || (scheme != SchemeEnv && scheme != SchemeFile) {
		return fmt.Errorf("%q must be env:PATTERN or file:/PATTERN, such as env:GITEA_* or file:/etc/ballet/forge/*", p)
	}
	if glob == "" || strings.ContainsFunc(glob, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%q: the pattern is empty or holds a space or control character", p)
	}
	if scheme == SchemeFile && (!strings.HasPrefix(glob, "/") || path.Clean(glob) != glob) {
		return fmt.Errorf("%q: a file pattern is an absolute, clean path", p)
	}
	if err := checkPlaceholder(p, scheme, glob); err != nil {
		return err
	}
	probe := strings.NewReplacer(PlaceholderEnv, "X", PlaceholderFile, "x").Replace(glob)
	if _, err := path.Match(probe, ""); err != nil {
		return fmt.Errorf("%q: %v", p, err)
	}
	return nil
}

// Own is what Ballet itself uses: no reference may resolve to it.
type Own struct {
	// EnvPrefixes and EnvNames are variables never referable (compared
	// without regard to case): BALLET_*, the model providers' and what
	// the runner passes to sessions.
	EnvPrefixes []string
	EnvNames    []string
	// Paths are files and folders never referable, nor anything in them
	// or linked to them: the configuration, the data folder, token files.
	Paths []string
	// Values are credentials Ballet holds (the bootstrap token, the
	// Knowledge service credential, …): a resolved secret holding one is
	// refused.
	Values []string
}

// AddPath adds a path (made absolute and clean) and, when it exists
// behind links, where they lead.
func (o *Own) AddPath(p string) {
	if p == "" {
		return
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return
	}
	o.Paths = append(o.Paths, abs)
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		o.Paths = append(o.Paths, real)
	}
}

// HasEnv reports whether the variable name is one of Ballet's own.
func (o Own) HasEnv(name string) bool { return o.env(name) != "" }

// env says which of Ballet's own variables name is ("": none), without
// regard to case.
func (o Own) env(name string) string {
	up := strings.ToUpper(name)
	for _, pre := range slices.Concat(DefaultEnvPrefixes, o.EnvPrefixes) {
		if strings.HasPrefix(up, strings.ToUpper(pre)) {
			return "one of Ballet's own variables (" + pre + "*)"
		}
	}
	for _, n := range o.EnvNames {
		if strings.EqualFold(name, n) {
			return "a variable Ballet passes to agent sessions (" + n + ")"
		}
	}
	return ""
}

// DefaultEnvPrefixes are the variables no reference names: Ballet's own
// and the model providers' keys the runner gives agent sessions.
var DefaultEnvPrefixes = []string{"BALLET_", "ANTHROPIC_", "OPENAI_"}

// systemPaths are never secrets a project owns.
var systemPaths = []string{"/proc", "/sys", "/dev"}

// minValue: shorter values of Own.Values are not compared (a flag such as
// BALLET_SKIP_SANDBOX=1 is no credential).
const minValue = 8

// Policy decides which references resolve.
type Policy struct {
	// Allow are the patterns a platform admin made referable ([secrets]
	// allow); empty: none.
	Allow []string
	Own   Own
	// LookupEnv reads the environment (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
}

// Check is the save-time verdict on a reference of the organization org
// (its slug): its syntax, then ErrRefused when it names Ballet's own or is
// outside what the allow-list gives that organization.
func (p *Policy) Check(org, s string) error {
	r, err := Parse(s)
	if err != nil {
		return err
	}
	if why := p.own(r); why != "" {
		return fmt.Errorf("%w: %s names %s, which no reference may name", ErrRefused, s, why)
	}
	if why := p.allowedFor(org, r); why != "" {
		return fmt.Errorf("%w: %s %s", ErrRefused, s, why)
	}
	return nil
}

// Resolve is the use-time verdict for the organization org: Check, then the value (trimmed of
// surrounding white space). A file must be a regular file of at most
// MaxFile bytes that is not, by any link, one of Ballet's own; a value
// holding one of Ballet's credentials is refused.
func (p *Policy) Resolve(org, s string) (string, error) {
	if err := p.Check(org, s); err != nil {
		return "", err
	}
	r, _ := Parse(s)
	var v string
	switch r.Scheme {
	case SchemeEnv:
		lookup := p.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		val, ok := lookup(r.Name)
		if !ok || strings.TrimSpace(val) == "" {
			return "", fmt.Errorf("%w: the reference is %s, but %s is not set in Core's environment", ErrMissing, s, r.Name)
		}
		v = val
	case SchemeFile:
		val, err := p.readFile(s, r.Name)
		if err != nil {
			return "", err
		}
		v = val
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrMissing, s)
	}
	for _, own := range p.Own.Values {
		if len(own) >= minValue && strings.Contains(v, own) {
			return "", fmt.Errorf("%w: %s holds one of Ballet's own credentials", ErrRefused, s)
		}
	}
	return v, nil
}

// readFile reads a referenced file, refusing one that is, through links,
// one of Ballet's own paths.
func (p *Policy) readFile(ref, name string) (string, error) {
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return "", fmt.Errorf("%w: the reference is %s, but the file cannot be read: %v", ErrMissing, ref, pathErr(err))
	}
	if why := p.ownPath(real); why != "" {
		return "", fmt.Errorf("%w: %s leads to %s, which no reference may name", ErrRefused, ref, why)
	}
	// A FIFO or device would block or never end: only a regular file is
	// opened (and checked again once open).
	if fi, err := os.Stat(real); err == nil && !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrRefused, ref)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", fmt.Errorf("%w: the reference is %s, but the file cannot be read: %v", ErrMissing, ref, pathErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: the reference is %s, but the file cannot be read: %v", ErrMissing, ref, pathErr(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrRefused, ref)
	}
	for _, own := range p.Own.Paths {
		if ofi, err := os.Stat(own); err == nil && os.SameFile(fi, ofi) {
			return "", fmt.Errorf("%w: %s is a link to one of Ballet's own files", ErrRefused, ref)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: the reference is %s, but the file cannot be read: %v", ErrMissing, ref, pathErr(err))
	case len(b) > MaxFile:
		return "", fmt.Errorf("%w: %s is larger than %d bytes", ErrRefused, ref, MaxFile)
	}
	return string(b), nil
}

// pathErr is an error without its path (the reference names it).
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// own says which of Ballet's own r names ("": none).
func (p *Policy) own(r Ref) string {
	switch r.Scheme {
	case SchemeEnv:
		return p.Own.env(r.Name)
	case SchemeFile:
		if why := p.ownPath(r.Name); why != "" {
			return why
		}
		// Where a link already leads at save time; Resolve checks again.
		if real, err := filepath.EvalSymlinks(r.Name); err == nil {
			return p.ownPath(real)
		}
	}
	return ""
}

// ownPath says which of Ballet's own paths name (absolute, clean) is or
// lies in ("": none).
func (p *Policy) ownPath(name string) string {
	for _, sys := range systemPaths {
		if within(name, sys) {
			return "a system path (" + sys + ")"
		}
	}
	for _, own := range p.Own.Paths {
		if within(name, own) {
			return "one of Ballet's own files (" + own + ")"
		}
	}
	return ""
}

// within reports whether name is dir or lies inside it.
func within(name, dir string) bool {
	return name == dir || strings.HasPrefix(name, strings.TrimSuffix(dir, "/")+"/")
}
