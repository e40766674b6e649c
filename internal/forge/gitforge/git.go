package gitforge

import (
	"bytes"
	"context"
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

// git runs one git command, without a shell, and returns its stdout. Errors
// name the command (credentials removed) and carry git's stderr, printable
// (they reach flow reports and logs: a remote's ESC sequences must not); a
// timeout wraps context.DeadlineExceeded.
func (f *Forge) git(ctx context.Context, args ...string) (string, error) {
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	bin := f.Git
	if bin == "" {
		bin = "git"
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Env = gitenv.Base()
	cmd.Dir = os.TempDir() // never inside some repository by accident
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &limited{buf: &stderr, max: 4096}
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	name := printable("git " + redactArgs(args))
	if ctx.Err() != nil {
		return "", fmt.Errorf("gitforge: %s: %w", name, ctx.Err())
	}
	if cctx.Err() != nil {
		return "", fmt.Errorf("gitforge: %s: timed out after %s: %w", name, timeout, context.DeadlineExceeded)
	}
	var lines []string // git's stderr on one line
	for _, l := range strings.Split(redactText(stderr.String(), args), "\n") {
		if l = strings.TrimSpace(printable(l)); l != "" {
			lines = append(lines, l)
		}
	}
	msg := strings.Join(lines, " / ")
	if msg == "" {
		return "", fmt.Errorf("gitforge: %s: %w", name, err)
	}
	return "", fmt.Errorf("gitforge: %s: %w: %s", name, err, msg)
}

// printable replaces control characters (C0, DEL, C1) and invalid UTF-8
// with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// exitCode is the exit status of a git that ran and failed, else -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// redact removes credentials from a URL: all of an http(s) URL's user
// information (often a token), an ssh URL's password.
func redact(location string) string {
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

func redactArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redact(a)
	}
	return strings.Join(out, " ")
}

// redactText removes from git's output the credentials of any URL among args.
func redactText(s string, args []string) string {
	for _, a := range args {
		if u, err := url.Parse(a); err == nil && u.User != nil && u.Scheme != "" {
			if r := redact(a); r != a {
				s = strings.ReplaceAll(s, a, r)
				s = strings.ReplaceAll(s, u.User.String()+"@", "xxxxx@")
			}
		}
	}
	return s
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
