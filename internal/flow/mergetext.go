package flow

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/forge"
)

// The texts of a merge stage, pure: the pull request's title and body
// Ballet opens, and the report a failed merge stage writes for the next
// agent stage (what failed, and where to look).

// Size bounds of the texts, in bytes.
const (
	maxPRTitle      = 250  // GitHub refuses titles over 256 characters
	maxPRSection    = 3000 // each of the description head, criteria, report
	maxReportList   = 20   // checks or reviews listed in a report
	maxReportItem   = 1000 // one review's words, one check's name and URL
	maxMergeReport  = 8000 // a failed merge stage's whole report
	descriptionHead = 12   // lines of the ticket's description in the body
)

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// headLines is the first n lines of s, marked when cut.
func headLines(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimSpace(s), "\n")
	if len(lines) <= n {
		return strings.TrimSpace(s)
	}
	return strings.TrimSpace(strings.Join(lines[:n], "")) + "\n…"
}

// unmark keeps text a person wrote from carrying a Ballet marker (an HTML
// comment opening "<!-- ballet:") into a pull request's body: only the
// body's own marker names the ticket and the flow.
func unmark(s string) string { return strings.ReplaceAll(s, "<!--", "<!‐‐") }

// PRTitle is the title of the pull request Ballet opens for a ticket:
// "KEY: title".
func PRTitle(key, title string) string {
	return clip(strings.TrimSpace(key+": "+strings.Join(strings.Fields(title), " ")), maxPRTitle)
}

// PRBodyInput is what the body of a ticket's pull request says.
type PRBodyInput struct {
	Key, Title, Description, AcceptanceCriteria string
	FlowID, Pipeline                            string
	PipelineVersion                             int64
	Stage                                       string // the merge stage
	Iteration                                   int
	ReportStage, Report                         string // the last stage report, if any
}

// PRBody is the body of the pull request Ballet opens, for a reviewer and
// for an agent: Ballet's marker (forge.Marker, invisible when rendered),
// the head of the ticket's description, its acceptance criteria, the last
// stage report, and a line naming the flow (no link: Core's address is
// not the forge's business). Each part is bounded, so the body is too.
func PRBody(in PRBodyInput) string {
	var b strings.Builder
	b.WriteString(forge.Marker(in.Key, in.FlowID) + "\n\n")
	fmt.Fprintf(&b, "Ballet opened this pull request for %s: %s\n", in.Key, clip(strings.Join(strings.Fields(in.Title), " "), maxPRTitle))
	section := func(title, text string) {
		if text = strings.TrimSpace(text); text != "" {
			fmt.Fprintf(&b, "\n### %s\n\n%s\n", title, clip(unmark(text), maxPRSection))
		}
	}
	section("Description", headLines(in.Description, descriptionHead))
	section("Acceptance criteria", in.AcceptanceCriteria)
	if in.ReportStage != "" {
		section("Report of stage "+in.ReportStage, in.Report)
	} else {
		section("Last stage report", in.Report)
	}
	fmt.Fprintf(&b, "\n---\nBallet flow %s of %s (pipeline %s version %d), stage %s, iteration %d.\n",
		in.FlowID, in.Key, in.Pipeline, in.PipelineVersion, in.Stage, in.Iteration)
	return b.String()
}

// MergeReport is the report of a merge stage that ended failed, written
// for the agent stage that receives it: what failed (the decision's
// reason) and where to look — the pull request, the failing checks by name
// with their pages when the forge gave them, the reviewers' words, the
// conflict with the base, a closed pull request. pr is nil when none was
// found.
func MergeReport(d forge.Decision, st forge.State, pr *forge.PullRequest) string {
	var b strings.Builder
	b.WriteString("The merge stage failed: " + clip(d.Reason, maxReportItem) + ".\n")
	branch, base := st.Branch, st.Base
	if pr != nil {
		branch, base = cmp(branch, pr.Branch), cmp(base, pr.Base)
		where := branch + " into " + base
		if head := cmp(st.HeadSHA, pr.HeadSHA); head != "" {
			where += ", head " + head
		}
		switch {
		case pr.URL != "":
			fmt.Fprintf(&b, "Pull request: %s (#%d, %s).\n", pr.URL, pr.Number, where)
		case pr.Number != 0:
			fmt.Fprintf(&b, "Pull request #%d (%s).\n", pr.Number, where)
		default:
			fmt.Fprintf(&b, "Branch: %s.\n", where)
		}
	}
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		b.WriteString(title + "\n")
		for i, it := range items {
			if i == maxReportList {
				fmt.Fprintf(&b, "- … and %d more\n", len(items)-i)
				break
			}
			b.WriteString("- " + clip(strings.ReplaceAll(strings.TrimSpace(it), "\n", "\n  "), maxReportItem) + "\n")
		}
	}
	switch {
	case st.Merged:
	case st.Closed && !st.BranchPushed:
		fmt.Fprintf(&b, "The branch %s was deleted without being merged. Push the work to %s again; the merge stage opens a new pull request.\n", cmp(branch, "of the ticket"), cmp(branch, "the ticket's branch"))
	case st.Closed:
		b.WriteString("Someone closed the pull request on the forge without merging it. Find out why (its comments) before pushing more work: a new pull request is opened only when the merge stage runs again.\n")
	case !st.BranchPushed:
		fmt.Fprintf(&b, "Nothing was pushed to %s. Commit the work on that branch and push it.\n", cmp(branch, "the ticket's branch"))
	case st.Checks == forge.ChecksFailure || len(st.FailingChecks) > 0:
		var checks []string
		for _, c := range st.FailingChecks {
			if u := st.FailingCheckURLs[c]; u != "" {
				c += ": " + u
			}
			checks = append(checks, c)
		}
		list("Failing checks (read their output, fix the cause on the branch and push):", checks)
		if len(checks) == 0 {
			b.WriteString("The forge did not name the failing checks: look at the pull request's checks.\n")
		}
	case st.ChangesRequested:
		list("Changes requested by reviewers (address each, push, and say what you changed in your report):", st.ChangeRequests)
		if len(st.ChangeRequests) == 0 {
			b.WriteString("A reviewer requested changes: read the review on the pull request.\n")
		}
	case st.Mergeable != nil && !*st.Mergeable:
		fmt.Fprintf(&b, "%s conflicts with %s: merge %s into %s (or rebase it), resolve the conflicts, run the tests and push.\n",
			cmp(branch, "The branch"), cmp(base, "the default branch"), cmp(base, "the default branch"), cmp(branch, "the branch"))
	}
	return clip(b.String(), maxMergeReport)
}

// cmp is a, or b when a is empty.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
