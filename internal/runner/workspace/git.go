package workspace

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/gitenv"
)

// gitCmd is one git command.
type gitCmd struct {
	dir  string   // the working directory; os.TempDir() when empty (never inside a repository by accident)
	env  []string // more environment (GIT_INDEX_FILE, author…)
	cred *Credential
	url  string // the remote the credential is for
	args []string
}

// git runs one git command, without a shell, and returns its stdout
// trimmed. Errors name the command and carry git's stderr, printable, with
// the credential removed; a timeout wraps context.DeadlineExceeded.
func (m *Manager) git(ctx context.Context, c gitCmd) (string, error) {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	bin := m.Git
	if bin == "" {
		bin = "git"
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, c.args...)
	cmd.Env = append(gitEnv(c.cred, c.url), c.env...)
	cmd.Dir = c.dir
	if cmd.Dir == "" {
		cmd.Dir = os.TempDir()
	}
	ownGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &limited{buf: &stderr, max: 4096}
	start := time.Now()
	err := cmd.Run()
	secrets := c.cred.secrets()
	name := redactSecrets(printable("git "+strings.Join(c.args, " ")), secrets)
	if m.Logger != nil {
		m.Logger.Debug("git", "command", name, "duration", time.Since(start), "error", errString(err, secrets))
	}
	if err == nil {
		return strings.TrimSpace(stdout.String()), nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("workspace: %s: %w", name, ctx.Err())
	}
	if cctx.Err() != nil {
		return "", fmt.Errorf("workspace: %s: timed out after %s: %w", name, timeout, context.DeadlineExceeded)
	}
	var lines []string // git's stderr on one line
	for _, l := range strings.Split(redactSecrets(stderr.String(), secrets), "\n") {
		if l = strings.TrimSpace(printable(l)); l != "" {
			lines = append(lines, l)
		}
	}
	ge := &gitError{cmd: name, err: err, stderr: strings.Join(lines, " / "), stdout: stdout.String()}
	if c.url != "" && (strings.Contains(ge.stderr, "could not read Username") || strings.Contains(ge.stderr, "Authentication failed") ||
		strings.Contains(ge.stderr, "could not read Password")) {
		return "", fmt.Errorf("%w: %w", ErrAccessDenied, ge)
	}
	return "", ge
}

// gitError is a git command that ran and failed.
type gitError struct {
	cmd, stderr string
	stdout      string // what it printed before failing (merge-tree's conflicts)
	err         error
}

func (e *gitError) Error() string {
	if e.stderr == "" {
		return fmt.Sprintf("workspace: %s: %v", e.cmd, e.err)
	}
	return fmt.Sprintf("workspace: %s: %v: %s", e.cmd, e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is the exit status of a git that ran and failed, else -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func errString(err error, secrets []string) string {
	if err == nil {
		return ""
	}
	return redactSecrets(err.Error(), secrets)
}

// gitEnv is the runner's environment made safe for git (gitenv.Base). A credential
// becomes an Authorization header for its remote's host, given to git
// through GIT_CONFIG_* variables — never on the command line, never in a
// file — and credential helpers are switched off, so none can store it.
func gitEnv(cred *Credential, remote string) []string {
	env := gitenv.Base()
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

func redactSecrets(s string, secrets []string) string {
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "xxxxx")
		}
	}
	return s
}

// printable replaces control characters (C0, DEL, C1) and invalid UTF-8
// with '?': git's messages reach reports and logs, where a remote's escape
// sequences must not.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// limited keeps the first max bytes written to it.
type limited struct {
	buf *bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
