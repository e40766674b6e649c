package workspace

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ballet/ballet/internal/gitexec"
)

// gitCmd is one git command.
type gitCmd struct {
	dir  string   // the working directory; os.TempDir() when empty (never inside a repository by accident)
	env  []string // more environment (GIT_INDEX_FILE, author…)
	cred *Credential
	url  string // the remote the credential is for
	args []string
}

// git runs one git command (gitexec: no shell, its own process group,
// errors printable with the credential removed) and returns its stdout
// trimmed; a timeout wraps context.DeadlineExceeded, a refused credential
// ErrAccessDenied.
func (m *Manager) git(ctx context.Context, c gitCmd) (string, error) {
	out, err := m.runner().Run(ctx, gitexec.Cmd{Args: c.args, Dir: c.dir, Env: gitEnv(c.cred, c.url), Extra: c.env, Secrets: c.cred.secrets()})
	if err == nil {
		return strings.TrimSpace(out), nil
	}
	if ge := gitError(err); c.url != "" && ge != nil && (strings.Contains(ge.Stderr, "could not read Username") ||
		strings.Contains(ge.Stderr, "Authentication failed") || strings.Contains(ge.Stderr, "could not read Password")) {
		return "", fmt.Errorf("%w: %w", ErrAccessDenied, err)
	}
	return "", err
}

func (m *Manager) runner() gitexec.Runner {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return gitexec.Runner{Bin: m.Git, Timeout: timeout, Prefix: "workspace", Logger: m.Logger}
}

// gitError is the failed git command err holds, else nil.
func gitError(err error) *gitexec.Error {
	var ge *gitexec.Error
	if errors.As(err, &ge) {
		return ge
	}
	return nil
}

// exitCode is the exit status of a git that ran and failed, else -1.
func exitCode(err error) int { return gitexec.ExitCode(err) }

// gitEnv is the runner's environment made safe for git (gitexec.Base). A credential
// becomes an Authorization header for its remote's host, given to git
// through GIT_CONFIG_* variables — never on the command line, never in a
// file — and credential helpers are switched off, so none can store it.
func gitEnv(cred *Credential, remote string) []string {
	env := gitexec.Base()
	if cred != nil {
		env = append(env, "GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http."+hostOf(remote)+".extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+cred.basic(),
			"GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=")
	}
	return env
}

// hostOf is scheme://host[:port]/ of an http(s) URL: the scope of the
// credential's header (a redirect to another path of the host keeps it).
func hostOf(remote string) string {
	u, err := url.Parse(remote)
	if err != nil {
		return remote
	}
	return u.Scheme + "://" + u.Host + "/"
}

func (c *Credential) basic() string {
	return base64.StdEncoding.EncodeToString([]byte(c.user() + ":" + c.Password))
}

func (c *Credential) user() string {
	if c.Username == "" {
		return "git"
	}
	return c.Username
}

// secrets are the forms of the credential that must never appear in an
// error or a log.
func (c *Credential) secrets() []string {
	if c == nil || c.Password == "" {
		return nil
	}
	return []string{c.Password, c.basic(), url.QueryEscape(c.Password)}
}
