package gitforge

import (
	"testing"

	"github.com/ballet/ballet/internal/forge"
)

// TestStateWithoutABaseUsesTheDefaultBranch: a pull request recorded
// without a base is judged against the repository's default branch: its
// branch merged into the default branch is merged, not merged into
// another branch.
func TestStateWithoutABaseUsesTheDefaultBranch(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.git("branch", "trunk", "main")
	w.git("push", "--quiet", "origin", "trunk")
	sha := w.pushBranch("ACME-1")
	w.git("merge", "--quiet", "--ff-only", sha)
	w.git("push", "--quiet", "origin", "main") // merged into main, not into trunk
	f := New(t.TempDir())
	for _, c := range []struct {
		def    string
		merged bool
	}{{"main", true}, {"trunk", false}} {
		st := w.state(f, forge.Repo{URL: w.bare, DefaultBranch: c.def}, forge.PullRequest{Branch: "ACME-1"})
		if st.Base != c.def || st.Merged != c.merged || st.Open == c.merged {
			t.Errorf("default branch %s: %s (base %q), want merged %v", c.def, flags(st), st.Base, c.merged)
		}
	}
}
