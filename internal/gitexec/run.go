package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/procgroup"
)

// stderrLimit is how much of git's stderr an error keeps.
const stderrLimit = 4096

// Runner runs git commands. Its zero value runs "git" from PATH with no
// time limit beyond the caller's context.
type Runner struct {
	Bin     string        // the git binary; "git" from PATH when empty
	Timeout time.Duration // per command; none when 0
	// Prefix starts every error ("gitforge", "workspace"): who ran git.
	Prefix string
	// Logger, when set, gets one debug line per command (credentials removed).
	Logger *slog.Logger
}

// Cmd is one git command.
type Cmd struct {
	Args []string
	// Dir is the working directory; os.TempDir() when empty, never inside
	// some repository by accident.
	Dir string
	// Env replaces Base() when set (a credential's GIT_CONFIG_* variables
	// are added by the caller this way); Extra is added after it.
	Env, Extra []string
	// Secrets are strings that must never appear in an error or a log (a
	// token in its forms). URLs among Args have their user information
	// removed without being listed here.
	Secrets []string
	// MaxStdout, when above 0, keeps only the first MaxStdout bytes of
	// stdout: the rest is read and dropped, and the command still succeeds
	// (a diff too large to keep whole). The caller tells a cut output by
	// its length.
	MaxStdout int
}

// Error is a git command that ran and failed, or did not run.
type Error struct {
	Prefix, Cmd string // who ran it; the command, printable, credentials removed
	Stderr      string // git's stderr on one line, printable, credentials removed
	Stdout      string // what it printed before failing (merge-tree's conflicts)
	Err         error
}

func (e *Error) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s: %s: %v", e.Prefix, e.Cmd, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v: %s", e.Prefix, e.Cmd, e.Err, e.Stderr)
}

func (e *Error) Unwrap() error { return e.Err }

// Run runs c without a shell and returns its stdout. A context ended by the
// caller wraps ctx.Err(); the runner's own timeout wraps
// context.DeadlineExceeded and says so; any other failure is an *Error.
func (r Runner) Run(ctx context.Context, c Cmd) (string, error) {
	bin := r.Bin
	if bin == "" {
		bin = "git"
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if r.Timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, r.Timeout)
	}
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, c.Args...)
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = Base()
	}
	cmd.Env = append(cmd.Env, c.Extra...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = os.TempDir()
	}
	// git runs in its own process group (it starts ssh,
	// git-remote-https, pack-objects…), killed whole when it times out and
	// by the kernel when its parent dies.
	procgroup.Own(cmd, syscall.SIGKILL)
	procgroup.KillOnCancel(cmd)
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if c.MaxStdout > 0 {
		cmd.Stdout = &limited{buf: &stdout, max: c.MaxStdout}
	}
	cmd.Stderr = &limited{buf: &stderr, max: stderrLimit}
	start := time.Now()
	err := cmd.Run()
	name := r.redact(Printable("git "+strings.Join(c.Args, " ")), c)
	if r.Logger != nil {
		msg := ""
		if err != nil {
			msg = r.redact(err.Error(), c)
		}
		r.Logger.Debug("git", "command", name, "duration", time.Since(start), "error", msg)
	}
	if err == nil {
		return stdout.String(), nil
	}
	prefix := r.Prefix
	if prefix == "" {
		prefix = "git"
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s: %s: %w", prefix, name, ctx.Err())
	}
	if cctx.Err() != nil {
		return "", fmt.Errorf("%s: %s: timed out after %s: %w", prefix, name, r.Timeout, context.DeadlineExceeded)
	}
	var lines []string // git's stderr on one line
	for _, l := range strings.Split(r.redact(stderr.String(), c), "\n") {
		if l = strings.TrimSpace(Printable(l)); l != "" {
			lines = append(lines, l)
		}
	}
	return "", &Error{Prefix: prefix, Cmd: name, Stderr: strings.Join(lines, " / "), Stdout: stdout.String(), Err: err}
}

// redact removes c's secrets and the credentials of any URL among its
// arguments from s.
func (r Runner) redact(s string, c Cmd) string {
	return Redact(RedactURLsIn(s, c.Args...), c.Secrets...)
}

// RedactURLsIn removes from s the credentials of each URL among locations
// that has some (RedactURL), wherever s quotes the URL or its user
// information.
func RedactURLsIn(s string, locations ...string) string {
	for _, a := range locations {
		if u, err := url.Parse(a); err == nil && u.User != nil && u.Scheme != "" {
			if red := RedactURL(a); red != a {
				s = strings.ReplaceAll(s, a, red)
				s = strings.ReplaceAll(s, u.User.String()+"@", "xxxxx@")
			}
		}
	}
	return s
}

// Redact replaces every occurrence of each secret in s with xxxxx.
func Redact(s string, secrets ...string) string {
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "xxxxx")
		}
	}
	return s
}

// RedactURL removes credentials from a URL: all of an http(s) URL's user
// information (often a token), an ssh URL's password.
func RedactURL(location string) string {
	u, err := url.Parse(location)
	if err != nil || u.User == nil || u.Scheme == "" {
		return location
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		u.User = url.User("xxxxx")
		return u.String()
	}
	return u.Redacted()
}

// Printable replaces control characters (C0, DEL, C1) and invalid UTF-8
// with '?': git's messages reach reports and logs, where a remote's escape
// sequences must not.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// ExitCode is the exit status of a git that ran and failed, else -1.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
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

// IsAncestor reports whether commit a is contained in commit b, in the
// repository whose git directory is gitDir.
func (r Runner) IsAncestor(ctx context.Context, gitDir, a, b string) (bool, error) {
	_, err := r.Run(ctx, Cmd{Args: []string{"--git-dir=" + gitDir, "merge-base", "--is-ancestor", "--end-of-options", a, b}})
	switch {
	case err == nil:
		return true, nil
	case ExitCode(err) == 1:
		return false, nil
	}
	return false, err
}
