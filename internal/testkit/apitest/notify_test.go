package apitest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type notification struct {
	Cause, Item, Link, Text string
}

// inboxOf passes the notifier and returns token's inbox, newest first.
func inboxOf(w *flowWorld, token string) []notification {
	w.T.Helper()
	if _, err := w.Core.Notifier.Pass(context.Background()); err != nil {
		w.T.Fatalf("notifier pass: %v", err)
	}
	var in struct{ Notifications []notification }
	w.Must(200, token, "GET", "/api/v1/me/notifications/inbox", nil).JSON(w.T, &in)
	return in.Notifications
}

// causes names each notification "<cause> <ticket>".
func causes(ns []notification) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, n.Cause+" "+n.Item)
	}
	return out
}

func countNotifications(t *testing.T, s store.Store) int64 {
	t.Helper()
	return storetest.Count(t, s, `SELECT COUNT(*) FROM notifications`)
}

// A ticket's flows end to end reach the right people: a human stage's
// approval the assignee (not the creator), a rejection the project's
// admins but not the admin who rejected, a flow flagged stuck the admins
// and, through its blocking question, the assignee; a ticket done its
// creator. Nobody gets a cause twice, however often the notifier passes.
func TestFlowsNotifyTheRightPeople(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		// The docs stage's knowledge is unreachable at once: its flow is flagged.
		w := newFlowWorld(t, s, func(c *config.Config) { c.Knowledge.Wait.Duration = time.Millisecond })
		var acme struct{ ID string }
		w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &acme)
		tokens := map[string]string{}
		for person, role := range map[string]string{"alice": "member", "bob": "member", "carol": "admin", "dave": "admin"} {
			w.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+person, map[string]any{"role": role})
			tokens[person] = w.TokenFor(person, acme.ID, role)
		}
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{
				map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}},
				map[string]any{"id": "fix", "kind": "agent", "instructions": "Fix it.", "next": map[string]any{"done": "$done", "failed": "$failed"}},
			}}})
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/docs", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "write", "kind": "agent", "instructions": "Write.", "knowledge": []string{"conventions/docs"}}}}})
		ticket := func(typ string) string {
			var it struct{ Key string }
			w.Must(201, tokens["alice"], "POST", "/api/v1/projects/ACME/items", map[string]any{"type": typ, "title": "a " + typ,
				"acceptance_criteria": "it works", "state": "ready", "assignee": "bob"}).JSON(t, &it)
			return it.Key
		}

		// Approved by carol, then done: bob is asked to approve; alice,
		// the creator, hears that it is done.
		done := ticket("bug")
		w.Admin(200, "POST", "/api/v1/items/"+done+"/flow/start", nil)
		w.await(done, "approval", func(f flowView) bool { return f.Waiting == "approval" })
		got := inboxOf(w, tokens["bob"])
		if len(got) != 1 || got[0].Cause != notify.CauseApprovalWaiting || got[0].Item != done || got[0].Link != "/items/"+done+"#flow" {
			t.Fatalf("bob's inbox: %+v, want the approval of %s", got, done)
		}
		w.Must(200, tokens["carol"], "POST", "/api/v1/items/"+done+"/flow/approve", nil)
		w.runner.Complete(w.leaseStage(done, "fix", 1), "done", "fixed")
		w.await(done, "done", func(f flowView) bool { return f.Status == "done" })
		if got := causes(inboxOf(w, tokens["alice"])); !slices.Equal(got, []string{notify.CauseTicketDone + " " + done}) {
			t.Errorf("alice's inbox: %v, want %s done", got, done)
		}

		// Rejected by carol: dave hears the flow failed, carol does not.
		failed := ticket("bug")
		w.Admin(200, "POST", "/api/v1/items/"+failed+"/flow/start", nil)
		w.await(failed, "approval", func(f flowView) bool { return f.Waiting == "approval" })
		w.Must(200, tokens["carol"], "POST", "/api/v1/items/"+failed+"/flow/reject", map[string]any{"comment": "not a bug"})
		w.await(failed, "failed", func(f flowView) bool { return f.Status == "failed" })
		if got := causes(inboxOf(w, tokens["dave"])); !slices.Equal(got, []string{notify.CauseFlowFailed + " " + failed}) {
			t.Errorf("dave's inbox: %v, want %s failed", got, failed)
		}
		if got := causes(inboxOf(w, tokens["carol"])); len(got) != 0 {
			t.Errorf("carol, who rejected it, was notified: %v", got)
		}

		// Flagged stuck (its knowledge is unreachable): both admins, and
		// bob for the blocking question the flag asks.
		stuck := ticket("docs")
		w.Admin(200, "POST", "/api/v1/items/"+stuck+"/flow/start", nil)
		w.await(stuck, "the flag", func(f flowView) bool { return f.Waiting == "answer" })
		for _, admin := range []string{"carol", "dave"} {
			if got := causes(inboxOf(w, tokens[admin])); len(got) == 0 || got[0] != notify.CauseFlowStuck+" "+stuck {
				t.Errorf("%s's inbox: %v, want %s stuck first", admin, got, stuck)
			}
		}
		want := []string{notify.CauseQuestionOpened + " " + stuck, notify.CauseApprovalWaiting + " " + failed, notify.CauseApprovalWaiting + " " + done}
		if got := causes(inboxOf(w, tokens["bob"])); !slices.Equal(got, want) {
			t.Errorf("bob's inbox: %v, want %v", got, want)
		}
		// Once each: passing again changes nothing.
		before := countNotifications(t, s)
		inboxOf(w, tokens["bob"])
		if after := countNotifications(t, s); after != before {
			t.Errorf("%d notifications after another pass, %d before", after, before)
		}
	})
}
