package agent

import (
	"strings"
	"testing"
)

// The prompt names the branch the lease gives (a continued branch may
// have any name); without one it is ballet/<KEY>.
func TestPromptNamesTheLeasedBranch(t *testing.T) {
	s := spec(t)
	s.Session.Repository.Branch = "feature/health"
	p, err := Prompt(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, "branch feature/health") || strings.Contains(p, "ballet/ACME-1") {
		t.Errorf("the prompt does not name the leased branch feature/health:\n%s", p)
	}
	for _, c := range []struct {
		name   string
		change func(*Spec)
	}{
		{"no repository", func(s *Spec) { s.Session.Repository = nil }},
		{"no branch", func(s *Spec) { s.Session.Repository.Branch = "" }},
	} {
		s := spec(t)
		c.change(&s)
		if p, _ := Prompt(s); !strings.Contains(p, "branch ballet/ACME-1") {
			t.Errorf("%s: the prompt does not name ballet/ACME-1:\n%s", c.name, p)
		}
	}
}

// Every version of Opus 4.0 is priced as Opus 4.0, however it is spelt,
// not as the cheaper later Opus.
func TestListPricesOpus40(t *testing.T) {
	for _, m := range []string{"claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-20250514", "claude-opus-4@20250514"} {
		if p, ok := ListPrices(m); !ok || p.Input != 15 || p.Output != 75 {
			t.Errorf("ListPrices(%q) = %+v, %v; want Opus 4.0's $15/$75", m, p, ok)
		}
	}
}
