package gitforge

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/gitexec"
)

// A ticket's changes, read from the repository itself: plain git has no
// API, so the commits, the files and their patches come from git log and
// git diff on the repository (a local one directly, one given by URL
// through its mirror, fetched when the heads are not there yet).

// Heads returns the heads of branch and of repo.DefaultBranch (git
// ls-remote). A branch that does not exist has HeadSHA "".
func (f *Forge) Heads(ctx context.Context, repo forge.Repo, branch string) (forge.Heads, error) {
	base := repo.DefaultBranch
	if err := f.check(repo.URL, branch, base); err != nil {
		return forge.Heads{}, err
	}
	heads, err := f.lsRemote(ctx, repo.URL, branch, base)
	if err != nil {
		return forge.Heads{}, err
	}
	baseSHA, ok := heads[base]
	if !ok {
		return forge.Heads{}, fmt.Errorf("gitforge: the default branch %s does not exist in %s", base, redact(repo.URL))
	}
	return forge.Heads{Branch: branch, Base: base, HeadSHA: heads[branch], BaseSHA: baseSHA}, nil
}

// PullRequest returns nil: plain git has no pull requests.
func (f *Forge) PullRequest(ctx context.Context, repo forge.Repo, branch, head string) (*forge.PullView, error) {
	return nil, nil
}

// patchSlack is what Compare reads beyond lim.PatchBytes for the headers
// git writes before each file's hunks.
const patchSlack = 64 << 10

// Compare reads the commits of h.HeadSHA that h.BaseSHA has not, and the
// files changed from their merge base to the head, with their patches
// (rename detection on).
func (f *Forge) Compare(ctx context.Context, repo forge.Repo, branch string, h forge.Heads, lim forge.CompareLimits) (forge.Comparison, error) {
	return f.CompareAuth(ctx, repo, branch, h, lim, "")
}

// CompareAuth is Compare on a repository given by http(s) URL that wants
// an Authorization header (a forge's token: Gitea, whose API has no diff
// of a branch without a pull request). auth is the header's value, given
// to git fetch through GIT_CONFIG_* variables for the URL's host alone —
// never on a command line — and kept out of every error.
func (f *Forge) CompareAuth(ctx context.Context, repo forge.Repo, branch string, h forge.Heads, lim forge.CompareLimits, auth string) (forge.Comparison, error) {
	if err := f.check(repo.URL, branch, repo.DefaultBranch); err != nil {
		return forge.Comparison{}, err
	}
	if !shaRE.MatchString(h.HeadSHA) || !shaRE.MatchString(h.BaseSHA) {
		return forge.Comparison{}, fmt.Errorf("gitforge: compare needs two commit ids, got %q and %q", h.BaseSHA, h.HeadSHA)
	}
	dir := ""
	if isLocal(repo.URL) {
		dir = gitDir(repo.URL)
	} else {
		d, unlock, err := f.mirror(ctx, repo.URL)
		if err != nil {
			return forge.Comparison{}, err
		}
		defer unlock()
		if err := f.fetchHeads(ctx, d, repo.URL, h, auth); err != nil {
			return forge.Comparison{}, err
		}
		dir = d
	}
	g := func(c gitexec.Cmd) (string, error) {
		c.Args = append([]string{"--git-dir=" + dir, "-c", "log.showSignature=false", "-c", "core.quotePath=false"}, c.Args...)
		return f.runner().Run(ctx, c)
	}
	var out forge.Comparison
	n, err := g(gitexec.Cmd{Args: []string{"rev-list", "--count", "--end-of-options", h.BaseSHA + ".." + h.HeadSHA}})
	if err != nil {
		return forge.Comparison{}, err
	}
	if out.TotalCommits, err = strconv.Atoi(strings.TrimSpace(n)); err != nil {
		return forge.Comparison{}, fmt.Errorf("gitforge: rev-list --count said %q", n)
	}
	if out.TotalCommits == 0 {
		return out, nil
	}
	log, err := g(gitexec.Cmd{Args: []string{"log", "-z", "--no-color", "--no-mailmap", "--format=%H%x00%an%x00%ae%x00%at%x00%B",
		"-n", strconv.Itoa(max(lim.Commits, 1)), "--end-of-options", h.BaseSHA + ".." + h.HeadSHA}})
	if err != nil {
		return forge.Comparison{}, err
	}
	if out.Commits, err = parseLog(log); err != nil {
		return forge.Comparison{}, err
	}
	from, err := f.mergeBase(ctx, g, h)
	if err != nil {
		return forge.Comparison{}, err
	}
	diff := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", "--src-prefix=a/", "--dst-prefix=b/"}
	names, err := g(gitexec.Cmd{Args: append(append([]string{}, diff...), "--name-status", "-z", "--end-of-options", from, h.HeadSHA)})
	if err != nil {
		return forge.Comparison{}, err
	}
	stats, err := g(gitexec.Cmd{Args: append(append([]string{}, diff...), "--numstat", "-z", "--end-of-options", from, h.HeadSHA)})
	if err != nil {
		return forge.Comparison{}, err
	}
	patchCap := max(lim.PatchBytes, 0) + patchSlack
	patch, err := g(gitexec.Cmd{Args: append(append([]string{}, diff...), "-p", "--end-of-options", from, h.HeadSHA), MaxStdout: patchCap})
	if err != nil {
		return forge.Comparison{}, err
	}
	files, err := parseFiles(names, stats, patch, len(patch) >= patchCap)
	if err != nil {
		return forge.Comparison{}, err
	}
	if lim.Files > 0 && len(files) > lim.Files {
		files, out.FilesCut = files[:lim.Files], true
	}
	out.Files = files
	return out, nil
}

// fetchHeads fetches the branch and its base into the mirror dir unless
// both heads are there already; auth, when set, is the Authorization
// header sent to url's host.
func (f *Forge) fetchHeads(ctx context.Context, dir, url string, h forge.Heads, auth string) error {
	for _, sha := range []string{h.HeadSHA, h.BaseSHA} {
		have, err := f.hasCommit(ctx, dir, sha)
		if err != nil {
			return err
		}
		if !have {
			base, branch := "refs/heads/"+h.Base, "refs/heads/"+h.Branch
			_, err := f.runner().Run(ctx, gitexec.Cmd{Args: []string{"-c", "gc.autoDetach=false", "--git-dir=" + dir, "fetch", "--quiet", "--no-tags",
				"--no-write-fetch-head", "--", url, "+" + base + ":" + base, "+" + branch + ":" + branch},
				Extra: authEnv(url, auth), Secrets: secretsOf(auth)})
			return err
		}
	}
	return nil
}

// authEnv gives git the Authorization header auth for url's host
// (scheme://host/), switches credential helpers off so that none stores
// it, and redirects off (the rule of package outbound: a redirect would
// carry the header where nobody chose); nil without auth.
func authEnv(url, auth string) []string {
	if auth == "" {
		return nil
	}
	scope := url
	if u, err := neturl.Parse(url); err == nil && u.Host != "" {
		scope = u.Scheme + "://" + u.Host + "/"
	}
	return []string{"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=http." + scope + ".extraHeader", "GIT_CONFIG_VALUE_0=Authorization: " + auth,
		"GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=http.followRedirects", "GIT_CONFIG_VALUE_2=false"}
}

// secretsOf lists auth and its token (after the scheme) for redaction.
func secretsOf(auth string) []string {
	if auth == "" {
		return nil
	}
	out := []string{auth}
	if _, tok, ok := strings.Cut(auth, " "); ok && tok != "" {
		out = append(out, tok)
	}
	return out
}

// mergeBase is where the branch left its base; the empty tree when the two
// share no history.
func (f *Forge) mergeBase(ctx context.Context, g func(gitexec.Cmd) (string, error), h forge.Heads) (string, error) {
	mb, err := g(gitexec.Cmd{Args: []string{"merge-base", "--end-of-options", h.BaseSHA, h.HeadSHA}})
	if err == nil {
		return strings.TrimSpace(mb), nil
	}
	if exitCode(err) != 1 {
		return "", err
	}
	empty, err := g(gitexec.Cmd{Args: []string{"hash-object", "-t", "tree", "--stdin"}}) // stdin is /dev/null: the empty tree
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(empty), nil
}

// parseLog reads git log -z --format=%H%x00%an%x00%ae%x00%at%x00%B.
func parseLog(out string) ([]forge.Commit, error) {
	var commits []forge.Commit
	fields := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if len(fields) == 1 && fields[0] == "" {
		return nil, nil
	}
	if len(fields)%5 != 0 {
		return nil, fmt.Errorf("gitforge: git log gave %d fields, not a multiple of 5", len(fields))
	}
	for i := 0; i < len(fields); i += 5 {
		at, err := strconv.ParseInt(fields[i+3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("gitforge: git log gave the time %q", fields[i+3])
		}
		author := fields[i+1]
		if fields[i+2] != "" {
			author += " <" + fields[i+2] + ">"
		}
		commits = append(commits, forge.Commit{SHA: strings.TrimSpace(fields[i]), Author: author,
			Time: time.Unix(at, 0).UTC(), Message: strings.TrimRight(fields[i+4], "\n")})
	}
	return commits, nil
}

// parseFiles puts together git diff's --name-status -z, --numstat -z and
// -p outputs (the same diff, so the same files in the same order); cut: the
// patch output was cut short.
func parseFiles(names, stats, patch string, cut bool) ([]forge.FileChange, error) {
	var files []forge.FileChange
	tok := strings.Split(strings.TrimSuffix(names, "\x00"), "\x00")
	for i := 0; i < len(tok) && tok[i] != ""; {
		st := tok[i]
		fc := forge.FileChange{}
		switch st[0] {
		case 'A':
			fc.Status = forge.FileAdded
		case 'D':
			fc.Status = forge.FileDeleted
		case 'R':
			fc.Status = forge.FileRenamed
		case 'C':
			fc.Status = forge.FileCopied
		case 'T':
			fc.Status = forge.FileChanged
		default:
			fc.Status = forge.FileModified
		}
		if st[0] == 'R' || st[0] == 'C' {
			if i+2 >= len(tok) {
				return nil, errors.New("gitforge: git diff --name-status ended inside a rename")
			}
			fc.PreviousPath, fc.Path = tok[i+1], tok[i+2]
			i += 3
		} else {
			if i+1 >= len(tok) {
				return nil, errors.New("gitforge: git diff --name-status ended inside an entry")
			}
			fc.Path = tok[i+1]
			i += 2
		}
		files = append(files, fc)
	}
	// numstat -z: "added\tdeleted\tpath\0", or for a rename or copy
	// "added\tdeleted\t\0old\0new\0"; a binary file counts "-".
	rest, k := stats, 0
	for rest != "" && k < len(files) {
		rec, after, _ := strings.Cut(rest, "\x00")
		parts := strings.SplitN(rec, "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("gitforge: git diff --numstat gave %q", rec)
		}
		if parts[2] == "" { // a rename: two more fields
			_, after, _ = strings.Cut(after, "\x00")
			_, after, _ = strings.Cut(after, "\x00")
		}
		if parts[0] == "-" {
			files[k].Binary = true
		} else {
			files[k].Additions, _ = strconv.Atoi(parts[0])
			files[k].Deletions, _ = strconv.Atoi(parts[1])
		}
		rest, k = after, k+1
	}
	// The patch: one "diff --git " section per file, in the same order; a
	// line of a hunk never starts with "diff".
	sections := splitPatch(patch)
	for k := range files {
		if k >= len(sections) {
			files[k].PatchCut = cut && (files[k].Additions+files[k].Deletions > 0 || files[k].Binary)
			continue
		}
		last := k == len(sections)-1
		files[k].Patch = hunks(sections[k])
		if last && cut {
			files[k].PatchCut = true
			if i := strings.LastIndexByte(files[k].Patch, '\n'); i >= 0 {
				files[k].Patch = files[k].Patch[:i+1]
			} else {
				files[k].Patch = ""
			}
		}
	}
	return files, nil
}

// splitPatch cuts git diff -p's output at each "diff --git " line.
func splitPatch(patch string) []string {
	var out []string
	for patch != "" {
		next := strings.Index(patch[1:], "\ndiff --git ")
		if next < 0 {
			out = append(out, patch)
			break
		}
		out = append(out, patch[:next+2])
		patch = patch[next+2:]
	}
	return out
}

// hunks is a file's section from its first "@@" line on ("" when it has
// none: binary, a rename or a mode change only).
func hunks(section string) string {
	if strings.HasPrefix(section, "@@") {
		return section
	}
	i := strings.Index(section, "\n@@")
	if i < 0 {
		return ""
	}
	return section[i+1:]
}
