package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const bootstrap = "bootstrap-token-0123456789abcdef"

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestParse: only env:NAME and file:/absolute/clean/path, lower-case
// schemes, nothing with spaces or control characters.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"env:GITEA_TOKEN", "env:_x1", "file:/etc/ballet/forge/acme"} {
		if _, err := Parse(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for s, want := range map[string]string{
		"":                                   "must be scheme:name",
		"GITEA_TOKEN":                        "must be scheme:name",
		"env:":                               "not an environment variable name",
		"ENV:BALLET_X":                       `the scheme "ENV" is unknown`,
		"Env:X":                              `the scheme "Env" is unknown`,
		"File:/etc/x":                        `the scheme "File" is unknown`,
		"vault:x":                            `the scheme "vault" is unknown`,
		"env:1X":                             "not an environment variable name",
		"env:A-B":                            "not an environment variable name",
		"env:A=B":                            "not an environment variable name",
		"env:A:B":                            "not an environment variable name",
		" env:X":                             "space or control",
		"env:X ":                             "space or control",
		"env: X":                             "space or control",
		"env:X\n":                            "space or control",
		"env:X\t":                            "space or control",
		"env:X\u00a0":                        "space or control",
		"env:X\x00":                          "space or control",
		"file:":                              "absolute, clean path",
		"file:../etc/passwd":                 "absolute, clean path",
		"file:etc/passwd":                    "absolute, clean path",
		"file:/etc/ballet/../shadow":         "absolute, clean path",
		"file:/etc/./x":                      "absolute, clean path",
		"file://etc/x":                       "absolute, clean path",
		"file:/etc/x/":                       "absolute, clean path",
		"file:/":                             "absolute, clean path",
		"file:/etc/a b":                      "space or control",
		"file:~/x":                           "absolute, clean path",
		"env:" + strings.Repeat("A", MaxRef): "at most",
	} {
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", s, err, want)
		}
	}
}

// TestCheckPattern: allow-list patterns are env:GLOB or file:/GLOB.
func TestCheckPattern(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"env:GITEA_*", "env:*", "file:/etc/ballet/forge/*", "env:ACME_[A-Z]*"} {
		if err := CheckPattern(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "GITEA_*", "ENV:X", "env:", "env:[", "file:etc/*", "file:/etc/../*", "vault:*", "env:A B"} {
		if err := CheckPattern(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

// TestBalletsOwnVariablesNeverResolve: whatever the allow list says (even
// env:*, even a glob written for BALLET_*), Ballet's variables, the model
// providers' keys and what the runner passes to sessions are refused, in
// any case; the allow list is matched exactly otherwise.
func TestBalletsOwnVariablesNeverResolve(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"BALLET_BOOTSTRAP_TOKEN": bootstrap, "ballet_bootstrap_token": bootstrap, "BALLET_KNOWLEDGE_TOKEN": "k",
		"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai", "Anthropic_Api_Key": "x", "MY_MODEL_KEY": "m",
		"GITEA_TOKEN": "gitea-token", "GITEAX": "x", "GITEA_LEAK": "x" + bootstrap + "x"}
	p := &Policy{Allow: []string{"env:*", "env:BALLET_*", "env:ANTHROPIC_*"},
		Own: Own{EnvNames: []string{"MY_MODEL_KEY"}, Values: []string{bootstrap}}, LookupEnv: env(vars)}
	for _, ref := range []string{"env:BALLET_BOOTSTRAP_TOKEN", "env:ballet_bootstrap_token", "env:BALLET_KNOWLEDGE_TOKEN",
		"env:ANTHROPIC_API_KEY", "env:Anthropic_Api_Key", "env:OPENAI_API_KEY", "env:my_model_key", "env:MY_MODEL_KEY"} {
		if err := p.Check("acme", ref); !errors.Is(err, ErrRefused) {
			t.Errorf("Check(%s) = %v, want refused", ref, err)
		}
		if v, err := p.Resolve("acme", ref); !errors.Is(err, ErrRefused) || v != "" {
			t.Errorf("Resolve(%s) = %q, %v, want refused", ref, v, err)
		}
	}
	// A variable of another name holding Ballet's credential is refused
	// at use, and the error names the reference, never the value.
	if _, err := p.Resolve("acme", "env:GITEA_LEAK"); !errors.Is(err, ErrRefused) || strings.Contains(err.Error(), bootstrap) {
		t.Errorf("Resolve(env:GITEA_LEAK) = %v, want refused without the value", err)
	}
	if v, err := p.Resolve("acme", "env:GITEA_TOKEN"); err != nil || v != "gitea-token" {
		t.Errorf("Resolve(env:GITEA_TOKEN) = %q, %v", v, err)
	}

	narrow := &Policy{Allow: []string{"env:GITEA_*"}, LookupEnv: env(vars)}
	for ref, want := range map[string]error{"env:GITEA_TOKEN": nil, "env:GITEAX": ErrRefused, "env:gitea_token": ErrRefused,
		"env:OTHER": ErrRefused, "env:GITEA_MISSING": ErrMissing} {
		if _, err := narrow.Resolve("acme", ref); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("narrow Resolve(%s) = %v, want %v", ref, err, want)
		}
	}
	if err := (&Policy{}).Check("acme", "env:GITEA_TOKEN"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "[secrets] allow") {
		t.Errorf("the empty allow list: %v", err)
	}
}

// TestBalletsOwnFilesNeverResolve: a file reference is refused when it is,
// lies in, or links to (symbolic or hard link) one of Ballet's own files,
// when it is no regular file (a FIFO would hang a read), too large, a
// system path, or holds Ballet's credential.
func TestBalletsOwnFilesNeverResolve(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	forgeDir := filepath.Join(root, "forge")
	for _, d := range []string{data, forgeDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tokenFile := filepath.Join(data, "bootstrap-token")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tokenFile, bootstrap+"\n")
	write(filepath.Join(data, "other"), "not a credential of Ballet's but in its folder")
	write(filepath.Join(forgeDir, "acme"), "  gitea-token\n")
	write(filepath.Join(forgeDir, "empty"), " \n")
	write(filepath.Join(forgeDir, "big"), strings.Repeat("x", MaxFile+1))
	write(filepath.Join(forgeDir, "copy"), "user:"+bootstrap)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(tokenFile, filepath.Join(forgeDir, "sym")))
	must(os.Symlink("../data/other", filepath.Join(forgeDir, "relsym")))
	must(os.Symlink(data, filepath.Join(forgeDir, "dirsym")))
	must(os.Link(tokenFile, filepath.Join(forgeDir, "hard")))
	must(syscall.Mkfifo(filepath.Join(forgeDir, "fifo"), 0o600))
	must(os.Mkdir(filepath.Join(forgeDir, "dir"), 0o700))

	own := Own{}
	own.AddPath(data)
	own.AddPath(tokenFile)
	p := &Policy{Allow: []string{"file:" + forgeDir + "/*", "file:" + forgeDir + "/dirsym/*", "file:" + data + "/*", "file:/proc/*/*"},
		Own: own}
	if v, err := p.Resolve("acme", "file:"+forgeDir+"/acme"); err != nil || v != "gitea-token" {
		t.Fatalf("Resolve(acme) = %q, %v", v, err)
	}
	for name, want := range map[string]error{
		data + "/bootstrap-token":  ErrRefused, // allowed by a pattern, Ballet's own all the same
		data + "/other":            ErrRefused,
		forgeDir + "/sym":          ErrRefused,
		forgeDir + "/relsym":       ErrRefused,
		forgeDir + "/dirsym/other": ErrRefused,
		forgeDir + "/hard":         ErrRefused, // no link to follow: the same file
		forgeDir + "/fifo":         ErrRefused,
		forgeDir + "/dir":          ErrRefused,
		forgeDir + "/big":          ErrRefused,
		forgeDir + "/empty":        ErrMissing,
		forgeDir + "/missing":      ErrMissing,
		forgeDir + "/sub/x":        ErrRefused, // '*' never crosses '/'
		"/proc/self/environ":       ErrRefused,
		"/proc/1/environ":          ErrRefused,
		filepath.Dir(root) + "/x":  ErrRefused,
	} {
		v, err := p.Resolve("acme", "file:"+name)
		if !errors.Is(err, want) || v != "" {
			t.Errorf("Resolve(file:%s) = %q, %v, want %v", name, v, err, want)
		}
		if err != nil && strings.Contains(err.Error(), bootstrap) {
			t.Errorf("the error of %s holds the value: %v", name, err)
		}
	}
	// Values: a copy of the token elsewhere is refused once Ballet's
	// credentials are known.
	p.Own.Values = []string{bootstrap}
	if _, err := p.Resolve("acme", "file:"+forgeDir+"/copy"); !errors.Is(err, ErrRefused) {
		t.Errorf("a copy of the token: %v, want refused", err)
	}
	// Save time already sees where a link leads.
	if err := p.Check("acme", "file:"+forgeDir+"/sym"); !errors.Is(err, ErrRefused) {
		t.Errorf("Check(sym) = %v, want refused", err)
	}
}

// TestOwnEnv: HasEnv is the rule Core uses to collect its own variables'
// values.
func TestOwnEnv(t *testing.T) {
	t.Parallel()
	o := Own{EnvNames: []string{"MODEL_KEY"}}
	for name, want := range map[string]bool{"BALLET_X": true, "ballet_x": true, "OPENAI_API_KEY": true, "ANTHROPIC_BASE_URL": true,
		"model_key": true, "GITEA_TOKEN": false, "BALLETX": false} {
		if got := o.HasEnv(name); got != want {
			t.Errorf("HasEnv(%s) = %v, want %v", name, got, want)
		}
	}
}
