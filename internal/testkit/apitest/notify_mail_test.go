package apitest_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

var confirmLinkRE = regexp.MustCompile(`http://\S+/api/v1/mail/confirm\?t=\S+`)

// An approval waiting reaches the assignee's mailbox, and a flow flagged
// stuck the project's admin's, each with the subject naming the ticket
// and what is needed and a link to where the person acts.
func TestAnApprovalAndAStuckFlowAreMailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		w := newFlowWorld(t, s, func(c *config.Config) {
			c.Knowledge.Wait.Duration = time.Millisecond // the docs stage's knowledge is unreachable: its flow is flagged
			c.Notify.Email.SMTPURL, c.Notify.Email.From = mp.SMTPURL(), "ballet@example.com"
		})
		var acme struct{ ID string }
		w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &acme)
		tokens := map[string]string{}
		for person, role := range map[string]string{"alice": "member", "bob": "member", "carol": "admin"} {
			w.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+person, map[string]any{"role": role})
			tokens[person] = w.TokenFor(person, acme.ID, role)
			addr := person + "@example.com"
			w.Must(200, tokens[person], "PUT", "/api/v1/me/notifications", map[string]any{"email": addr})
			got := mp.Wait(t, addr, 1, 10*time.Second)
			link := confirmLinkRE.FindString(mp.Message(t, got[0].ID).Text)
			if resp, err := http.Post(link, "", nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("confirm %s (%q): %v %v", addr, link, resp, err)
			}
		}
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}}}}})
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/docs", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "write", "kind": "agent", "instructions": "Write.", "knowledge": []string{"conventions/docs"}}}}})
		ticket := func(typ, title string) string {
			var it struct{ Key string }
			w.Must(201, tokens["alice"], "POST", "/api/v1/projects/ACME/items", map[string]any{"type": typ, "title": title,
				"acceptance_criteria": "it works", "state": "ready", "assignee": "bob"}).JSON(t, &it)
			return it.Key
		}
		approve := ticket("bug", "Crash on start")
		w.Admin(200, "POST", "/api/v1/items/"+approve+"/flow/start", nil)
		w.await(approve, "approval", func(f flowView) bool { return f.Waiting == "approval" })
		if _, err := w.Core.Notifier.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := mp.Wait(t, "bob@example.com", 2, 15*time.Second)
		m := mp.Message(t, got[0].ID)
		if m.Subject != "["+approve+"] Approval needed: Crash on start" || !strings.Contains(m.Text, w.URL+"/items/"+approve+"#flow") ||
			!strings.Contains(m.HTML, w.URL+"/items/"+approve+"#flow") {
			t.Errorf("bob's approval mail: %q\n%s", m.Subject, m.Text)
		}

		stuck := ticket("docs", "Write the guide")
		w.Admin(200, "POST", "/api/v1/items/"+stuck+"/flow/start", nil)
		w.await(stuck, "the flag", func(f flowView) bool { return f.Waiting == "answer" })
		if _, err := w.Core.Notifier.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		got = mp.Wait(t, "carol@example.com", 2, 15*time.Second)
		m = mp.Message(t, got[0].ID)
		if m.Subject != "["+stuck+"] Flow stuck: Write the guide" || !strings.Contains(m.Text, w.URL+"/items/"+stuck+"#questions") {
			t.Errorf("carol's stuck mail: %q\n%s", m.Subject, m.Text)
		}
		if n := len(mp.To(t, "alice@example.com")); n != 1 {
			t.Errorf("alice (the creator: the assignee is asked) got %d mails, want the confirmation alone", n)
		}
	})
}
