package auth

import "testing"

// TestSafeNext: only a path of Ballet's own comes back after signing in.
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{"": "/", "/": "/", "/needs-me": "/needs-me", "/items/ACME-1#run-2": "/items/ACME-1#run-2",
		"/projects/ACME/pipelines?name=bug": "/projects/ACME/pipelines?name=bug"} {
		if got, err := SafeNext(next); err != nil || got != want {
			t.Errorf("SafeNext(%q) = %q, %v; want %q", next, got, err, want)
		}
	}
	for _, next := range []string{"https://evil.example/", "//evil.example", "/\\evil.example", "\\\\evil.example", "evil.example",
		"javascript:alert(1)", "/x\r\nSet-Cookie: a=b", "http:/evil", "///evil.example"} {
		if got, err := SafeNext(next); err == nil {
			t.Errorf("SafeNext(%q) = %q: accepted", next, got)
		}
	}
}
