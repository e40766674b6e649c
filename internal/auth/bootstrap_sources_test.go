package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootstrapTakesTheEnvironmentThenTheConfigurationThenTheFile: the
// bootstrap token is the environment's (trimmed, at least 16
// characters), else the configured one, else the token file's (likewise),
// else a new one; none of these is "generated", and a token that is too
// short, or a file that cannot be read or made, is an error naming it.
func TestBootstrapTakesTheEnvironmentThenTheConfigurationThenTheFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(file, []byte("  file-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("0123456789abcde\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sixteen := filepath.Join(dir, "sixteen")
	if err := os.WriteFile(sixteen, []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "a-file")
	if err := os.WriteFile(aFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, env, configured, file string
		want, err                   string
	}{
		{"the environment first", " env-token-0123456789 ", "configured-token-0123", file, "env-token-0123456789", ""},
		{"16 characters in the environment", "0123456789abcdef", "", file, "0123456789abcdef", ""},
		{"15 characters in the environment", "0123456789abcde", "configured-token-0123", file, "", EnvBootstrapToken + " must be at least 16"},
		{"then the configuration", "", "configured-token-0123", file, "configured-token-0123", ""},
		{"then the file, trimmed", "", "", file, "file-token-0123456789", ""},
		{"16 characters in the file", "", "", sixteen, "0123456789abcdef", ""},
		{"15 characters in the file", "", "", short, "", "holds no usable token"},
		{"a folder where the file is", "", "", dir, "", "read bootstrap token"},
		{"a file where the folder is", "", "", filepath.Join(aFile, "token"), "", "read bootstrap token"},
	} {
		t.Setenv(EnvBootstrapToken, c.env)
		got, generated, err := Bootstrap(c.configured, c.file)
		switch {
		case c.err == "" && (err != nil || got != c.want || generated):
			t.Errorf("%s: %q, %v, %v; want %q", c.name, got, generated, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || got != "" || generated):
			t.Errorf("%s: %q, %v, %v; want an error saying %q", c.name, got, generated, err, c.err)
		}
	}
}

// TestBootstrapRefusesALinkToNothing: a token file that is a symbolic link
// to nothing can be neither read nor replaced: Bootstrap says so instead
// of trying again forever.
func TestBootstrapRefusesALinkToNothing(t *testing.T) {
	t.Setenv(EnvBootstrapToken, "")
	dir := t.TempDir()
	file := filepath.Join(dir, "bootstrap-token")
	if err := os.Symlink(filepath.Join(dir, "gone"), file); err != nil {
		t.Fatal(err)
	}
	got, generated, err := Bootstrap("", file)
	if err == nil || got != "" || generated || !strings.Contains(err.Error(), file) {
		t.Errorf("Bootstrap over a dangling link: %q, %v, %v; want an error naming the file", got, generated, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("%d files left in the folder, want only the link", len(left))
	}
}
