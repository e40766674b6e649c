// Package needsme answers "what waits for me?": across the projects a
// person (or token) may read, the tickets that wait for a person — open
// blocking questions, human stages waiting for an approval, merge stages
// waiting for a review or a human merge, flows no runner works on
// (no_runner), flows the reconciler flagged stuck until they resume, and
// flows waiting for budget or for a pause to end — oldest first.
//
// It is a read model: two joined queries (questions, flows), each on the
// items, projects and organizations they concern, whatever the number of
// tickets; where the caller may read comes from one read of its
// memberships (access.Resolver.Readable).
package needsme

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store"
)

// Kinds of entries.
const (
	KindQuestion = "question"
	KindApproval = "approval"
	KindReview   = "review"
	KindMerge    = "merge"
	KindStuck    = "stuck"
	KindNoRunner = "no_runner"
	KindBudget   = "budget"
	KindPause    = "pause"
)

// Kinds lists every kind.
var Kinds = []string{KindQuestion, KindApproval, KindReview, KindMerge, KindStuck, KindNoRunner, KindBudget, KindPause}

// Limits of a list.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Entry is one thing waiting for a person.
type Entry struct {
	Kind     string        `json:"kind"`
	Org      string        `json:"org"`     // the organization's slug
	Project  string        `json:"project"` // the project's key
	Item     string        `json:"item"`    // the ticket's key
	Title    string        `json:"title"`
	Since    time.Time     `json:"since"`
	Detail   string        `json:"detail"`
	Question *OpenQuestion `json:"question,omitempty"` // kind question only
	Stage    string        `json:"stage,omitempty"`    // the flow's stage (not for questions)
}

// OpenQuestion is the open question of an entry of kind question.
type OpenQuestion struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// List is what waits, oldest first (of the same age, by project key, then
// ticket number); truncated when there was more than the limit.
type List struct {
	Items     []Entry `json:"items"`
	Truncated bool    `json:"truncated"`
}

// Service reads what waits.
type Service struct {
	Store  store.Store
	Access *access.Resolver
	Flows  *flow.Service // its no_runner condition on the clock
}

// List returns, oldest first, at most limit entries waiting for a person
// in what p may read. Both queries read in the list's own order, so the
// limit+1 rows each returns are the first of it.
func (s *Service) List(ctx context.Context, p access.Principal, limit int) (List, error) {
	out := List{Items: []Entry{}}
	rd, err := s.Access.Readable(ctx, p)
	if err != nil {
		return out, err
	}
	scope, scopeArgs := scopeSQL(rd)
	if scope == "" {
		return out, nil // nothing readable
	}
	qs, err := s.questions(ctx, scope, scopeArgs, limit+1)
	if err != nil {
		return out, err
	}
	fs, err := s.flows(ctx, scope, scopeArgs, limit+1)
	if err != nil {
		return out, err
	}
	all := append(qs, fs...)
	slices.SortStableFunc(all, func(a, b Entry) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		return cmp.Compare(ticketNumber(a.Item), ticketNumber(b.Item))
	})
	if len(all) > limit {
		all, out.Truncated = all[:limit], true
	}
	out.Items = all
	return out, nil
}

// ticketNumber is the number of a ticket's key (ACME-42: 42).
func ticketNumber(key string) int {
	n, _ := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
	return n
}

// scopeSQL is the condition on items i of what rd allows ("" when
// nothing).
func scopeSQL(rd access.Readable) (string, []any) {
	if rd.All {
		return "1 = 1", nil
	}
	var parts []string
	var args []any
	if len(rd.Orgs) > 0 {
		parts = append(parts, `i.organization_id IN (?`+strings.Repeat(", ?", len(rd.Orgs)-1)+`)`)
		for _, o := range rd.Orgs {
			args = append(args, o)
		}
	}
	if len(rd.Projects) > 0 {
		parts = append(parts, `i.project_id IN (?`+strings.Repeat(", ?", len(rd.Projects)-1)+`)`)
		for _, p := range rd.Projects {
			args = append(args, p)
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

const itemJoin = ` JOIN items i ON i.id = %s JOIN projects p ON p.id = i.project_id JOIN organizations o ON o.id = i.organization_id`

// questions reads the open blocking questions.
func (s *Service) questions(ctx context.Context, scope string, args []any, limit int) ([]Entry, error) {
	rows, err := s.Store.Query(ctx, `SELECT q.id, q.text, q.asked_at, i.key, i.title, p.key, o.slug FROM questions q`+fmt.Sprintf(itemJoin, "q.item_id")+`
WHERE q.blocking = 1 AND q.answered_at IS NULL AND `+scope+` ORDER BY q.asked_at, p.key, i.number, q.id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("read open questions: %w", err)
	}
	out := make([]Entry, rows.Len())
	for i := range out {
		e := Entry{Kind: KindQuestion, Question: &OpenQuestion{}}
		var at int64
		if err := rows.Scan(i, &e.Question.ID, &e.Question.Text, &at, &e.Item, &e.Title, &e.Project, &e.Org); err != nil {
			return nil, err
		}
		e.Since = time.UnixMilli(at).UTC()
		e.Detail = "Blocking question: " + firstLine(e.Question.Text)
		out[i] = e
	}
	return out, nil
}

// flows reads the flows that wait for a person.
func (s *Service) flows(ctx context.Context, scope string, args []any, limit int) ([]Entry, error) {
	noRunner, nrArgs := s.Flows.NoRunner()
	q := `SELECT flows.stage, flows.status, COALESCE(flows.waiting, ''), flows.updated_at, CASE WHEN ` + noRunner + ` THEN 1 ELSE 0 END,
CASE WHEN ` + flow.StuckSQL + ` THEN 1 ELSE 0 END, i.key, i.title, p.key, o.slug FROM flows` + fmt.Sprintf(itemJoin, "flows.item_id") + `
WHERE (flows.status = 'waiting' AND flows.waiting IN ('approval', 'review', 'merge', 'budget', 'pause')
  OR ` + flow.StuckSQL + ` OR ` + noRunner + `) AND ` + scope + ` ORDER BY flows.updated_at, p.key, i.number, flows.id LIMIT ?`
	all := append(append(append(slices.Clone(nrArgs), nrArgs...), args...), limit)
	rows, err := s.Store.Query(ctx, q, all...)
	if err != nil {
		return nil, fmt.Errorf("read flows waiting for a person: %w", err)
	}
	out := make([]Entry, rows.Len())
	for i := range out {
		var e Entry
		var status, waiting string
		var at int64
		var isNoRunner, isStuck bool
		if err := rows.Scan(i, &e.Stage, &status, &waiting, &at, &isNoRunner, &isStuck, &e.Item, &e.Title, &e.Project, &e.Org); err != nil {
			return nil, err
		}
		e.Since = time.UnixMilli(at).UTC()
		switch {
		case isStuck:
			e.Kind, e.Detail = KindStuck, fmt.Sprintf("Stuck at stage %s: answer its blocking question to run the stage again, or pause or cancel the ticket", e.Stage)
		case isNoRunner:
			e.Kind, e.Detail = KindNoRunner, fmt.Sprintf("No runner has taken the run of stage %s", e.Stage)
		case waiting == flow.WaitApproval:
			e.Kind, e.Detail = KindApproval, fmt.Sprintf("Stage %s waits for an approval", e.Stage)
		case waiting == flow.WaitReview:
			e.Kind, e.Detail = KindReview, fmt.Sprintf("The pull request of stage %s waits for a review", e.Stage)
		case waiting == flow.WaitMerge:
			e.Kind, e.Detail = KindMerge, fmt.Sprintf("The pull request of stage %s waits for a person to merge it", e.Stage)
		case waiting == flow.WaitBudget:
			e.Kind, e.Detail = KindBudget, fmt.Sprintf("Stage %s waits for budget: a spending limit is reached", e.Stage)
		default:
			e.Kind, e.Detail = KindPause, fmt.Sprintf("Stage %s waits while the project or the platform is paused", e.Stage)
		}
		out[i] = e
	}
	return out, nil
}

// firstLine is the first line of text, cut to 200 characters.
func firstLine(text string) string {
	line, _, cut := strings.Cut(text, "\n")
	if r := []rune(line); len(r) > 200 {
		line, cut = string(r[:200]), true
	}
	if cut {
		line += "…"
	}
	return line
}
