package tracker

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

func TestQuestions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		it := w.item("task", "Needs input")
		ask := func(actor event.Actor, text string, blocking bool) Question {
			t.Helper()
			var q Question
			evs := w.expect("ask", "", "question.asked", func() (err error) {
				q, err = w.svc.AskQuestion(ctx, actor, it.Key, text, blocking)
				return err
			})
			e := evs[0]
			p := payloadOf(t, e)
			if e.EntityType != "question" || e.EntityID != q.ID || e.ProjectID != w.p.ID || e.OrganizationID != w.org.ID ||
				p["item"] != it.Key || p["item_id"] != it.ID || p["blocking"] != blocking || p["text"] != text {
				t.Fatalf("asked event %+v %v", e, p)
			}
			return q
		}
		answer := func(q Question, actor event.Actor, lastWant bool) {
			t.Helper()
			evs := w.expect("answer", "", "question.answered", func() error {
				got, err := w.svc.AnswerQuestion(ctx, actor, q.ID, "Use JSON")
				if err == nil && (got.Answer == nil || *got.Answer != "Use JSON" || *got.AnsweredBy != actor.Sub || got.AnsweredAt == nil || got.Version != 2) {
					t.Errorf("answered %+v", got)
				}
				return err
			})
			p := payloadOf(t, evs[0])
			if p["item_id"] != it.ID || p["blocking"] != q.Blocking || p["last_blocking_answered"] != lastWant || evs[0].ActorSub != actor.Sub {
				t.Fatalf("answered payload %v (want last_blocking_answered %v)", p, lastWant)
			}
		}
		q1 := ask(event.System, "Which format?", true)
		if q1.AskedBy != (ActorRef{Kind: "system", Subject: "core"}) || q1.Item != it.Key || q1.Answer != nil || q1.Version != 1 {
			t.Fatalf("asked %+v", q1)
		}
		q2 := ask(itemBob, "And the encoding?", true)
		q3 := ask(itemAlice, "FYI: deadline?", false)
		answer(q3, itemAlice, false) // not blocking
		answer(q1, itemAlice, false) // q2 still open
		w.expect("double answer", apperr.Conflict, "", func() error {
			_, err := w.svc.AnswerQuestion(ctx, itemAlice, q1.ID, "again")
			return err
		})
		answer(q2, itemBob, true) // the last blocking one
		q4 := ask(itemAlice, "Another one?", true)
		answer(q4, itemAlice, true)
		for name, op := range map[string]func() error{
			"blank text": func() error { _, err := w.svc.AskQuestion(ctx, itemAlice, it.ID, "  ", true); return err },
			"text too long": func() error {
				_, err := w.svc.AskQuestion(ctx, itemAlice, it.ID, strings.Repeat("x", MaxQuestionText+1), true)
				return err
			},
			"blank answer": func() error { _, err := w.svc.AnswerQuestion(ctx, itemAlice, q4.ID, ""); return err },
			"answer too long": func() error {
				_, err := w.svc.AnswerQuestion(ctx, itemAlice, q4.ID, strings.Repeat("x", MaxAnswer+1))
				return err
			},
		} {
			w.expect(name, apperr.Invalid, "", op)
		}
		w.expect("unknown item", apperr.NotFound, "", func() error { _, err := w.svc.AskQuestion(ctx, itemAlice, "ACME-99", "x", true); return err })
		w.expect("unknown question", apperr.NotFound, "", func() error { _, err := w.svc.AnswerQuestion(ctx, itemAlice, "nope", "x"); return err })
		qs, err := w.svc.ListQuestions(ctx, it.ID)
		if err != nil || len(qs) != 4 || qs[0].ID != q1.ID || qs[3].ID != q4.ID {
			t.Fatalf("list %d %v", len(qs), err)
		}
		// The item's history holds its own and its questions' events.
		evs, err := event.ItemHistory(ctx, w.st, it.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range evs {
			types = append(types, e.Type)
		}
		want := "ticket.created question.asked question.asked question.asked question.answered question.answered question.answered question.asked question.answered"
		if strings.Join(types, " ") != want {
			t.Fatalf("history %v", types)
		}
		if page, _ := event.ItemHistory(ctx, w.st, it.ID, evs[2].Seq, 2); len(page) != 2 || page[0].Seq != evs[3].Seq {
			t.Fatalf("history page %+v", page)
		}
	})
}

// TestConcurrentAnswersCloseTheLastOnce: two open blocking questions
// answered at once: exactly one answer reports last_blocking_answered.
func TestConcurrentAnswersCloseTheLastOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		for round := range 6 {
			it := w.item("task", "Waiting")
			var qs []Question
			for range 2 {
				q, err := w.svc.AskQuestion(ctx, event.System, it.ID, "Why?", true)
				if err != nil {
					t.Fatal(err)
				}
				qs = append(qs, q)
			}
			before := w.lastSeq()
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, q := range qs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = w.svc.AnswerQuestion(ctx, itemAlice, q.ID, "Because")
				}()
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			evs := w.events(before)
			last := 0
			for _, e := range evs {
				if payloadOf(t, e)["last_blocking_answered"] == true {
					last++
				}
			}
			if len(evs) != 2 || last != 1 {
				t.Fatalf("round %d: %d events, %d say last", round, len(evs), last)
			}
		}
	})
}
