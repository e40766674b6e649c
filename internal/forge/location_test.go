package forge

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/secret"
)

func TestCheckLocation(t *testing.T) {
	t.Parallel()
	ok := []struct{ kind, loc string }{
		{KindGit, "/srv/git/acme.git"},
		{KindGit, "/srv/my repos/acme.git"},
		{KindGit, "/srv/a:b/acme.git"},
		{KindGit, "file:///srv/git/acme.git"},
		{KindGit, "file://localhost/srv/git/acme.git"},
		{KindGit, "https://git.example.com/acme/app.git"},
		{KindGit, "http://127.0.0.1:3000/acme/app.git"},
		{KindGit, "ssh://git@git.example.com:2222/acme/app.git"},
		{KindGit, "ssh://[::1]/srv/acme.git"},
		{KindGit, "git@github.com:acme/app.git"},
		{KindGit, "build-host:/srv/git/acme.git"},
		{KindGitea, "https://gitea.example.com/acme/app"},
		{KindGitHub, "https://github.com/acme/app"},
		{KindGitHub, "https://github.com/acme/app.git"},
		{KindGitea, "http://127.0.0.1:3000/acme/app.git/"},
		{KindGitea, "https://example.com/gitea/acme/app.git"}, // served under a sub-path
		{KindGit, "/" + strings.Repeat("a", MaxLocation-1)},   // exactly the bound
	}
	for _, c := range ok {
		if err := CheckLocation(c.kind, c.loc); err != nil {
			t.Errorf("%s %q: %v", c.kind, c.loc, err)
		}
	}
	bad := []struct{ kind, loc, want string }{
		{KindGit, "", "must name"},
		{KindGit, "-oProxyCommand=touch /tmp/pwned", "starts with '-'"},
		{KindGit, "--upload-pack=touch /tmp/pwned", "starts with '-'"},
		{KindGit, "ext::sh -c touch% /tmp/pwned", "remote-helper syntax (ext::"},
		{KindGit, "fd::3", "remote-helper syntax (fd::"},
		{KindGit, "git-remote-x::y", "remote-helper syntax"},
		{KindGit, "/srv/a\x00b", "control character"},
		{KindGit, "/srv/a\nb", "control character"},
		{KindGit, " /srv/a", "white space"},
		{KindGit, "srv/git/acme.git", "must be an absolute path"},
		{KindGit, "acme.git", "must be an absolute path"},
		{KindGit, "git://git.example.com/acme.git", "git:// transport is not allowed"},
		{KindGit, "ftp://example.com/acme.git", "ftp:// transport is not allowed"},
		{KindGit, "ssh://-oProxyCommand=touch%20x/acme.git", "not a valid URL"},
		{KindGit, "ssh://-oProxyCommand=touch/acme.git", "not a plain host name"},
		{KindGit, "ssh://-oProxyCommand=x@host/acme.git", "not a plain user name"},
		{KindGit, "ssh://git:secret@host/acme.git", "holds credentials"},
		{KindGit, "https://user:token@git.example.com/acme.git", "holds credentials"},
		{KindGit, "https://token@git.example.com/acme.git", "holds credentials"},
		{KindGit, "https://git.example.com", "must name a host and the repository's path"},
		{KindGit, "file://otherhost/srv/a.git", "file:///absolute/path"},
		{KindGit, "-oProxyCommand=x@host:acme.git", "starts with '-'"},
		{KindGit, "x@-oProxyCommand=y:acme.git", "not a plain host name"},
		{KindGit, "a b@host:acme.git", "not a plain user name"},
		{KindGit, "/" + strings.Repeat("a", MaxLocation), "at most 2000 bytes"},
		{KindGitea, "/srv/git/acme.git", "http(s) URL"},
		{KindGitea, "ssh://git@gitea.example.com/acme/app.git", "http(s) URL"},
		{KindGitHub, "https://x:y@github.com/acme/app", "holds credentials"},
		{KindGitHub, "https://-x/acme/app", "not a plain host name"},
		{KindGitHub, "https://github.com/acme", "clone URL, http(s)://host/owner/repo"},
		{KindGitHub, "https://github.com/", "clone URL, http(s)://host/owner/repo"},
		{KindGitea, "https://gitea.example.com", "clone URL, http(s)://host/owner/repo"},
		{KindGitea, "https://gitea.example.com/acme//app", "clone URL, http(s)://host/owner/repo"},
		{KindGitea, "https://gitea.example.com/acme/../app", "clone URL, http(s)://host/owner/repo"},
		{KindGitea, "https://gitea.example.com/acme/app?x=1", "clone URL, http(s)://host/owner/repo"},
		{"svn", "/srv/x", "not git, gitea or github"},
	}
	for _, c := range bad {
		if err := CheckLocation(c.kind, c.loc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %.50q: %v, want an error with %q", c.kind, c.loc, err, c.want)
		}
	}
}

func TestCheckCredentialsRef(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{"", "env:ACME_GIT_TOKEN", "env:_x1", "file:/etc/ballet/acme-token"} {
		if err := CheckCredentialsRef(ref); err != nil {
			t.Errorf("%q: %v", ref, err)
		}
	}
	for ref, want := range map[string]string{
		"ACME_TOKEN":        "must be scheme:name",
		"vault:secret/acme": `the scheme "vault" is unknown`,
		"ENV:ACME":          `the scheme "ENV" is unknown`,
		"file:etc/token":    "absolute, clean path",
		"file:/etc/../tok":  "absolute, clean path",
		"env:":              "not an environment variable name",
		"env:1X":            "not an environment variable name",
		"env:A-B":           "not an environment variable name",
		"env:A B":           "holds a space",
	} {
		if err := CheckCredentialsRef(ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", ref, err, want)
		}
	}
}

// TestCheckBranchAgreesWithGit: CheckBranch implements the rules of `git
// check-ref-format --branch`; every name here is decided the same way by
// the real git, except the few where Ballet is stricter on purpose.
func TestCheckBranchAgreesWithGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required (apt-get install git): %v", err)
	}
	names := []string{
		"main", "master", "feature/ACME-1", "ballet/ACME-42", "ACME-1_fix.2", "a/b/c", "release-1.0", "x.y", "a.b.c", "@",
		"a@b", "a}b", "a{b", "a@", "ünïcödé", "日本", "a+b", "a=b", "a,b", "a;b", "a'b", `a"b`, "a#b", "a%b", "a&b", "a!b", "a$b",
		"a(b)", "a<b>", "a|b", "a`b", "x.lock/y", "lock", ".lockx", "a_", "0", "a-", "a/-b", "a/HEAD", "HEADS", "head",
		"", "-x", "--upload-pack=touch /tmp/x", "a..b", "a b", "a~1", "a^", "a:b", "a?b", "a*b", "a[b", `a\b`, "@{-1}", "x@{u}", "a@{b",
		"a.lock", "a/b.lock", "/a", "a/", "a//b", ".a", "a/.b", "a.", "a/b.", "a\nb", "a\tb", "a\x7fb", "a\x1bb",
		"..", ".", "a/..", "a/./b", "a.lock.lock", "HEAD",
	}
	stricter := map[string]bool{
		strings.Repeat("a", 256): true, // git has no limit
		"a\xffb":                 true, // git takes any bytes
		"a\x00b":                 true, // no command line can even carry it
	}
	for n := range stricter {
		names = append(names, n)
	}
	for _, name := range names {
		if strings.ContainsRune(name, 0) {
			if CheckBranch(name) == nil {
				t.Errorf("%q accepted", name)
			}
			continue
		}
		cmd := exec.Command("git", "check-ref-format", "--branch", name)
		cmd.Dir = t.TempDir() // not a repository: @{-N} is not expanded
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+cmd.Dir)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		gitOK := err == nil && strings.TrimSuffix(string(out), "\n") == name
		ours := CheckBranch(name)
		switch {
		case stricter[name]:
			if ours == nil {
				t.Errorf("%.30q accepted; Ballet is stricter than git here", name)
			}
		case gitOK != (ours == nil):
			t.Errorf("%q: git accepts: %v; CheckBranch: %v", name, gitOK, ours)
		}
	}
}

// TestOwnerRepo: the owner and name are the last two parts of a clone
// URL's path.
func TestOwnerRepo(t *testing.T) {
	for path, want := range map[string]string{
		"/acme/app": "acme/app", "/acme/app.git": "acme/app", "/acme/app/": "acme/app", "/gitea/acme/app.git": "acme/app",
		"/acme": "", "": "", "/": "", "//app": "", "/acme/./app": "",
	} {
		o, r, ok := OwnerRepo(path)
		got := ""
		if ok {
			got = o + "/" + r
		}
		if got != want {
			t.Errorf("OwnerRepo(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestCheckAPIURL: an API base override is an http(s) URL without
// credentials or query; "" derives it.
func TestCheckAPIURL(t *testing.T) {
	for _, ok := range []string{"", "https://github.example.com/api/v3", "http://127.0.0.1:3000/api/v1",
		"https://x/" + strings.Repeat("a", MaxLocation-len("https://x/"))} { // exactly the bound
		if err := CheckAPIURL(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for api, want := range map[string]string{
		"ftp://x/api":           "must be an http(s) URL",
		"github.com/api/v3":     "must be an http(s) URL",
		"https://x/api?token=1": "without a query",
		"https://x/api#top":     "without a query",
		"https://u:p@x/api":     "holds credentials",
		"https://-x/api":        "not a plain host name",
		"https://x/a\nb":        "",
		"https://x/\x00":        "",
		"https://" + strings.Repeat("a", MaxLocation): "at most",
	} {
		if err := CheckAPIURL(api); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want an error with %q", api, err, want)
		}
	}
}

// TestResolveSecret: a webhook secret is the variable's whole value; the
// errors name the reference, never a value.
func TestResolveSecret(t *testing.T) {
	env := map[string]string{"HOOK": " s3cr:et ", "EMPTY": ""}
	lookup := &secret.Policy{Allow: []string{"env:*"}, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	if s, err := ResolveSecret("acme", "env:HOOK", lookup); err != nil || s != "s3cr:et" {
		t.Fatalf("ResolveSecret = %q, %v", s, err)
	}
	for _, ref := range []string{"", "env:EMPTY", "env:MISSING", "vault:x"} {
		if _, err := ResolveSecret("acme", ref, lookup); err == nil {
			t.Errorf("%q resolved", ref)
		}
	}
	if _, err := ResolveSecret("acme", "env:HOOK", nil); !errors.Is(err, secret.ErrRefused) {
		t.Errorf("without a policy: %v, want refused", err)
	}
	if err := CheckWebhookSecretRef("vault:x"); err == nil || !strings.Contains(err.Error(), "env:ACME_WEBHOOK_SECRET") {
		t.Errorf("CheckWebhookSecretRef: %v", err)
	}
}
