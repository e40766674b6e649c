// Package gitexec runs every git command Ballet runs, in Core (the plain-git
// forge) and in the runner (workspaces), one way: without a shell, in its
// own process group, bounded in time and in what it may print, with errors
// that name the command, printable and with every credential removed; and
// keeps the bare mirrors both sides fetch into, one lock per mirror.
//
// Its environment (Base) is the process's own without what would point git
// at another repository or configuration, trace its traffic or give it an
// identity, plus no prompts, ssh in batch mode, only the file, http(s) and
// ssh transports and untranslated messages.
package gitexec

import (
	"os"
	"strings"
)

// Base returns os.Environ() made safe for git (package doc).
// GIT_ALLOW_PROTOCOL overrides any protocol.*.allow configuration;
// GIT_TRACE* and GIT_CURL_VERBOSE would print an Authorization header.
func Base() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if dropped(k) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=file:http:https:ssh", "LC_ALL=C")
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		env = append(env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	}
	return env
}

// dropped says whether Base leaves the variable k out.
func dropped(k string) bool {
	switch k {
	case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
		"GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_QUARANTINE_PATH", "GIT_TERMINAL_PROMPT",
		"GIT_ALLOW_PROTOCOL", "GIT_PROTOCOL_FROM_USER", "GIT_ASKPASS", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
		"GIT_CONFIG_COUNT", "GIT_CURL_VERBOSE", "GIT_REDACT_COOKIES", "LC_ALL", "LANGUAGE":
		return true
	}
	for _, prefix := range []string{"GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_TRACE", "GIT_AUTHOR_", "GIT_COMMITTER_"} {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
