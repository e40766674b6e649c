package changes

import (
	"net/url"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/run"
)

// The trailers Ballet's runner ends each commit message with (package
// internal/runner/workspace writes them).
const (
	TrailerTicket = "Ballet-Ticket"
	TrailerStage  = "Ballet-Stage"
	TrailerRun    = "Ballet-Run"
)

// attribute renders commits, naming the stage and run of those Ballet's
// runner made for this ticket (pure). A commit's trailers are only a
// claim — anyone can write them — so they count only when they name a run
// of this ticket, recorded by Core, at that stage.
func attribute(commits []forge.Commit, ticket string, runs []run.Run) []BranchCommit {
	stageOf := make(map[string]string, len(runs))
	for _, r := range runs {
		stageOf[r.ID] = r.Stage
	}
	out := make([]BranchCommit, 0, len(commits))
	for _, c := range commits {
		title, _, _ := strings.Cut(c.Message, "\n")
		v := BranchCommit{SHA: c.SHA, Title: strings.TrimRight(title, "\r"), Author: c.Author, Time: c.Time.UTC().Format(time.RFC3339)}
		t := trailers(c.Message)
		if stage, ok := stageOf[t[TrailerRun]]; ok && t[TrailerTicket] == ticket && t[TrailerStage] == stage {
			v.Stage, v.Run = stage, t[TrailerRun]
		}
		out = append(out, v)
	}
	return out
}

// trailers reads the "Key: value" lines of a message's last paragraph
// (none when the message is one paragraph: a subject is no trailer).
func trailers(msg string) map[string]string {
	msg = strings.TrimRight(strings.ReplaceAll(msg, "\r\n", "\n"), "\n ")
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(msg[i+2:], "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil // not a trailer block
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// pullRequest renders a forge's pull request (pure). Its links are what
// the forge was told — a check's target URL is whatever CI sent — and the
// ticket page makes them links: only web pages (webURL) are kept.
func pullRequest(p forge.PullView) *BranchPull {
	out := &BranchPull{Number: p.Number, URL: webURL(p.URL), State: p.State, Mergeable: p.Mergeable, Checks: []BranchCheck{}, Reviews: []BranchReview{}}
	for _, c := range p.Checks {
		out.Checks = append(out.Checks, BranchCheck{Name: c.Name, State: c.State, URL: webURL(c.URL)})
	}
	for _, r := range p.Reviews {
		out.Reviews = append(out.Reviews, BranchReview{Reviewer: r.Reviewer, State: r.State, Stale: r.Stale, URL: webURL(r.URL)})
	}
	return out
}

// webURL returns s when it is an absolute http or https URL with a host,
// else "" (no link): a javascript: or data: URL on the ticket page would
// run in Ballet's origin when clicked (pure).
func webURL(s string) string {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(s, "\x00\r\n\t") {
		return ""
	}
	return s
}
