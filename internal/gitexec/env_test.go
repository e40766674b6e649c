package gitexec

import (
	"slices"
	"strings"
	"testing"
)

// TestBase: what would steer or trace git is gone, the caller's other
// variables stay, and Ballet's own settings are added once.
func TestBase(t *testing.T) {
	for _, kv := range []string{"GIT_DIR=/elsewhere", "GIT_TRACE_CURL=1", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.sshCommand",
		"GIT_CONFIG_VALUE_0=evil", "GIT_AUTHOR_NAME=someone", "GIT_ASKPASS=/bin/true", "GIT_ALLOW_PROTOCOL=ext", "LC_ALL=de_DE",
		"BALLET_GITENV_KEPT=yes"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("GIT_SSH_COMMAND", "")
	env := Base()
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if dropped(k) && !slices.Contains([]string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=file:http:https:ssh", "LC_ALL=C"}, kv) {
			t.Errorf("Base keeps %s", kv)
		}
	}
	for _, want := range []string{"BALLET_GITENV_KEPT=yes", "GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=file:http:https:ssh",
		"LC_ALL=C", "GIT_SSH_COMMAND=ssh -o BatchMode=yes"} {
		if !slices.Contains(env, want) {
			t.Errorf("Base lacks %s", want)
		}
	}
}
