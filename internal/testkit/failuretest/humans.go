package failuretest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge/gitforge"
)

// The humans around the tickets, as the harness plays them: a person who
// approves human stages and merges the branches of a project whose merge
// policy is manual. (The agent tickets' person answers questions, see
// answerAgentQuestions; Gitea's CI and reviewer are in playForge.)

// actAsHumans approves human stages and merges branches whose flow waits
// for a human merge (once per ticket).
func (s *suite) actAsHumans() {
	alive := func() bool { return !s.core.dead() }
	keys := make([]string, 0, len(s.flows))
	for k := range s.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := s.flows[k]
		switch {
		case f.Status == "waiting" && f.Waiting == "approval" && s.approvedAt[k] != f.Version:
			status, b, err := s.api.call(alive, 10*time.Second, AdminToken, "POST", "/api/v1/items/"+k+"/flow/approve", map[string]any{"comment": "approved by the failure suite"})
			if err != nil {
				return // Core is down: next round
			}
			s.approvedAt[k] = f.Version
			s.logf("approve %s (%s): %d", k, f.Stage, status)
			if status != 200 && status != 409 {
				s.t.Errorf("approve %s: %d %s", k, status, b)
			}
		case s.willAnswer(k, f):
			s.answerAgentQuestions(k, f)
		case f.Status == "waiting" && f.Waiting == "merge" && (projectOf(k) == BalletMerges || projectOf(k) == Agents || projectOf(k) == OnGitea):
			if !s.askedHuman[k] {
				s.askedHuman[k] = true
				msg := fmt.Sprintf("%s waits for a human merge, but Ballet merges %s's tickets (merge policy auto): %+v", k, projectOf(k), f)
				s.anomalies = append(s.anomalies, msg)
				s.logf("ANOMALY: %s", msg)
			}
		case f.Status == "waiting" && f.Waiting == "merge":
			if s.merged[k] > 0 && s.mergedIter[k] == f.Iteration {
				continue // merged: the next check of the merge stage sees it
			}
			if s.merged[k] > 0 {
				msg := fmt.Sprintf("%s waits for a merge again in iteration %d after its merge in iteration %d", k, f.Iteration, s.mergedIter[k])
				s.anomalies = append(s.anomalies, msg)
				s.logf("DUPLICATE: %s", msg)
			}
			if err := s.humanMerge("ballet/" + k); err != nil {
				s.t.Fatal(err)
			}
			s.merged[k]++
			s.mergedIter[k] = f.Iteration
			s.logf("merge ballet/%s (iteration %d)", k, f.Iteration)
		}
	}
}

// humanMerge merges branch into main with a merge commit "merge BRANCH"
// and pushes it, as a person does; when Ballet merged another branch
// meanwhile (the push is refused), the person merges onto the new main
// and pushes again.
func (s *suite) humanMerge(branch string) error {
	work := s.repo.Work
	var err error
	for range 20 {
		for _, args := range [][]string{{"fetch", "-q", "origin"}, {"checkout", "-q", "main"}, {"reset", "-q", "--hard", "origin/main"},
			{"merge", "-q", "--no-ff", "-m", "merge " + branch, "origin/" + branch}} {
			if _, err := gitOut(work, args...); err != nil {
				return err
			}
		}
		if _, err = gitOut(work, "push", "-q", "origin", "main"); err == nil {
			return nil
		}
		if strings.Contains(err.Error(), "main.lock") || strings.Contains(err.Error(), "HEAD.lock") {
			// A Core killed while it merged left main's lock in the
			// repository: once it is stale, remove it, as the forge's
			// server would, and push again.
			time.Sleep(gitforge.StaleRefLock / 4)
			if lerr := gitforge.RecoverStaleLocks(s.repo.Bare, "refs/heads/main", time.Now()); lerr != nil {
				return lerr
			}
			continue
		}
		s.logf("merge %s: the push was refused (main moved), merging again: %v", branch, err)
	}
	return fmt.Errorf("merge %s: main kept moving: %w", branch, err)
}
