package digest

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/budget"
)

// SubjectLine is a digest's mail subject: what needs the person and what
// happened, in numbers ("Ballet digest — 3 need you, 5 done, 1 failed").
func SubjectLine(d Digest) string {
	var parts []string
	if d.Needs > 0 {
		switch {
		case d.NeedsTruncated:
			parts = append(parts, fmt.Sprintf("%d+ need you", d.Needs))
		case d.Needs == 1:
			parts = append(parts, "1 needs you")
		default:
			parts = append(parts, fmt.Sprintf("%d need you", d.Needs))
		}
	}
	if d.Finished > 0 {
		parts = append(parts, fmt.Sprintf("%d done", d.Finished))
	}
	if d.Failures > 0 {
		parts = append(parts, fmt.Sprintf("%d failed or stuck", d.Failures))
	}
	if len(parts) == 0 {
		return "Ballet digest — nothing new"
	}
	return "Ballet digest — " + strings.Join(parts, ", ")
}

// usd writes a spend in dollars.
func usd(s budget.Spent) string { return budget.USD(int64(s)) }

// spendLine is a project's spend in a line.
func spendLine(s DigestSpend) string {
	line := "spent " + usd(s.Today) + " today"
	if s.PerDay != nil {
		line += " of " + budget.USD(s.PerDay.Micros()) + " a day"
	}
	return line + fmt.Sprintf(", %s in %d run(s) this period", usd(s.Period), s.Runs)
}

// ago is how long a wait has lasted at now, roughly.
func ago(since, now time.Time) string {
	d := now.Sub(since)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

// Text is a digest's plain-text part.
func Text(d Digest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nSince %s.\n", d.Subject, d.Since.Format("Mon 2 Jan 2006 15:04 MST"))
	if len(d.Channels) > 0 {
		b.WriteString("\n== Delivery failing ==\n")
		for _, c := range d.Channels {
			fmt.Fprintf(&b, "- %s%s — %s (%s)\n  %s\n", c.Title, channelScope(c), c.Detail, failingFor(c.Since, d.At), c.Link)
		}
	}
	for _, p := range d.Projects {
		fmt.Fprintf(&b, "\n== %s (%s/%s) ==\n%s\n", cmpName(p), p.Org, p.Project, p.Link)
		if len(p.Needs) > 0 {
			b.WriteString("\nNeeds you now (oldest first):\n")
			for _, n := range p.Needs {
				fmt.Fprintf(&b, "- %s %s — %s (waiting %s)\n  %s\n", n.Item, n.Title, n.Detail, ago(n.Since, d.At), n.Link)
			}
		}
		if len(p.Finished) > 0 {
			b.WriteString("\nFinished:\n")
			for _, f := range p.Finished {
				what := "done"
				if f.Kind == FinishedMerge {
					what = "pull request merged"
				}
				fmt.Fprintf(&b, "- %s %s — %s\n  %s\n", f.Item, f.Title, what, f.Link)
				if f.PullRequest != "" {
					fmt.Fprintf(&b, "  %s\n", f.PullRequest)
				}
			}
		}
		if len(p.Failures) > 0 {
			b.WriteString("\nFailed or stuck:\n")
			for _, f := range p.Failures {
				what := "failed"
				if f.Kind == FailureStuck {
					what = "stuck"
				}
				fmt.Fprintf(&b, "- %s %s — %s: %s\n  %s\n", f.Item, f.Title, what, f.Reason, f.Link)
			}
		}
		fmt.Fprintf(&b, "\nSpend: %s.\n", spendLine(p.Spend))
	}
	if d.NeedsTruncated {
		b.WriteString("\nMore things need you than this digest lists: see Needs me in Ballet.\n")
	}
	return b.String()
}

// failingFor says how long a channel has been failing at now.
func failingFor(since, now time.Time) string {
	if a := ago(since, now); a != "just now" {
		return "failing for " + a
	}
	return "failing since just now"
}

// channelScope names a failing hook's organization or project.
func channelScope(c DigestChannel) string {
	switch {
	case c.Project != "":
		return " (" + c.Org + "/" + c.Project + ")"
	case c.Org != "":
		return " (" + c.Org + ")"
	}
	return ""
}

// cmpName is a project's name, else its key.
func cmpName(p DigestProject) string {
	if p.Name != "" {
		return p.Name
	}
	return p.Project
}

var page = template.Must(template.New("digest").Funcs(template.FuncMap{
	"ago": ago, "spend": spendLine, "name": cmpName, "scope": channelScope, "failing": failingFor,
	"date": func(t time.Time) string { return t.Format("Mon 2 Jan 2006 15:04 MST") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Subject}}</title></head>
<body style="font-family: system-ui, sans-serif; line-height: 1.4; color: #1a1a1a; max-width: 48rem; margin: 0 auto; padding: 1rem">
<h1 style="font-size: 1.3rem">{{.Subject}}</h1>
<p>Since {{date .Since}}.</p>
{{- $at := .At}}
{{- if .Channels}}
<section>
<h2 style="font-size: 1.1rem; border-bottom: 1px solid #ccc">Delivery failing</h2>
<ul>{{range .Channels}}
<li><a href="{{.Link}}">{{.Title}}</a>{{scope .}} — {{.Detail}} <small>({{failing .Since $at}})</small></li>{{end}}
</ul>
</section>
{{- end}}
{{- range .Projects}}
<section>
<h2 style="font-size: 1.1rem; border-bottom: 1px solid #ccc"><a href="{{.Link}}">{{name .}}</a> <small>{{.Org}}/{{.Project}}</small></h2>
{{- if .Needs}}
<h3 style="font-size: 1rem">Needs you now</h3>
<ul>{{range .Needs}}
<li><a href="{{.Link}}">{{.Item}}</a> {{.Title}} — {{.Detail}} <small>(waiting {{ago .Since $at}})</small></li>{{end}}
</ul>
{{- end}}
{{- if .Finished}}
<h3 style="font-size: 1rem">Finished</h3>
<ul>{{range .Finished}}
<li><a href="{{.Link}}">{{.Item}}</a> {{.Title}} — {{if eq .Kind "pull_request_merged"}}pull request merged{{if .PullRequest}} (<a href="{{.PullRequest}}">pull request</a>){{end}}{{else}}done{{end}}</li>{{end}}
</ul>
{{- end}}
{{- if .Failures}}
<h3 style="font-size: 1rem">Failed or stuck</h3>
<ul>{{range .Failures}}
<li><a href="{{.Link}}">{{.Item}}</a> {{.Title}} — {{if eq .Kind "flow_stuck"}}stuck{{else}}failed{{end}}: {{.Reason}}</li>{{end}}
</ul>
{{- end}}
<p><small>Spend: {{spend .Spend}}.</small></p>
</section>
{{- end}}
{{- if .NeedsTruncated}}
<p>More things need you than this digest lists: see Needs me in Ballet.</p>
{{- end}}
{{- if .Empty}}
<p>Nothing needs you, finished or failed since then.</p>
{{- end}}
</body></html>
`))

// HTML is a digest's HTML part (and the page GET /api/v1/me/digest
// answers with ?format=html); every text is escaped.
func HTML(d Digest) (string, error) {
	var b bytes.Buffer
	if err := page.Execute(&b, d); err != nil {
		return "", fmt.Errorf("render the digest: %w", err)
	}
	return b.String(), nil
}
