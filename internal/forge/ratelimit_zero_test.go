package forge

import (
	"net/http"
	"testing"
	"time"
)

// An X-RateLimit-Reset of 0 says nothing (no epoch second 0 is meant): the
// answer waits the default, not until now.
func TestRateLimitResetZeroSaysNothing(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("X-RateLimit-Reset", "0")
	if until, ok := RetryAt(h, now); ok {
		t.Errorf("RetryAt = %s, true; want nothing said", until)
	}
	if got := RateLimit(429, h, now); got == nil || !got.Until.Equal(now.Add(DefaultRateLimitWait)) {
		t.Errorf("RateLimit = %v, want until now + %s", got, DefaultRateLimitWait)
	}
}

// Kinds is every forge kind a repository may name.
func TestKindsAreEveryForge(t *testing.T) {
	if len(Kinds) != 3 || Kinds[0] != KindGit || Kinds[1] != KindGitea || Kinds[2] != KindGitHub {
		t.Errorf("Kinds = %q", Kinds)
	}
}
