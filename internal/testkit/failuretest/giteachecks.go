package failuretest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// giteaChecks are the invariants of the Gitea tickets that Gitea tells at
// the end, against the database.
var giteaChecks = []check{
	{name: "gitea-merged-once", run: checkGiteaEnd,
		guards: "a GTA ticket has at most one pull request and one merge on Gitea; a done one's is merged at its branch's head and at " +
			"the head Ballet recorded; no branch is merged while its ticket is not done"},
}

// checkOnGitea reads what Gitea says at the end (every pull request,
// main's history and the branches, fetched) and checks it against the
// tickets of OnGitea in the database (giteaChecks).
func (s *suite) checkOnGitea(sn snapshot) []string {
	prs := s.gitea.pulls(s.t)
	dir := filepath.Join(s.dir, "gitea-end.git")
	if _, err := gitOut(s.dir, "init", "-q", "--bare", dir); err != nil {
		s.t.Fatal(err)
	}
	if _, err := gitOut(dir, "fetch", "-q", s.gitea.pushURL, "+refs/heads/*:refs/heads/*"); err != nil {
		s.t.Fatal(err)
	}
	log, err := gitOut(dir, "log", "--first-parent", "--format=%P%x09%s", "main")
	if err != nil {
		s.t.Fatal(err)
	}
	end := giteaEnd{prs: prs, main: mergedOnMain(log, prs), heads: map[string]string{}}
	refs, err := gitOut(dir, "for-each-ref", "--format=%(refname:lstrip=3) %(objectname)", "refs/heads/ballet/")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, l := range strings.Split(refs, "\n") {
		if key, sha, ok := strings.Cut(l, " "); ok {
			end.heads[key] = sha
		}
	}
	end.tickets = s.giteaTickets(sn)
	return s.runChecks(giteaChecks, &endState{sn: sn, gitea: end})
}

// giteaTickets are the tickets of OnGitea as the database says at the end.
func (s *suite) giteaTickets(sn snapshot) []giteaTicket {
	latest := map[string]dbFlow{} // by item id
	for _, f := range sn.flows {
		if l, ok := latest[f.ItemID]; !ok || f.StartedAt >= l.StartedAt {
			latest[f.ItemID] = f
		}
	}
	var tickets []giteaTicket
	for _, it := range sn.items {
		if projectOf(it.Key) != OnGitea || it.Type == "epic" {
			continue
		}
		f, ok := latest[it.ID]
		t := giteaTicket{Key: it.Key, Done: ok && f.Status == "done" && it.State == "done"}
		if ok && f.Status == "waiting" && f.Waiting == "answer" {
			for _, j := range sn.jobs {
				if j.Kind == jobFlowMerge && flowOfJob(j) == f.ID && s.killedEachClaim(j) {
					t.MergeGaveUp = true
				}
			}
		}
		// What Ballet decided on: the pull request its flow recorded last
		// (a flow.waiting of the merge stage), or the flow row's.
		for _, e := range sn.events {
			if ok && e.EntityID == f.ID {
				var p struct {
					PullRequest *recordedPR `json:"pull_request"`
				}
				if json.Unmarshal([]byte(e.Payload), &p) == nil && p.PullRequest != nil {
					t.Recorded = p.PullRequest
				}
			}
		}
		if ok && t.Recorded == nil && f.PullRequest != "" {
			t.Recorded = &recordedPR{}
			if err := json.Unmarshal([]byte(f.PullRequest), t.Recorded); err != nil {
				s.t.Fatalf("flow %s: pull_request %q: %v", f.ID, f.PullRequest, err)
			}
		}
		tickets = append(tickets, t)
	}
	return tickets
}

func checkGiteaEnd(s *suite, st *endState, r *report) {
	fig, problems := checkGitea(st.gitea, st.gitea.tickets)
	s.sum.GiteaPRs, s.sum.GiteaMerges, s.sum.DuplicatePRs, s.sum.DoubleMerges = fig.PRs, fig.Merges, fig.DuplicatePRs, fig.DoubleMerges
	s.sum.Duplicates += fig.DuplicatePRs + fig.DoubleMerges
	s.logf("gitea at the end: %d pull requests, %d merged; main's merges by ticket %v", fig.PRs, fig.Merges, st.gitea.main)
	r.findings = append(r.findings, problems...)
}

// mergedOnMain reads main's first-parent history (fetched into work) and
// counts the merge commits of each ticket's branch: a merge commit's
// second parent is the head of some pull request of ballet/KEY, or its
// message names the branch.
func mergedOnMain(log string, prs []giteaPR) map[string][]string {
	headKey := map[string]string{}
	for _, p := range prs {
		if k := p.key(); k != "" {
			headKey[p.Head.SHA] = k
		}
	}
	out := map[string][]string{}
	for _, l := range strings.Split(log, "\n") {
		parents, subject, _ := strings.Cut(l, "\t")
		p := strings.Fields(parents)
		if len(p) != 2 {
			continue
		}
		k := headKey[p[1]]
		if m := fromBranchRE.FindStringSubmatch(subject); k == "" && m != nil {
			k = m[1]
		}
		if k != "" {
			out[k] = append(out[k], p[1])
		}
	}
	return out
}

var fromBranchRE = regexp.MustCompile(`from ballet/(\S+) into`)

// giteaEnd is what Gitea says at the end: every pull request, main's
// merge commits by ticket (second parents), the branches' heads.
type giteaEnd struct {
	prs     []giteaPR
	main    map[string][]string
	heads   map[string]string
	tickets []giteaTicket // the tickets of OnGitea, as the database says
}

// giteaDone is a ticket of OnGitea as the database says at the end: its
// flow is done (dbFlow.Status) and the pull request it recorded.
type giteaTicket struct {
	Key      string
	Done     bool
	Recorded *recordedPR // flows.pull_request, nil when none
	// MergeGaveUp: its flow waits for a person's answer because its merge
	// check's job died of claims lost to Core kills, too many in a row
	// (killedEachClaim). A merge call cut by one of those kills may have
	// landed on Gitea (Gitea pushes the base before it marks the pull
	// request merged, so a cut call can leave the branch in main and the
	// pull request open); the answer runs the stage again, whose check
	// finds the head in the base and records the merge. Such a ticket may
	// be merged once though not done.
	MergeGaveUp bool
}

type recordedPR struct {
	Number  int    `json:"number"`
	HeadSHA string `json:"head_sha"`
}

// giteaFigures are the summary's Gitea counts.
type giteaFigures struct {
	PRs, Merges, DuplicatePRs, DoubleMerges int
}

// checkGitea checks what Gitea says against the tickets: per ticket at most
// one pull request of ballet/KEY (a second is a duplicate) and at most one
// merge; a done ticket's pull request merged, at the head of its branch and
// at the head Ballet recorded; no branch merged into main twice, nor merged
// at all while its ticket is not done.
func checkGitea(end giteaEnd, tickets []giteaTicket) (giteaFigures, []string) {
	var fig giteaFigures
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byKey := map[string][]giteaPR{}
	for _, p := range end.prs {
		if k := p.key(); k != "" {
			byKey[k] = append(byKey[k], p)
			fig.PRs++
			if p.Merged {
				fig.Merges++
			}
		}
	}
	known := map[string]bool{}
	for _, t := range tickets {
		known[t.Key] = true
		prs := byKey[t.Key]
		var merged []giteaPR
		for _, p := range prs {
			if p.Merged {
				merged = append(merged, p)
			}
		}
		if len(prs) > 1 {
			fig.DuplicatePRs += len(prs) - 1
			bad("DUPLICATE PR: ballet/%s has %d pull requests on Gitea: %v", t.Key, len(prs), numbers(prs))
		}
		if len(merged) > 1 {
			fig.DoubleMerges += len(merged) - 1
			bad("DOUBLE MERGE: %d pull requests of ballet/%s merged on Gitea: %v", len(merged), t.Key, numbers(merged))
		}
		if n := len(end.main[t.Key]); n > 1 {
			fig.DoubleMerges += n - 1
			bad("DOUBLE MERGE: ballet/%s merged into main %d times (heads %v)", t.Key, n, end.main[t.Key])
		}
		switch {
		case !t.Done && t.MergeGaveUp && len(merged) <= 1 && len(end.main[t.Key]) <= 1:
			// merged by a killed attempt, or not at all: the person's answer
			// finishes it (a second merge is caught above)
		case !t.Done && (len(merged) > 0 || len(end.main[t.Key]) > 0):
			bad("%s is not done, but its branch was merged on Gitea (pull requests %v, main's merges of it %v)", t.Key, numbers(merged),
				end.main[t.Key])
		case !t.Done:
		case len(merged) != 1:
			bad("%s is done, but %d of its %d pull requests on Gitea are merged (want exactly one): %v", t.Key, len(merged), len(prs), numbers(prs))
		default:
			p := merged[0]
			head := end.heads[t.Key]
			if p.Head.SHA != head || !slices.Equal(end.main[t.Key], []string{head}) {
				bad("%s is done, but Gitea merged pull request #%d at %s, its branch is at %s and main merged %v: want the branch's head merged once",
					t.Key, p.Number, p.Head.SHA, head, end.main[t.Key])
			}
			if r := t.Recorded; r == nil || r.Number != p.Number || r.HeadSHA != p.Head.SHA {
				bad("%s is done, but Ballet recorded pull request %+v while Gitea merged #%d at %s", t.Key, r, p.Number, p.Head.SHA)
			}
		}
	}
	for k := range byKey {
		if !known[k] {
			bad("pull requests of ballet/%s on Gitea, which is no ticket of %s: %v", k, OnGitea, numbers(byKey[k]))
		}
	}
	sort.Strings(problems)
	return fig, problems
}

func numbers(prs []giteaPR) []string {
	var out []string
	for _, p := range prs {
		st := p.State
		if p.Merged {
			st = "merged"
		}
		out = append(out, fmt.Sprintf("#%d %s head %s", p.Number, st, p.Head.SHA))
	}
	return out
}
