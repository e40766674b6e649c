// Package sandbox builds the command line that runs an agent session under
// bubblewrap (bwrap), or unsandboxed with [runner] sandbox = "none".
//
// Under bwrap a session sees the system read-only, its workspace and its
// per-run home writable, a private /tmp, /dev and /proc of its own (its own
// PID namespace: it can neither see nor signal the runner's other
// processes), and the host's network (the model API and Core). What
// Sandbox.Hide names — the runner's working folder with every other run's
// workspace, the runner's config and token files, Core's data folder, the
// runner user's home — is not visible at all: a hidden folder is an empty
// read-only tmpfs (the session's own workspace and home are bound back in
// below it), a hidden file an empty file it cannot read. Every capability
// is dropped, so a session running as root can neither unmount those masks
// nor read past file permissions. It dies with bwrap (--die-with-parent),
// which dies with the runner (proc's Pdeathsig). The environment reaches
// the session as bwrap's own environment, never on its command line (which
// every user of the machine can read).
//
// Paths are resolved (symbolic links followed) before they are mounted, so
// a hidden folder is hidden under its real name, which is where every link
// to it leads. A folder that is also reachable as another bind mount of
// the host is not found that way: hide each of its mount points.
//
// With Mode "none" the command runs as it is, as the runner's user: it can
// read everything the runner can, the repository credential in the git
// processes' environment included.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/procgroup"
	"github.com/ballet/ballet/internal/runner/proc"
)

// Modes of the sandbox ([runner] sandbox).
const (
	ModeBwrap = "bwrap" // the default
	ModeNone  = "none"
)

// maskName is the empty, unreadable file in Sandbox.Private that masks
// hidden files.
const maskName = "masked"

// Sandbox is how sessions are isolated. The zero value is bwrap from PATH
// hiding nothing.
type Sandbox struct {
	// Mode is ModeBwrap ("" too) or ModeNone.
	Mode string
	// Bwrap is the bwrap binary; "bwrap" from PATH when empty.
	Bwrap string
	// Hide lists the paths sessions must not see at all: the runner's
	// working folder (every run's workspace, the mirrors), its config and
	// token files, Core's data folder on a shared machine, and the runner
	// user's home (ssh keys, git and CLI credentials). Paths that do not
	// exist are skipped.
	Hide []string
	// Private is a folder of the runner that sessions never see (it is
	// hidden too); the sandbox keeps the mask of hidden files there. Needed
	// when Hide names a file.
	Private string
}

// Command is a command to run: what proc.Spec takes.
type Command struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Wrapper is set when Path is bwrap: a stop's SIGTERM must reach the
	// session inside, not bwrap (proc.Spec.TermInside), which would die of
	// it and kill the session at once. Its command is then
	// proc.HandshakeScript, which runs the session's command once the runner
	// said go (proc.Spec.Handshake).
	Wrapper bool
}

// Session is what one session runs, and where.
type Session struct {
	Command // Dir is ignored: the session runs in Workspace
	// Workspace and Home are the session's writable folders; they must
	// exist. The session runs in Workspace.
	Workspace, Home string
	// ReadOnly lists more paths the session sees read-only, though they are
	// under a hidden path or /tmp — typically the agent CLI's installation.
	ReadOnly []string
}

// Wrap returns the command that runs sess in the sandbox.
func (s Sandbox) Wrap(sess Session) (Command, error) {
	switch s.Mode {
	case ModeNone:
		if sess.Workspace == "" {
			return Command{}, errors.New("sandbox: the session has no workspace")
		}
		c := sess.Command
		c.Dir = sess.Workspace
		return c, nil
	case "", ModeBwrap:
	default:
		return Command{}, fmt.Errorf("sandbox: the mode %q is not %q or %q", s.Mode, ModeBwrap, ModeNone)
	}
	if sess.Path == "" {
		return Command{}, errors.New("sandbox: the session has no command")
	}
	bwrap, err := s.bwrap()
	if err != nil {
		return Command{}, err
	}
	args, err := s.args(sess)
	if err != nil {
		return Command{}, err
	}
	// bwrap arms --die-with-parent in the sandbox a moment after it
	// created it: a runner that died within that moment would leave the
	// session running. The handshake's script holds the session's command
	// back until the runner, alive once everything was armed, says go.
	args = append(append(args, "--", "/bin/sh", "-c", proc.HandshakeScript, "ballet-session", sess.Path), sess.Args...)
	return Command{Path: bwrap, Args: args, Env: sess.Env, Dir: "/", Wrapper: true}, nil
}

// mount is one bwrap mount operation on path.
type mount struct {
	path string
	op   string // --tmpfs, --ro-bind <src>, --bind
	src  string
}

// args builds bwrap's options: the fixed base, then the mounts of hidden,
// read-only and writable paths with every parent before its children (a
// bind below a hidden folder or /tmp comes after the tmpfs that hides it),
// then the hidden folders' tmpfs made read-only (not recursively: the binds
// in them stay as they are).
func (s Sandbox) args(sess Session) ([]string, error) {
	workspace, err := realDir("workspace", sess.Workspace)
	if err != nil {
		return nil, err
	}
	home, err := realDir("home", sess.Home)
	if err != nil {
		return nil, err
	}
	type hidden struct {
		path string
		dir  bool
	}
	var hides []hidden
	mask := ""
	// Private last: the mask of the first hidden file creates it.
	for _, h := range append(slices.Clone(s.Hide), s.Private) {
		if h == "" {
			continue
		}
		p, fi, err := realPath(h)
		if errors.Is(err, os.ErrNotExist) {
			continue // nothing to hide
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox: hide %s: %w", h, err)
		}
		if p == "/" {
			return nil, fmt.Errorf("sandbox: hide %s: cannot hide the root of the file system", h)
		}
		if !fi.IsDir() && mask == "" {
			if mask, err = s.mask(); err != nil {
				return nil, err
			}
		}
		hides = append(hides, hidden{p, fi.IsDir()})
	}
	var mounts []mount
	var hiddenDirs []string
	for _, h := range hides {
		switch {
		case slices.ContainsFunc(hides, func(o hidden) bool { return o.dir && within(h.path, o.path) }):
			// hidden with a folder above it
		case h.dir:
			mounts = append(mounts, mount{path: h.path, op: "--tmpfs"})
			hiddenDirs = append(hiddenDirs, h.path)
		default:
			mounts = append(mounts, mount{path: h.path, op: "--ro-bind", src: mask})
		}
	}
	for _, r := range sess.ReadOnly {
		p, _, err := realPath(r)
		if err != nil {
			return nil, fmt.Errorf("sandbox: read-only %s: %w", r, err)
		}
		mounts = append(mounts, mount{path: p, op: "--ro-bind", src: p})
	}
	mounts = append(mounts, mount{path: workspace, op: "--bind", src: workspace}, mount{path: home, op: "--bind", src: home})
	seen := map[string]string{}
	for _, m := range mounts {
		if prev, ok := seen[m.path]; ok && prev != m.op+m.src {
			return nil, fmt.Errorf("sandbox: %s is both hidden and shown, or shown twice: hide or show it", m.path)
		}
		seen[m.path] = m.op + m.src
	}
	slices.SortStableFunc(mounts, func(a, b mount) int { return depth(a.path) - depth(b.path) })

	args := baseArgs()
	done := map[string]bool{}
	for _, m := range mounts {
		if done[m.path] {
			continue
		}
		done[m.path] = true
		if m.op == "--tmpfs" {
			args = append(args, "--tmpfs", m.path)
		} else {
			args = append(args, m.op, m.src, m.path)
		}
	}
	for _, d := range hiddenDirs {
		args = append(args, "--remount-ro", d)
	}
	return append(args, "--chdir", workspace), nil
}

// within reports whether path p is strictly below folder dir.
func within(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// depth is the number of elements of a clean absolute path ("/" is 0).
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// realPath is p made absolute with every symbolic link resolved.
func realPath(p string) (string, os.FileInfo, error) {
	if !filepath.IsAbs(p) {
		return "", nil, fmt.Errorf("%q is not an absolute path", p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(r)
	return r, fi, err
}

func realDir(what, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("sandbox: the session has no %s folder", what)
	}
	r, fi, err := realPath(p)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s: %w", what, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("sandbox: %s: %s is not a folder", what, p)
	}
	if r == "/" {
		return "", fmt.Errorf("sandbox: %s: the root of the file system cannot be a session's folder", what)
	}
	return r, nil
}

// mask returns the empty, unreadable file that hides files, creating it in
// Private.
func (s Sandbox) mask() (string, error) {
	if s.Private == "" {
		return "", errors.New("sandbox: hiding a file needs a private folder (Sandbox.Private)")
	}
	if err := os.MkdirAll(s.Private, 0o700); err != nil {
		return "", fmt.Errorf("sandbox: %w", err)
	}
	p := filepath.Join(s.Private, maskName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("sandbox: the mask file: %w", err)
	}
	f.Close()
	// Empty and unreadable whatever an earlier run left there.
	if err := os.Truncate(p, 0); err != nil {
		return "", fmt.Errorf("sandbox: the mask file: %w", err)
	}
	if err := os.Chmod(p, 0); err != nil {
		return "", fmt.Errorf("sandbox: the mask file: %w", err)
	}
	return filepath.EvalSymlinks(p)
}

// bwrap finds the bwrap binary.
func (s Sandbox) bwrap() (string, error) {
	name := s.Bwrap
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("sandbox: bubblewrap (%s) is not installed: %w. Install it (Debian, Ubuntu: apt-get install bubblewrap), "+
			`or set [runner] sandbox = "none" to run agent sessions unsandboxed, as the runner's user, able to read all the runner can `+
			"(its config, its token, the repository credential)", name, err)
	}
	return p, nil
}

// Check tells whether sessions can run: with bwrap, that it is installed
// and can make its namespaces here (a trial run). The error says how to fix
// it.
func (s Sandbox) Check(ctx context.Context) error {
	switch s.Mode {
	case ModeNone:
		return nil
	case "", ModeBwrap:
	default:
		return fmt.Errorf("sandbox: the mode %q is not %q or %q", s.Mode, ModeBwrap, ModeNone)
	}
	bwrap, err := s.bwrap()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, append(baseArgs(), "--", bwrap, "--version")...)
	cmd.Env = []string{}
	cmd.WaitDelay = time.Second
	procgroup.Own(cmd, syscall.SIGKILL)
	procgroup.KillOnCancel(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sandbox: bwrap cannot make a sandbox here (%v: %s). It needs user namespaces "+
			"(on the host: sysctl kernel.unprivileged_userns_clone=1; in a container: one allowed to create namespaces), "+
			`or set [runner] sandbox = "none" to run agent sessions unsandboxed`, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// baseArgs are bwrap's fixed options: every namespace but the network's
// new, no capability, the system read-only, /dev, /proc and /tmp its own.
func baseArgs() []string {
	return []string{
		"--die-with-parent", "--unshare-all", "--share-net", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
	}
}
