// Package workspace prepares the git workspace of one agent session and
// takes its work back to the remote: the branch ballet/<KEY>, and
// checkpoints so that no paid work is lost.
//
// Layout under Manager.Dir (the runner's working folder, which the sandbox
// hides from sessions):
//
//	mirrors/<hash>.git   a bare mirror per repository, fetched before each run
//	runs/<run>/work      the agent's workspace: a clone of the mirror (objects copied, nothing shared)
//	runs/<run>/home      an empty folder for the session's HOME
//	runs/<run>/git       the runner's own git directory for the run (objects borrowed from the mirror)
//	runs/<run>/index     the runner's own index of the workspace
//
// Prepare fetches the default branch, ballet/<KEY> and the stage's
// checkpoint into the mirror, clones a fresh workspace from it and checks
// out ballet/<KEY> — continuing it when it exists on the remote, else from
// the default branch — and puts back the work of an earlier session of the
// same stage that did not finish (Workspace.Restored).
//
// The agent owns its workspace, .git included: it may commit, rewrite
// history, plant hooks or configuration. The runner, which holds the
// credential, never runs git in it once the agent had it, nor reads its
// .git: it reads the working tree only, through its own git directory and
// index (git --git-dir=<run>/git --work-tree=<run>/work). So Checkpoint
// and Publish build their commits from the files the agent left, with the
// branch head the session started from as parent: the agent's own commits
// are folded into one commit per session, authored by "Ballet agent".
//
// Checkpoint pushes such a commit to refs/ballet/checkpoints/<KEY>/<stage>
// (forced: that ref only) without touching the agent's index or working
// tree. Publish pushes ballet/<KEY> — never forced: when the branch moved
// on the remote meanwhile it fails with ErrRemoteMoved — and, in the same
// atomic push, moves the checkpoint to the published commit, so that a
// session started after it finds nothing more to restore. A session that
// changed nothing pushes nothing. DropCheckpoint deletes the checkpoint
// when the stage has ended with an outcome.
//
// A credential (http(s) remotes) reaches git only, as an Authorization
// header in the environment of the git commands that talk to the remote:
// never on a command line, in a file, in the workspace (.git/config
// included) or in an error or log line. git runs with the hardening of
// internal/forge/gitforge: no prompts, only the file, http(s) and ssh
// transports, locations and branch names checked by forge.CheckLocation and
// forge.CheckBranch, every user value after "--".
package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/gitexec"
	"github.com/ballet/ballet/internal/keys"
	"github.com/ballet/ballet/internal/text"
)

// DefaultTimeout bounds one git command unless Manager.Timeout says
// otherwise (a first clone of a large repository takes a while).
const DefaultTimeout = 10 * time.Minute

// The author and committer of every commit the runner makes.
const (
	AgentName  = "Ballet agent"
	AgentEmail = "agent@ballet.invalid"
)

// ErrRemoteMoved is returned by Publish when the branch moved on the remote
// since the session started (or the agent rewrote its history): the push
// would not be a fast-forward, and Ballet never forces a branch.
var ErrRemoteMoved = errors.New("workspace: the branch moved on the remote since the session started; not pushed")

// ErrAccessDenied is returned when the remote refused the credential, or
// wants one and none was given.
var ErrAccessDenied = errors.New("workspace: the repository refused access: check the project's repository credentials")

// maxSummary bounds the part of a report that goes into a commit message.
const maxSummary = 16 << 10

// Manager prepares workspaces under Dir. Its methods are safe for
// concurrent use.
type Manager struct {
	Dir     string        // the runner's working folder
	Git     string        // the git binary; "git" from PATH when empty
	Timeout time.Duration // per git command; DefaultTimeout when 0
	// Logger, when set, gets one debug line per git command (never a
	// credential).
	Logger *slog.Logger

	mirrors gitexec.Mirrors
}

// Remote is the repository a run works on.
type Remote struct {
	URL           string // a location forge.CheckLocation accepts for git
	DefaultBranch string
	// Credential, for http(s) URLs, authenticates clone, fetch and push;
	// nil: git's own (an ssh agent, a credential helper of the runner's
	// user).
	Credential *Credential
}

// Credential is a user name and password (or token) for an http(s)
// remote. It is kept in memory only.
type Credential struct {
	Username string // "git" when empty
	Password string
}

// Spec names a run's workspace.
type Spec struct {
	Run    string // the run's ID: names its folder (1–100 of [A-Za-z0-9._-])
	Ticket string // the ticket's key, ACME-42: the branch is ballet/ACME-42
	Stage  string // the stage's id: names the checkpoint
	Remote Remote
}

var runRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

func (s Spec) check() error {
	if !runRE.MatchString(s.Run) {
		return fmt.Errorf("workspace: the run id %q must be 1–100 of [A-Za-z0-9._-], starting with a letter or digit", s.Run)
	}
	if _, _, err := keys.ParseItem(s.Ticket); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if strings.Contains(s.Stage, "/") || forge.CheckBranch(s.Stage) != nil {
		return fmt.Errorf("workspace: the stage %q cannot name a checkpoint: it must be one valid ref name component", s.Stage)
	}
	if err := forge.CheckLocation(forge.KindGit, s.Remote.URL); err != nil {
		return fmt.Errorf("workspace: the repository location is refused: %s", gitexec.Redact(err.Error(), s.Remote.Credential.secrets()...))
	}
	if err := forge.CheckBranch(s.Remote.DefaultBranch); err != nil {
		return fmt.Errorf("workspace: the default branch: %w", err)
	}
	if s.Remote.DefaultBranch == branchOf(s.Ticket) {
		return fmt.Errorf("workspace: the default branch cannot be the ticket's branch %s", branchOf(s.Ticket))
	}
	if c := s.Remote.Credential; c != nil {
		switch {
		case !strings.HasPrefix(s.Remote.URL, "https://") && !strings.HasPrefix(s.Remote.URL, "http://"):
			return errors.New("workspace: a credential is for http(s) repositories only; for ssh use the runner's ssh agent")
		case c.Password == "":
			return errors.New("workspace: the credential has no password or token")
		case text.Line(c.Password) != nil || text.Line(c.Username) != nil:
			return errors.New("workspace: the credential holds control characters")
		case strings.Contains(c.Username, ":"):
			return errors.New("workspace: the credential's user name holds ':'")
		}
	}
	return nil
}

func branchOf(ticket string) string { return "ballet/" + ticket }

func checkpointRef(ticket, stage string) string {
	return "refs/ballet/checkpoints/" + ticket + "/" + stage
}

// Workspace is one run's workspace, ready for its session.
type Workspace struct {
	Dir    string // the agent's workspace: a git repository on Branch
	Home   string // an empty folder for the session's HOME
	Branch string // ballet/<KEY>
	// Base is the commit the session starts from: the branch head on the
	// remote, else the default branch's head (or, to restore a checkpoint
	// exactly, the commit that checkpoint was made on).
	Base string
	// Continued is set when the branch existed on the remote.
	Continued bool
	// DefaultHead is the default branch's head on the remote when the
	// workspace was made.
	DefaultHead string
	// Restored, when set, describes the checkpoint whose work was put back
	// into the working tree (as uncommitted changes): the session's prompt
	// should say so.
	Restored *Restored

	m          *Manager
	spec       Spec
	runDir     string
	gitDir     string // the runner's own git directory
	index      string // the runner's own index
	mirror     string
	checkpoint string // the checkpoint ref

	mu       sync.Mutex // one Checkpoint or Publish at a time
	lastTree string     // what the remote checkpoint holds ("" unknown: the next Checkpoint pushes)
}

// Restored is the checkpoint an earlier session of the stage left.
type Restored struct {
	Commit string // the checkpoint
	// Merged: the branch had moved since the checkpoint, so its changes
	// were merged onto the new head; Conflicts lists the files where they
	// clashed (they hold conflict markers for the agent to resolve).
	Merged    bool
	Conflicts []string
	// Kept, when set, is where the checkpoint was kept instead of being put
	// back (its history is unrelated to the branch's): nothing is lost,
	// but the session starts without it.
	Kept string
}

// Prepare makes the workspace of spec's run: a fresh folder (whatever an
// earlier attempt left there is removed), the branch checked out, an
// earlier session's checkpoint restored.
func (m *Manager) Prepare(ctx context.Context, spec Spec) (*Workspace, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if m.Dir == "" {
		return nil, errors.New("workspace: no working folder (Manager.Dir)")
	}
	runDir := filepath.Join(m.Dir, "runs", spec.Run)
	w := &Workspace{
		Dir: filepath.Join(runDir, "work"), Home: filepath.Join(runDir, "home"), Branch: branchOf(spec.Ticket),
		m: m, spec: spec, runDir: runDir, gitDir: filepath.Join(runDir, "git"), index: filepath.Join(runDir, "index"),
		checkpoint: checkpointRef(spec.Ticket, spec.Stage),
	}
	if err := os.RemoveAll(runDir); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if err := os.MkdirAll(w.Home, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	mirror, unlock, err := m.mirror(ctx, spec.Remote.URL)
	if err != nil {
		return nil, err
	}
	defer unlock()
	w.mirror = mirror
	apply, err := w.fetch(ctx)
	if err != nil {
		return nil, err
	}
	if err := w.clone(ctx, apply); err != nil {
		return nil, err
	}
	return w, nil
}

// fetch brings the default branch, the ticket's branch and the stage's
// checkpoint into the mirror, exactly as they are on the remote, chooses
// the base and plans the restore: it returns the tree to put into the
// working tree, "" for none.
func (w *Workspace) fetch(ctx context.Context) (apply string, err error) {
	r := w.spec.Remote
	defRef, branchRef := "refs/heads/"+r.DefaultBranch, "refs/heads/"+w.Branch
	refs := []string{defRef, branchRef, w.checkpoint}
	heads, err := w.m.lsRemote(ctx, r, refs...)
	if err != nil {
		return "", err
	}
	if _, ok := heads[defRef]; !ok {
		return "", fmt.Errorf("workspace: the default branch %s does not exist in %s", r.DefaultBranch, r.URL)
	}
	args := []string{"-c", "gc.autoDetach=false", "-c", "maintenance.autoDetach=false", "--git-dir=" + w.mirror,
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--", r.URL}
	for _, ref := range refs {
		if _, ok := heads[ref]; ok {
			args = append(args, "+"+ref+":"+ref)
		} else if _, err := w.m.git(ctx, gitCmd{args: []string{"--git-dir=" + w.mirror, "update-ref", "-d", ref}}); err != nil {
			return "", err // a stale ref would be taken for the remote's
		}
	}
	if _, err := w.m.git(ctx, gitCmd{args: args, cred: r.Credential, url: r.URL}); err != nil {
		return "", err
	}
	if _, err := w.m.git(ctx, gitCmd{args: []string{"--git-dir=" + w.mirror, "symbolic-ref", "HEAD", defRef}}); err != nil {
		return "", err
	}
	w.Base, w.Continued, w.DefaultHead = heads[defRef], false, heads[defRef]
	if sha, ok := heads[branchRef]; ok {
		w.Base, w.Continued = sha, true
	}
	ckpt, ok := heads[w.checkpoint]
	if !ok { // no checkpoint: the first Checkpoint with changes pushes one
		return "", w.setLastTree(ctx, w.Base)
	}
	return w.plan(ctx, ckpt, heads[defRef])
}

func (w *Workspace) setLastTree(ctx context.Context, commit string) error {
	tree, err := w.m.git(ctx, gitCmd{args: []string{"--git-dir=" + w.mirror, "rev-parse", "--verify", "--end-of-options", commit + "^{tree}"}})
	w.lastTree = tree
	return err
}

// plan decides how the checkpoint ckpt comes back into the working tree.
func (w *Workspace) plan(ctx context.Context, ckpt, defHead string) (string, error) {
	g := func(args ...string) (string, error) {
		return w.m.git(ctx, gitCmd{args: append([]string{"--git-dir=" + w.mirror}, args...)})
	}
	tree, err := g("rev-parse", "--verify", "--end-of-options", ckpt+"^{tree}")
	if err != nil {
		return "", err
	}
	parent, err := g("rev-parse", "--verify", "--end-of-options", ckpt+"^1")
	if err != nil {
		return "", fmt.Errorf("workspace: the checkpoint %s has no parent: %w", ckpt, err)
	}
	baseTree, err := g("rev-parse", "--verify", "--end-of-options", w.Base+"^{tree}")
	if err != nil {
		return "", err
	}
	w.lastTree = tree // what the remote checkpoint holds
	contained, err := w.m.isAncestor(ctx, w.mirror, ckpt, w.Base)
	if err != nil {
		return "", err
	}
	switch {
	case tree == baseTree || contained:
		return "", nil // the branch has it all (the session published it)
	case parent == w.Base:
		w.Restored = &Restored{Commit: ckpt}
		return tree, nil
	}
	if !w.Continued {
		// The branch was never pushed: start it where the checkpoint was
		// made, when that is still on the default branch.
		if ok, err := w.m.isAncestor(ctx, w.mirror, parent, defHead); err != nil {
			return "", err
		} else if ok {
			w.Base = parent
			w.Restored = &Restored{Commit: ckpt}
			return tree, nil
		}
	}
	// The branch moved since: merge the checkpoint's changes onto its head,
	// conflicts marked in the files.
	out, err := g("merge-tree", "--write-tree", "--name-only", "--no-messages", "--end-of-options", w.Base, ckpt)
	var ge *gitexec.Error
	switch {
	case err == nil:
		w.Restored = &Restored{Commit: ckpt, Merged: true}
		w.lastTree = ""
		return strings.TrimSpace(out), nil
	case errors.As(err, &ge) && exitCode(err) == 1:
		lines := strings.Split(strings.TrimSpace(ge.Stdout), "\n")
		w.Restored = &Restored{Commit: ckpt, Merged: true, Conflicts: lines[1:]}
		w.lastTree = ""
		return lines[0], nil
	}
	// Unrelated histories: keep the checkpoint under another name.
	kept := "refs/ballet/kept/" + w.spec.Ticket + "/" + w.spec.Stage + "/" + ckpt[:12]
	if _, err := w.m.git(ctx, gitCmd{cred: w.spec.Remote.Credential, url: w.spec.Remote.URL,
		args: []string{"--git-dir=" + w.mirror, "push", "--quiet", "--", w.spec.Remote.URL, "+" + ckpt + ":" + kept}}); err != nil {
		return "", fmt.Errorf("workspace: keeping the checkpoint %s, which cannot be restored: %w", ckpt, err)
	}
	w.Restored = &Restored{Commit: ckpt, Kept: kept}
	w.lastTree = ""
	return "", nil
}

// clone makes the agent's workspace from the mirror, checks out the branch
// at Base with apply in the working tree, and the runner's own git
// directory and index.
func (w *Workspace) clone(ctx context.Context, apply string) error {
	m := w.m
	if _, err := m.git(ctx, gitCmd{args: []string{"clone", "--quiet", "--no-hardlinks", "--no-checkout", "--", w.mirror, w.Dir}}); err != nil {
		return err
	}
	in := func(args ...string) error {
		_, err := m.git(ctx, gitCmd{dir: w.Dir, args: args})
		return err
	}
	steps := [][]string{
		{"config", "user.name", AgentName},
		{"config", "user.email", AgentEmail},
		{"config", "remote.origin.url", w.spec.Remote.URL},
		{"checkout", "--quiet", "--no-track", "-b", w.Branch, w.Base},
	}
	if apply != "" {
		// The checkpoint's files in the working tree, the index at the
		// branch head: the work comes back as uncommitted changes.
		steps = append(steps, []string{"read-tree", "-u", "--reset", apply}, []string{"reset", "--quiet"})
	}
	for _, s := range steps {
		if err := in(s...); err != nil {
			return err
		}
	}
	// The runner's own git directory borrows the mirror's objects; its
	// index starts as a copy of the fresh checkout's (stat data included,
	// so the first snapshot hashes only what changed).
	if _, err := m.git(ctx, gitCmd{args: []string{"init", "--quiet", "--bare", "--", w.gitDir}}); err != nil {
		return err
	}
	alt := filepath.Join(w.gitDir, "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(w.mirror, "objects")+"\n"), 0o600); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	idx, err := os.ReadFile(filepath.Join(w.Dir, ".git", "index"))
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := os.WriteFile(w.index, idx, 0o600); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// CheckpointResult is what a Checkpoint did.
type CheckpointResult struct {
	Commit string // the checkpoint commit; "" when nothing was pushed
	Pushed bool   // false: the working tree is what the remote checkpoint (or the branch) already holds
}

// Checkpoint pushes the working tree's current state to the stage's
// checkpoint ref, unless the remote already holds it. It touches neither
// the agent's index nor its working tree.
func (w *Workspace) Checkpoint(ctx context.Context) (CheckpointResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tree, err := w.snapshot(ctx)
	if err != nil {
		return CheckpointResult{}, err
	}
	if tree == w.lastTree {
		return CheckpointResult{}, nil
	}
	commit, err := w.commit(ctx, tree, w.subject("checkpoint"), "Ballet-Checkpoint: "+w.spec.Stage)
	if err != nil {
		return CheckpointResult{}, err
	}
	if _, err := w.push(ctx, "+"+commit+":"+w.checkpoint); err != nil {
		return CheckpointResult{}, fmt.Errorf("workspace: pushing the checkpoint: %w", err)
	}
	w.lastTree = tree
	return CheckpointResult{Commit: commit, Pushed: true}, nil
}

// Published is what Publish did.
type Published struct {
	Commit string // the commit pushed to the branch; "" when nothing was
	Pushed bool   // false: the session changed nothing
}

// Publish commits what the agent left (committed by it or not) as one
// commit on the branch head the session started from, and pushes the
// branch (never forced: ErrRemoteMoved when the remote moved) together
// with the checkpoint, moved to that commit. summary (the session's report)
// goes into the commit message. A session that changed nothing pushes
// nothing.
func (w *Workspace) Publish(ctx context.Context, summary string) (Published, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tree, err := w.snapshot(ctx)
	if err != nil {
		return Published{}, err
	}
	baseTree, err := w.m.git(ctx, gitCmd{args: []string{"--git-dir=" + w.gitDir, "rev-parse", "--verify", "--end-of-options", w.Base + "^{tree}"}})
	if err != nil {
		return Published{}, err
	}
	if tree == baseTree {
		return Published{}, nil
	}
	subject, body := summarize(summary)
	if subject == "" {
		subject = "changes by the agent"
	}
	commit, err := w.commit(ctx, tree, w.subject(subject), body)
	if err != nil {
		return Published{}, err
	}
	branch, checkpoint := commit+":refs/heads/"+w.Branch, "+"+commit+":"+w.checkpoint
	_, err = w.push(ctx, "--atomic", branch, checkpoint)
	var ge *gitexec.Error
	if errors.As(err, &ge) && strings.Contains(ge.Stderr, "does not support --atomic") {
		// A server without atomic pushes: the branch first, then the
		// checkpoint (a crash between leaves the older checkpoint, which
		// the next session merges onto the branch).
		if _, err = w.push(ctx, branch); err == nil {
			_, err = w.push(ctx, checkpoint)
		}
	}
	if err != nil {
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "[rejected]") &&
			(strings.Contains(ge.Stderr, "(fetch first)") || strings.Contains(ge.Stderr, "(non-fast-forward)")) {
			return Published{}, fmt.Errorf("%w: %s", ErrRemoteMoved, ge.Stderr)
		}
		return Published{}, fmt.Errorf("workspace: pushing %s: %w", w.Branch, err)
	}
	w.lastTree = tree
	return Published{Commit: commit, Pushed: true}, nil
}

// Ahead counts the commits the branch has ahead of the default branch
// (as it was when the workspace was made) after Publish did p: its pushed
// commit, else the head the branch had on the remote; 0 when the branch
// does not exist there.
func (w *Workspace) Ahead(ctx context.Context, p Published) (int, error) {
	head := p.Commit
	if head == "" && w.Continued {
		head = w.Base
	}
	if head == "" {
		return 0, nil
	}
	out, err := w.m.git(ctx, gitCmd{args: []string{"--git-dir=" + w.gitDir, "rev-list", "--count", "--end-of-options", w.DefaultHead + ".." + head}})
	if err != nil {
		return 0, fmt.Errorf("workspace: counting the commits of %s ahead of %s: %w", w.Branch, w.spec.Remote.DefaultBranch, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("workspace: rev-list --count said %q", out)
	}
	return n, nil
}

// DropCheckpoint deletes the stage's checkpoint from the remote (the stage
// ended with an outcome). No checkpoint is no error.
func (w *Workspace) DropCheckpoint(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	heads, err := w.m.lsRemote(ctx, w.spec.Remote, w.checkpoint)
	if err != nil {
		return err
	}
	if _, ok := heads[w.checkpoint]; !ok {
		return nil
	}
	if _, err := w.push(ctx, ":"+w.checkpoint); err != nil {
		return fmt.Errorf("workspace: deleting the checkpoint: %w", err)
	}
	w.lastTree = ""
	return nil
}

// Remove deletes the run's folder.
func (w *Workspace) Remove() error {
	if err := os.RemoveAll(w.runDir); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// CheckpointEvery calls Checkpoint every interval on clk until ctx ends,
// and hands each outcome to done (which may be nil). A failed checkpoint
// does not stop the next; one under way when ctx ends is finished first.
func (w *Workspace) CheckpointEvery(ctx context.Context, clk clock.Clock, every time.Duration, done func(CheckpointResult, error)) {
	for {
		t := clk.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		// A checkpoint that has begun runs to its end (each git command
		// bounded by the Manager's timeout): cancelled, it would kill git
		// while it writes the runner's index and leave its index.lock
		// behind, and the session's publish would then fail.
		r, err := w.Checkpoint(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return
		}
		if done != nil {
			done(r, err)
		}
	}
}

// snapshot writes the working tree into the runner's own index and
// returns its tree. The agent's .git is never read: git's own directory is
// the runner's, and a folder named .git is never part of a tree.
func (w *Workspace) snapshot(ctx context.Context) (string, error) {
	env := []string{"GIT_INDEX_FILE=" + w.index}
	// core.fsmonitor off: a daemon must not outlive the command.
	base := []string{"-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", "--git-dir=" + w.gitDir, "--work-tree=" + w.Dir}
	if _, err := w.m.git(ctx, gitCmd{dir: w.Dir, env: env, args: append(base, "add", "--all", "--", ".")}); err != nil {
		return "", err
	}
	return w.m.git(ctx, gitCmd{dir: w.Dir, env: env, args: append(base, "write-tree")})
}

// commit makes a commit of tree on Base, by the agent.
func (w *Workspace) commit(ctx context.Context, tree, subject, body string) (string, error) {
	msg := subject + "\n\n"
	if body != "" {
		msg += body + "\n\n"
	}
	// The trailers name the ticket, the stage and the run: a ticket's
	// changes (internal/changes) show which stage's run made each commit.
	msg += "Ballet-Ticket: " + w.spec.Ticket + "\nBallet-Stage: " + w.spec.Stage + "\nBallet-Run: " + w.spec.Run
	return w.m.git(ctx, gitCmd{
		env: []string{"GIT_AUTHOR_NAME=" + AgentName, "GIT_AUTHOR_EMAIL=" + AgentEmail,
			"GIT_COMMITTER_NAME=" + AgentName, "GIT_COMMITTER_EMAIL=" + AgentEmail},
		args: []string{"--git-dir=" + w.gitDir, "commit-tree", "-p", w.Base, "-m", msg, "--end-of-options", tree},
	})
}

func (w *Workspace) subject(what string) string {
	return w.spec.Ticket + " " + w.spec.Stage + ": " + what
}

// push pushes refspecs (options first) from the runner's own git directory.
func (w *Workspace) push(ctx context.Context, refspecs ...string) (string, error) {
	args := []string{"--git-dir=" + w.gitDir, "push", "--quiet", "--no-verify"}
	for len(refspecs) > 0 && strings.HasPrefix(refspecs[0], "--") {
		args = append(args, refspecs[0])
		refspecs = refspecs[1:]
	}
	args = append(append(args, "--", w.spec.Remote.URL), refspecs...)
	return w.m.git(ctx, gitCmd{cred: w.spec.Remote.Credential, url: w.spec.Remote.URL, args: args})
}

// summarize makes a commit subject (first line, at most 72 characters) and
// body (the rest) of a report, without control characters but line feeds.
func summarize(s string) (subject, body string) {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "") + "…"
	}
	s = strings.TrimSpace(s)
	subject, body, _ = strings.Cut(s, "\n")
	subject = strings.TrimSpace(subject)
	if r := []rune(subject); len(r) > 72 {
		body = strings.TrimSpace(subject + "\n" + body)
		subject = string(r[:71]) + "…"
	}
	return subject, strings.TrimSpace(body)
}

// lsRemote returns the commits of those of refs that exist on the remote.
func (m *Manager) lsRemote(ctx context.Context, r Remote, refs ...string) (map[string]string, error) {
	out, err := m.git(ctx, gitCmd{cred: r.Credential, url: r.URL, args: append([]string{"ls-remote", "--", r.URL}, refs...)})
	if err != nil {
		return nil, err
	}
	heads := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		sha, ref, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && shaRE.MatchString(sha) {
			for _, want := range refs { // ls-remote matches by tail: exact names only
				if ref == want {
					heads[ref] = sha
				}
			}
		}
	}
	return heads, nil
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// isAncestor reports whether commit a is contained in commit b.
func (m *Manager) isAncestor(ctx context.Context, gitDir, a, b string) (bool, error) {
	return m.runner().IsAncestor(ctx, gitDir, a, b)
}

// mirror returns the bare mirror of url under the runner's folder, created
// when missing, locked until unlock is called.
func (m *Manager) mirror(ctx context.Context, url string) (dir string, unlock func(), err error) {
	return m.mirrors.Open(ctx, m.runner(), filepath.Join(m.Dir, "mirrors"), url)
}
