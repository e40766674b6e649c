package gitforge

import (
	"context"

	"github.com/ballet/ballet/internal/gitexec"
)

// git runs one git command (gitexec: no shell, its own process group,
// errors printable and without credentials) and returns its stdout; a
// timeout wraps context.DeadlineExceeded.
func (f *Forge) git(ctx context.Context, args ...string) (string, error) {
	return f.runner().Run(ctx, gitexec.Cmd{Args: args})
}

func (f *Forge) runner() gitexec.Runner {
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return gitexec.Runner{Bin: f.Git, Timeout: timeout, Prefix: "gitforge"}
}

// exitCode is the exit status of a git that ran and failed, else -1.
func exitCode(err error) int { return gitexec.ExitCode(err) }

// redact removes credentials from a URL (gitexec.RedactURL).
func redact(location string) string { return gitexec.RedactURL(location) }
