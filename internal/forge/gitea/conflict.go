package gitea

import (
	"time"

	sdk "code.gitea.io/sdk/gitea"
)

// unmergeable names a pull request at a head and base seen unmergeable.
type unmergeable struct {
	repo       string
	number     int
	head, base string
}

// maxUnmergeable bounds the pull requests State remembers as unmergeable.
const maxUnmergeable = 10000

// key is p's entry among the unmergeable ones.
func key(t target, p *sdk.PullRequest) unmergeable {
	k := unmergeable{repo: t.base + "/" + t.full, number: int(p.Index)}
	if p.Head != nil {
		k.head = p.Head.Sha
	}
	if p.Base != nil {
		k.base = p.Base.Sha
	}
	return k
}

// conflictFor records that p is unmergeable at its head and base, and
// reports whether it has been so for ConflictAfter.
func (f *Forge) conflictFor(t target, p *sdk.PullRequest) bool {
	if f.conflictAfter < 0 {
		return true
	}
	now := f.clock.Now()
	k := key(t, p)
	f.mu.Lock()
	defer f.mu.Unlock()
	first, ok := f.since[k]
	if !ok {
		if len(f.since) >= maxUnmergeable {
			for old, at := range f.since {
				if now.Sub(at) > 24*time.Hour || len(f.since) >= maxUnmergeable {
					delete(f.since, old)
				}
			}
		}
		f.since[k], first = now, now
	}
	return now.Sub(first) >= f.conflictAfter
}

// forget drops p's unmergeable record: it merges.
func (f *Forge) forget(t target, p *sdk.PullRequest) {
	f.mu.Lock()
	delete(f.since, key(t, p))
	f.mu.Unlock()
}
