package agent

import (
	"strings"
	"text/template"

	"github.com/ballet/ballet/internal/runproto"
)

// PromptTemplate is the prompt every session gets, built from the lease
// (docs/runners.md shows it). It is text/template over PromptData.
const PromptTemplate = `You are a coding agent working for Ballet on ticket {{.Ticket.Key}}: {{.Ticket.Title}}
This session runs the stage "{{.StageName}}"{{if gt .Stage.MaxIterations 1}}, iteration {{.Stage.Iteration}} of at most {{.Stage.MaxIterations}}{{end}}.

## The ticket ({{or .Ticket.Type "task"}})

{{or .Ticket.Description "(no description)"}}

### Acceptance criteria

{{or .Ticket.AcceptanceCriteria "(none given)"}}

## This stage's instructions

{{or .Stage.Instructions "(none: do what the ticket asks)"}}
{{- with .PreviousReport}}

## The previous stage's report ({{.Stage}}, outcome {{.Outcome}})

{{.Report}}
{{- end}}
{{- with .Knowledge}}

## The team's knowledge for this stage
{{range .}}
### {{.Title}} ({{.Space}}: {{.Slug}}, version {{.Version}})

{{.Body}}
{{- if .Cut}}

(cut here: read the whole entry with read_entry)
{{- end}}
{{end}}
{{- end}}
{{- with .AnsweredQuestions}}

## Answered questions
{{range .}}
Q: {{.Question}}
A: {{.Answer}}
{{end}}
{{- end}}
{{- with .Checkpoint}}

## You are continuing from a checkpoint

An earlier session of this stage stopped before it finished. Its work was put back into the
workspace as uncommitted changes: look at it first (git status, git diff) and carry on from there
instead of starting over.
{{- if .Merged}} The branch moved since, so that work was merged onto the branch's new head.{{end}}
{{- with .Conflicts}} These files hold conflict markers to resolve first: {{join . ", "}}.{{end}}
{{- with .Kept}} It could not be put back (its history is unrelated to the branch's); it is kept in the repository as {{.}}.{{end}}
{{- end}}

## How to work

- Your working folder is a git checkout of the branch {{.Branch}}. Change the files as the task
  needs; you need not commit or push: Ballet commits what you leave and pushes the branch after
  the session.
- Ballet's tools: get_ticket shows the ticket, its answered questions and the previous report
  again; ask_question asks the people behind the ticket a question — with blocking true when you
  cannot go on without the answer: then end the session, and the stage runs again with the
  answer. search_knowledge and read_entry find and read the team's knowledge (conventions,
  architecture notes, past decisions).
- When you are done, call submit_report once, with outcome "done" (the stage's work is complete),
  "failed" (it cannot be done as asked, or the work you review is not acceptable: say why) or
  "blocked" (you cannot go on: say what you need), and a summary for the next stage. A session
  that ends without submit_report has failed.
`

// PromptData is what the prompt template reads.
type PromptData struct {
	Ticket            runproto.SessionTicket
	Stage             runproto.SessionStage
	StageName         string // the stage's name, else its id
	Branch            string
	PreviousReport    *runproto.SessionReport
	Knowledge         []runproto.SessionEntry
	AnsweredQuestions []runproto.SessionAnswer
	Checkpoint        *Checkpoint
}

var promptTemplate = template.Must(template.New("prompt").
	Funcs(template.FuncMap{"join": strings.Join}).
	Parse(PromptTemplate))

// Prompt builds a session's prompt.
func Prompt(s Spec) (string, error) {
	ss := s.Session
	d := PromptData{
		Ticket: ss.Ticket, Stage: ss.Stage, StageName: ss.Stage.Name, PreviousReport: ss.PreviousReport,
		Knowledge: ss.Knowledge, AnsweredQuestions: ss.AnsweredQuestions, Checkpoint: s.Checkpoint, Branch: "ballet/" + ss.Ticket.Key,
	}
	if d.StageName == "" {
		d.StageName = ss.Stage.ID
	}
	if ss.Repository != nil && ss.Repository.Branch != "" {
		d.Branch = ss.Repository.Branch
	}
	var b strings.Builder
	if err := promptTemplate.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}
