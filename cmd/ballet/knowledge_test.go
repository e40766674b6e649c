package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ballet knowledge refuses to start without the service credential and on
// a bad key, naming the key, with exit status 2.
func TestKnowledgeRefusesToStart(t *testing.T) {
	t.Setenv("BALLET_KNOWLEDGE_TOKEN", "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[knowledge]\nauth_cache = \"1h\"\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"knowledge"}, "knowledge.service_token: must be set"},
		{[]string{"knowledge", "--config", bad}, "knowledge.auth_cache"},
		{[]string{"knowledge", "--core", "nope"}, "knowledge.core"},
		{[]string{"knowledge", "extra"}, "unexpected argument"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: %d %s, want 2 naming %q", c.args, code, errb.String(), c.want)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"knowledge", "--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "BALLET_KNOWLEDGE_TOKEN") {
		t.Errorf("help: %d %s", code, out.String())
	}
}
