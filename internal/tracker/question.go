package tracker

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Question limits.
const (
	MaxQuestionText = 16 << 10 // bytes
	MaxAnswer       = 64 << 10 // bytes
)

// ActorRef names who did something: kind human, service or system, and
// the subject.
type ActorRef struct {
	Kind    string `json:"kind"`
	Subject string `json:"subject"`
}

// Question is a question on an item. A blocking question on a ticket makes
// its flow wait until every blocking question is answered.
type Question struct {
	ID             string     `json:"id"`
	OrganizationID string     `json:"-"`
	ProjectID      string     `json:"-"`
	Item           string     `json:"item"` // the item's key
	ItemID         string     `json:"item_id"`
	Text           string     `json:"text"`
	Blocking       bool       `json:"blocking"`
	AskedBy        ActorRef   `json:"asked_by"`
	AskedAt        time.Time  `json:"asked_at"`
	Answer         *string    `json:"answer"`
	AnsweredBy     *string    `json:"answered_by"` // the subject who answered
	AnsweredAt     *time.Time `json:"answered_at"`
	// EscalatedAt is when the question, blocking and still open after
	// [notify] escalate_after, was escalated to the project's admins
	// (null: not escalated).
	EscalatedAt *time.Time `json:"escalated_at"`
	Version     int64      `json:"version"`
}

const questionColumns = `q.id, q.organization_id, q.project_id, i.key, q.item_id, q.text, q.blocking, q.asked_by_kind, q.asked_by, q.asked_at,
q.answer, q.answered_by, COALESCE(q.answered_at, 0), q.version, COALESCE(q.escalated_at, 0)`

const questionFrom = ` FROM questions q JOIN items i ON i.id = q.item_id`

func scanQuestion(rows *store.Rows, i int) (Question, error) {
	var q Question
	var answer, by sql.NullString
	var asked, answered, escalated int64
	if err := rows.Scan(i, &q.ID, &q.OrganizationID, &q.ProjectID, &q.Item, &q.ItemID, &q.Text, &q.Blocking, &q.AskedBy.Kind, &q.AskedBy.Subject,
		&asked, &answer, &by, &answered, &q.Version, &escalated); err != nil {
		return q, fmt.Errorf("scan question: %w", err)
	}
	q.AskedAt, q.AnsweredAt, q.EscalatedAt = store.Time(asked), store.OptionalTime(answered), store.OptionalTime(escalated)
	if answer.Valid {
		q.Answer, q.AnsweredBy = &answer.String, &by.String
	}
	return q, nil
}

func validateText(v *apperr.Validator, field, s string, max int) {
	v.Check(strings.TrimSpace(s) != "" && len(s) <= max, field, "must be 1–%d bytes, not blank (is %d)", max, len(s))
	v.CheckErr(field, text.Multiline(s))
}

// FindQuestion finds a question by id.
func (s *Service) FindQuestion(ctx context.Context, id string) (Question, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("question %q", id), `SELECT `+questionColumns+questionFrom+` WHERE q.id = ?`, id)
	if err != nil {
		return Question{}, err
	}
	return scanQuestion(rows, 0)
}

// ListQuestions lists an item's questions, oldest first.
func (s *Service) ListQuestions(ctx context.Context, itemID string) ([]Question, error) {
	rows, err := s.Store.Query(ctx, `SELECT `+questionColumns+questionFrom+` WHERE q.item_id = ? ORDER BY q.asked_at, q.id`, itemID)
	if err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return store.ScanAll(rows, scanQuestion)
}

// AskQuestion asks a question on an item (by id or key), as a human, a
// service or the system (the flow engine). Its event, question.asked,
// carries whether it blocks.
func (s *Service) AskQuestion(ctx context.Context, actor event.Actor, itemID, text string, blocking bool) (Question, error) {
	var v apperr.Validator
	validateText(&v, "text", text, MaxQuestionText)
	if err := v.Err(); err != nil {
		return Question{}, err
	}
	it, err := s.FindItem(ctx, itemID)
	if err != nil {
		return Question{}, err
	}
	q, ask := NewQuestion(actor, it, text, blocking, s.now())
	if err := s.Applier.Apply(ctx, &ask); err != nil {
		return Question{}, err
	}
	return q, nil
}

// NewQuestion returns a new question on it and the part of a transition
// that asks it (its question.asked event and its insert), for AskQuestion
// and for callers (the flow engine) that ask within a larger transition
// (transition.Transition.Add).
func NewQuestion(actor event.Actor, it Item, text string, blocking bool, now time.Time) (Question, transition.Transition) {
	q := Question{ID: transition.NewID(), OrganizationID: it.OrganizationID, ProjectID: it.ProjectID, Item: it.Key, ItemID: it.ID, Text: text,
		Blocking: blocking, AskedBy: ActorRef{Kind: actor.Kind, Subject: actor.Sub}, AskedAt: now, Version: 1}
	payload := QuestionAsked{Item: it.Key, ItemID: it.ID, ItemType: it.Type, Text: text, Blocking: blocking}
	return q, transition.Transition{
		Events: []event.Event{event.Of(actor, it.OrganizationID, it.ProjectID, q.ID, payload)},
		Statements: []store.Statement{store.Stmt(`INSERT INTO questions (id, organization_id, project_id, item_id, text, blocking, asked_by_kind,
asked_by, asked_at, answer, answered_by, answered_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, 1)`,
			q.ID, q.OrganizationID, q.ProjectID, q.ItemID, q.Text, q.Blocking, actor.Kind, actor.Sub, now.UnixMilli())},
	}
}

// OpenBlockingQuestions counts an item's unanswered blocking questions.
func (s *Service) OpenBlockingQuestions(ctx context.Context, itemID string) (int64, error) {
	rows, err := s.Store.Query(ctx, `SELECT COUNT(*) FROM questions WHERE item_id = ? AND blocking = 1 AND answer IS NULL`, itemID)
	if err != nil {
		return 0, fmt.Errorf("count open questions: %w", err)
	}
	var n int64
	err = rows.Scan(0, &n)
	return n, err
}

// openBlocking counts an item's open blocking questions other than one.
const openBlocking = `(SELECT COUNT(*) FROM questions WHERE item_id = ? AND blocking = 1 AND answer IS NULL AND id <> ?)`

// AnswerQuestion answers an open question; a question answered already is
// a conflict. Its event, question.answered, says whether this answer
// closed the item's last open blocking question (last_blocking_answered):
// the guarded write re-checks that count, so two blocking questions
// answered at once cannot both believe another one is still open.
func (s *Service) AnswerQuestion(ctx context.Context, actor event.Actor, questionID, answer string) (Question, error) {
	var v apperr.Validator
	validateText(&v, "answer", answer, MaxAnswer)
	if err := v.Err(); err != nil {
		return Question{}, err
	}
	var out Question
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		q, err := s.FindQuestion(ctx, questionID)
		if err != nil {
			return nil, err
		}
		rows, err := s.Store.Query(ctx, `SELECT `+openBlocking, q.ItemID, q.ID)
		if err != nil {
			return nil, fmt.Errorf("count open questions: %w", err)
		}
		var others int64
		if err := rows.Scan(0, &others); err != nil {
			return nil, err
		}
		var t *transition.Transition
		var last bool
		out, t, last, err = answerQuestion(actor, q, others, answer, s.now())
		if last && s.Hooks.LastBlockingAnswered != nil {
			t.Jobs = s.Hooks.LastBlockingAnswered(q.ItemID)
		}
		return t, err
	})
	if err != nil {
		return Question{}, err
	}
	return out, nil
}

// answerQuestion decides answering q (as read, with others other open
// blocking questions on its item): the answered question, the transition,
// and whether the answer closes the item's last open blocking question.
func answerQuestion(actor event.Actor, q Question, others int64, answer string, now time.Time) (Question, *transition.Transition, bool, error) {
	if q.Answer != nil {
		return Question{}, nil, false, apperr.New(apperr.Conflict, "question %s on %s was answered already by %s", q.ID, q.Item, *q.AnsweredBy)
	}
	out := q
	out.Answer, out.AnsweredBy, out.AnsweredAt, out.Version = &answer, &actor.Sub, &now, q.Version+1
	last := q.Blocking && others == 0
	payload := QuestionAnswered{Item: q.Item, ItemID: q.ItemID, Blocking: q.Blocking, Answer: answer, LastBlockingAnswered: last}
	return out, &transition.Transition{
		Events: []event.Event{event.Of(actor, q.OrganizationID, q.ProjectID, q.ID, payload)},
		Guarded: []store.Statement{store.Stmt(`UPDATE questions SET answer = ?, answered_by = ?, answered_at = ?, version = version + 1
WHERE id = ? AND version = ? AND answer IS NULL AND `+openBlocking+` = ?`,
			answer, actor.Sub, now.UnixMilli(), q.ID, q.Version, q.ItemID, q.ID, others)},
	}, last, nil
}

// EscalateQuestion decides escalating q, as read, at now: the part of a
// transition (for the notifier's escalation job) that marks it escalated
// and records question.escalated, guarded so that it commits only while
// the question is still open and not escalated (a question answered, or
// escalated by another instance, meanwhile loses the race). ok is false
// when q, as read, is no blocking open question or was escalated already:
// there is nothing to escalate.
func EscalateQuestion(actor event.Actor, q Question, after time.Duration, now time.Time) (t transition.Transition, ok bool) {
	if !q.Blocking || q.Answer != nil || q.EscalatedAt != nil {
		return t, false
	}
	payload := QuestionEscalated{Item: q.Item, ItemID: q.ItemID, Text: q.Text, AskedAt: q.AskedAt, After: after.String()}
	return transition.Transition{
		Events: []event.Event{event.Of(actor, q.OrganizationID, q.ProjectID, q.ID, payload)},
		Guarded: []store.Statement{store.Stmt(`UPDATE questions SET escalated_at = ?, version = version + 1 WHERE id = ? AND answer IS NULL AND escalated_at IS NULL`,
			now.UnixMilli(), q.ID)},
	}, true
}
