// Package needsme answers "what waits for me?": across the projects a
// person (or token) may read, the tickets that wait for a person — open
// blocking questions, human stages waiting for an approval, merge stages
// waiting for a review or a human merge, flows no runner works on
// (no_runner), flows the reconciler flagged stuck until they resume, and
// flows waiting for budget or for a pause to end — oldest first. Failing
// delivery channels wait for a person too, though no ticket is theirs:
// mail the SMTP server keeps refusing or cannot be reached (mail_failing,
// for platform admins) and a webhook being retried or disabled after
// failing (webhook_failing, for the admins of its organization or
// project).
//
// It is a read model: joined queries (questions, flows, failing hooks,
// retried mail), each on the rows they concern, whatever the number of
// tickets; where the caller may read comes from one read of its
// memberships (access.Resolver.Readable), whether it administers a
// failing hook's scope from access.Resolver.Check.
package needsme

import (
	"cmp"
	"context"
	"fmt"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
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
	// KindMailFailing: mail deliveries are being retried (the SMTP server
	// is down or refusing); platform admins only, no ticket.
	KindMailFailing = "mail_failing"
	// KindWebhookFailing: a hook's deliveries are being retried, or 24
	// hours of failure disabled it; the admins of its organization or
	// project only, no ticket.
	KindWebhookFailing = "webhook_failing"
)

// Kinds of entries: a ticket's, a failing delivery channel's, and every
// kind.
var (
	TicketKinds  = []string{KindQuestion, KindApproval, KindReview, KindMerge, KindStuck, KindNoRunner, KindBudget, KindPause}
	ChannelKinds = []string{KindMailFailing, KindWebhookFailing}
	Kinds        = slices.Concat(TicketKinds, ChannelKinds)
)

// Limits of a list.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Entry is one thing waiting for a person: a ticket's, or a failing
// delivery channel's (mail_failing, webhook_failing: no ticket, item "").
type Entry struct {
	Kind     string        `json:"kind"`
	Org      string        `json:"org"`     // the organization's slug ("" for mail_failing)
	Project  string        `json:"project"` // the project's key ("" for mail_failing and an organization's webhook)
	Item     string        `json:"item"`    // the ticket's key ("" when no ticket is concerned)
	Title    string        `json:"title"`
	Since    time.Time     `json:"since"`
	Detail   string        `json:"detail"`
	Question *OpenQuestion `json:"question,omitempty"` // kind question only
	Stage    string        `json:"stage,omitempty"`    // the flow's stage (not for questions)
	Webhook  string        `json:"webhook,omitempty"`  // the hook's id (webhook_failing only)
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
// in what p may read, and the failing delivery channels p administers.
// Each query reads in the list's own order, so the limit+1 rows each
// returns are the first of it.
func (s *Service) List(ctx context.Context, p access.Principal, limit int) (List, error) {
	out := List{Items: []Entry{}}
	rd, err := s.Access.Readable(ctx, p)
	if err != nil {
		return out, err
	}
	var qs, fs, ws []Entry
	if scope, scopeArgs := scopeSQL(rd, "i"); scope != "" { // else nothing readable
		if qs, err = s.questions(ctx, scope, scopeArgs, limit+1); err != nil {
			return out, err
		}
		if fs, err = s.flows(ctx, scope, scopeArgs, limit+1); err != nil {
			return out, err
		}
		hookScope, hookArgs := scopeSQL(rd, "w") // a hook's admins may read its scope
		if ws, err = s.webhooks(ctx, p, hookScope, hookArgs, limit+1); err != nil {
			return out, err
		}
	}
	ms, err := s.mail(ctx, p)
	if err != nil {
		return out, err
	}
	all := append([]Entry{}, slices.Concat(qs, fs, ms, ws)...) // an empty list, never null
	slices.SortStableFunc(all, func(a, b Entry) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		if c := cmp.Compare(ticketNumber(a.Item), ticketNumber(b.Item)); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Webhook, b.Webhook))
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

// scopeSQL is the condition on the rows of alias (items i, webhooks w:
// their organization_id and project_id) of what rd allows ("" when
// nothing).
func scopeSQL(rd access.Readable, alias string) (string, []any) {
	if rd.All {
		return "1 = 1", nil
	}
	var parts []string
	var args []any
	if len(rd.Orgs) > 0 {
		parts = append(parts, alias+`.organization_id IN (?`+strings.Repeat(", ?", len(rd.Orgs)-1)+`)`)
		for _, o := range rd.Orgs {
			args = append(args, o)
		}
	}
	if len(rd.Projects) > 0 {
		parts = append(parts, alias+`.project_id IN (?`+strings.Repeat(", ?", len(rd.Projects)-1)+`)`)
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

// mail is the entry of mail being retried, for a platform admin: since
// the oldest mail still waiting after a failed attempt was decided, with
// how many wait and the latest failure (recorded without any secret).
func (s *Service) mail(ctx context.Context, p access.Principal) ([]Entry, error) {
	if ok, err := allowed(s.Access.Check(ctx, p, access.PlatformAdmin, "", "")); !ok {
		return nil, err
	}
	rows, err := s.Store.Query(ctx, mailCountSQL)
	if err != nil {
		return nil, fmt.Errorf("read the mail being retried: %w", err)
	}
	var n, since int64
	if err := rows.Scan(0, &n, &since); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	last, err := s.Store.Query(ctx, mailLastSQL)
	if err != nil {
		return nil, fmt.Errorf("read the latest mail failure: %w", err)
	}
	var msg string
	if last.Len() == 1 {
		if err := last.Scan(0, &msg); err != nil {
			return nil, err
		}
	}
	e := Entry{Kind: KindMailFailing, Title: "Mail is failing", Since: time.UnixMilli(since).UTC()}
	e.Detail = fmt.Sprintf("%d mail(s) are being retried: the SMTP server is unreachable or refuses them", n)
	if msg != "" {
		e.Detail += " — " + firstLine(msg)
	}
	return []Entry{e}, nil
}

// The failing hooks' query, their scope's condition appended: the hooks
// disabled or with a delivery being retried (each read on its partial
// index, small while nothing fails), then each one's oldest delivery
// being retried and its latest failure.
const (
	retryingSQL    = `FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.attempts > 0`
	lastFailureSQL = `FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status IN ('pending', 'failed') AND d.error IS NOT NULL
ORDER BY d.last_attempt_at DESC LIMIT 1`
	webhooksSQL = `SELECT w.id, w.organization_id, w.project_id, w.url, COALESCE(w.disabled_at, 0), o.slug, COALESCE(p.key, ''),
COALESCE((SELECT MIN(d.started_at) ` + retryingSQL + `), 0), COALESCE((SELECT d.error ` + lastFailureSQL + `), ''),
COALESCE((SELECT d.started_at ` + lastFailureSQL + `), 0)
FROM webhooks w JOIN organizations o ON o.id = w.organization_id LEFT JOIN projects p ON p.id = w.project_id
WHERE w.id IN (SELECT id FROM webhooks WHERE disabled_at IS NOT NULL
  UNION ALL SELECT webhook_id FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0) AND `
	mailCountSQL = `SELECT COUNT(*), COALESCE(MIN(created_at), 0) FROM mail_deliveries WHERE status = 'retrying'`
	mailLastSQL  = `SELECT COALESCE(last_error, '') FROM mail_deliveries WHERE status = 'retrying' ORDER BY updated_at DESC LIMIT 1`
)

// webhooks reads the failing hooks in scope (its deliveries being retried
// after a failed attempt, or disabled by 24 hours of failure), oldest
// failure first, and keeps the first limit of those whose organization or
// project p administers (project.update there, as managing the hook
// needs). Failing since: the oldest delivery being retried began, or,
// disabled, the delivery that gave up began.
func (s *Service) webhooks(ctx context.Context, p access.Principal, scope string, args []any, limit int) ([]Entry, error) {
	rows, err := s.Store.Query(ctx, webhooksSQL+scope, args...)
	if err != nil {
		return nil, fmt.Errorf("read failing webhooks: %w", err)
	}
	admin := map[[2]string]bool{} // organization and project id: p administers it
	var out []Entry
	for i := range rows.Len() {
		var e Entry
		var orgID, projectID, url string
		var disabled, retryingSince, failedSince int64
		var lastErr string
		if err := rows.Scan(i, &e.Webhook, &orgID, &projectID, &url, &disabled, &e.Org, &e.Project, &retryingSince, &lastErr, &failedSince); err != nil {
			return nil, err
		}
		scope := [2]string{orgID, projectID}
		ok, seen := admin[scope]
		if !seen {
			if ok, err = allowed(s.Access.Check(ctx, p, access.ProjectUpdate, orgID, projectID)); err != nil {
				return nil, err
			}
			admin[scope] = ok
		}
		if !ok {
			continue
		}
		e.Kind, e.Title = KindWebhookFailing, "Webhook to "+host(url)
		switch {
		case retryingSince > 0:
			e.Since = time.UnixMilli(retryingSince).UTC()
			e.Detail = "Its deliveries fail and are being retried"
		default:
			e.Since = time.UnixMilli(cmp.Or(failedSince, disabled)).UTC()
			e.Detail = "Its deliveries failed for 24 hours, so it was disabled: re-enable it once its receiver works"
		}
		if disabled > 0 && retryingSince > 0 {
			e.Detail = "Disabled after 24 hours of failed deliveries; others are still being retried"
		}
		if lastErr != "" {
			e.Detail += " — " + firstLine(lastErr)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Project, b.Project), strings.Compare(a.Webhook, b.Webhook))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// allowed turns a check's answer into whether it passed; an error other
// than a refusal is returned.
func allowed(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case apperr.Code(err) == apperr.Forbidden, apperr.Code(err) == apperr.NotFound:
		return false, nil
	}
	return false, err
}

// host is a URL's host: what an entry tells of a hook's URL, whose path
// or query may hold a secret (a Slack incoming webhook's).
func host(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "an unreadable URL"
	}
	return u.Hostname()
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
