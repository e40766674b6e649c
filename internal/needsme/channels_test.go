package needsme_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// hook writes a webhook of the organization (project "" for the
// organization's own) to a URL whose path holds a secret, disabled at
// disabledMin minutes after t0 (0: active), and returns its id.
func (w *world) hook(org, project string, disabledMin int) string {
	id, pid := transition.NewID(), ""
	if project != "" {
		pid = w.projects[project]
	}
	var disabled any
	if disabledMin > 0 {
		disabled = t0.Add(time.Duration(disabledMin) * time.Minute).UnixMilli()
	}
	w.exec(`INSERT INTO webhooks (id, organization_id, project_id, url, events, format, active, secret, disabled_at, created_by, created_at,
updated_at, version) VALUES (?, ?, ?, 'https://hooks.example.com/services/T0/B0/s3cr3t', '["*"]', 'slack', ?, 'c2VjcmV0', ?, 'ann', 0, 0, 1)`,
		id, w.orgs[org], pid, disabled == nil, disabled)
	return id
}

// delivery writes a delivery of the hook begun minutes after t0: status,
// attempts and the last error as the deliverer records them.
func (w *world) delivery(hookID, org, status string, attempts, minutes int, errText string) {
	at := t0.Add(time.Duration(minutes) * time.Minute).UnixMilli()
	var e any
	if errText != "" || status == "succeeded" {
		e = errText
	}
	w.exec(`INSERT INTO webhook_deliveries (id, webhook_id, organization_id, project_id, cause, item_key, event_id, event_seq, payload, status,
attempts, error, started_at, last_attempt_at, created_at, updated_at, version) VALUES (?, ?, ?, '', 'question.opened', 'X-1', ?, 1, '{}', ?, ?, ?,
?, ?, ?, ?, 1)`, transition.NewID(), hookID, w.orgs[org], transition.NewID(), status, attempts, e, at, at+int64(attempts), at, at, 1)
}

// mailDelivery writes a mail delivery created minutes after t0.
func (w *world) mailDelivery(status string, minutes int, errText string) {
	at := t0.Add(time.Duration(minutes) * time.Minute).UnixMilli()
	var e any
	if errText != "" {
		e = errText
	}
	w.exec(`INSERT INTO mail_deliveries (notification_id, recipient, cause, item_key, message_id, status, attempts, last_error, created_at,
updated_at, version) VALUES (?, 'bob', 'question.opened', 'X-1', 'm', ?, 1, ?, ?, ?, 1)`, transition.NewID(), status, e, at, at+int64(minutes))
}

func kindsOf(l needsme.List, kind string) []needsme.Entry {
	var out []needsme.Entry
	for _, e := range l.Items {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestFailingMailIsForPlatformAdmins: mail being retried is one entry,
// since the oldest such mail, with the count and the latest error — for
// platform admins, not for an organization's admin nor for a token whose
// scopes leave platform.admin out; mail given up or sent is not failing.
func TestFailingMailIsForPlatformAdmins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.member("acme", "", "ann", "admin")
		w.mailDelivery("sent", 1, "")
		w.mailDelivery("failed", 2, "550 no such mailbox")
		if got := kindsOf(w.list(platform, 10), needsme.KindMailFailing); len(got) != 0 {
			t.Fatalf("nothing retried: %+v", got)
		}
		w.mailDelivery("retrying", 3, "dial tcp 127.0.0.1:1: i/o timeout")
		w.mailDelivery("retrying", 5, "dial tcp 127.0.0.1:1: connection refused\nsecond line") // the latest attempt
		got := kindsOf(w.list(platform, 10), needsme.KindMailFailing)
		if len(got) != 1 || !got[0].Since.Equal(t0.Add(3*time.Minute)) || got[0].Item != "" || got[0].Org != "" ||
			!strings.Contains(got[0].Detail, "2 mail(s)") || !strings.HasSuffix(got[0].Detail, "connection refused…") {
			t.Errorf("platform admin: %+v", got)
		}
		for name, p := range map[string]access.Principal{
			"acme's admin": principal{sub: "ann"},
			"a platform admin's token without platform.admin": principal{sub: "root", admin: true, grant: &access.Grant{Scopes: []string{"tracker.read"}}},
		} {
			if got := kindsOf(w.list(p, 10), needsme.KindMailFailing); len(got) != 0 {
				t.Errorf("%s sees %+v", name, got)
			}
		}
	})
}

// TestFailingWebhooksAreForTheirAdmins: a hook being retried or disabled
// is an entry for the admins of its scope — a project's hook for the
// project's admins (an organization admin, or a project's own), an
// organization's hook for the organization's admins — never for its
// members, a viewer, another organization's admin or a project admin of
// another project. It names the hook, its host (not its URL: the path may
// hold a secret) and the last error, oldest failure first among the
// tickets' waits; recovered, it is gone.
func TestFailingWebhooksAreForTheirAdmins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.org("globex")
		w.project("acme", "ACME")
		w.project("acme", "OPS")
		w.member("acme", "", "ann", "admin")
		w.member("acme", "", "mel", "member")
		w.member("acme", "ACME", "pia", "admin") // ACME's admin alone
		w.member("acme", "OPS", "oli", "admin")  // OPS' admin alone
		w.member("acme", "", "vic", "admin")
		w.member("acme", "ACME", "vic", "viewer") // lowered in ACME
		w.member("globex", "", "gus", "admin")
		q := "question " + w.question("ACME", "which?", 2, true, false)

		projHook, orgHook, fine, gone := w.hook("acme", "ACME", 0), w.hook("acme", "", 0), w.hook("acme", "ACME", 0), w.hook("acme", "ACME", 0)
		w.delivery(projHook, "acme", "pending", 3, 5, "HTTP 500")
		w.delivery(projHook, "acme", "pending", 1, 7, "HTTP 502")
		w.delivery(orgHook, "acme", "failed", 20, 1, "no answer within 5s")
		w.exec(`UPDATE webhooks SET active = 0, disabled_at = ? WHERE id = ?`, t0.Add(24*time.Hour).UnixMilli(), orgHook)
		w.delivery(fine, "acme", "succeeded", 2, 0, "")
		w.delivery(fine, "acme", "pending", 0, 0, "") // not attempted yet: not failing
		w.delivery(gone, "acme", "failed", 20, 0, "HTTP 404")
		w.delivery(gone, "acme", "pending", 0, 9, "")
		w.exec(`UPDATE webhooks SET active = 1, disabled_at = NULL WHERE id = ?`, gone) // re-enabled

		orgE, projE := "webhook_failing "+orgHook, "webhook_failing "+projHook
		hooks := func(l needsme.List) []string {
			out := []string{}
			for _, e := range l.Items {
				if e.Kind == needsme.KindWebhookFailing {
					out = append(out, e.Kind+" "+e.Webhook)
				} else if e.Kind != needsme.KindMailFailing {
					out = append(out, e.Kind+" "+e.Item)
				}
			}
			return out
		}
		for _, c := range []struct {
			name string
			p    access.Principal
			want []string
		}{
			{"platform admin", platform, []string{orgE, q, projE}},
			{"acme's admin", principal{sub: "ann"}, []string{orgE, q, projE}},
			{"acme's member", principal{sub: "mel"}, []string{q}},
			{"ACME's admin", principal{sub: "pia"}, []string{q, projE}},
			{"OPS' admin", principal{sub: "oli"}, []string{}},
			{"acme's admin, ACME's viewer", principal{sub: "vic"}, []string{orgE, q}},
			{"globex's admin", principal{sub: "gus"}, []string{}},
			{"acme's admin token", principal{sub: "tok", grant: &access.Grant{OrgID: w.orgs["acme"], Role: "admin", CappedBy: "ann"}}, []string{orgE, q, projE}},
			{"acme's admin token capped by a member", principal{sub: "tok", grant: &access.Grant{OrgID: w.orgs["acme"], Role: "admin", CappedBy: "mel"}}, []string{q}},
		} {
			if got := hooks(w.list(c.p, 10)); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
		l := w.list(principal{sub: "ann"}, 10)
		byHook := map[string]needsme.Entry{}
		for _, e := range kindsOf(l, needsme.KindWebhookFailing) {
			byHook[e.Webhook] = e
		}
		if e := byHook[projHook]; e.Org != "acme" || e.Project != "ACME" || e.Item != "" || e.Title != "Webhook to hooks.example.com" ||
			!e.Since.Equal(t0.Add(5*time.Minute)) || !strings.Contains(e.Detail, "being retried") || !strings.HasSuffix(e.Detail, "HTTP 502") {
			t.Errorf("the project's hook: %+v", e)
		}
		if e := byHook[orgHook]; e.Org != "acme" || e.Project != "" || !e.Since.Equal(t0.Add(time.Minute)) || !strings.Contains(e.Detail, "disabled") ||
			!strings.HasSuffix(e.Detail, "no answer within 5s") {
			t.Errorf("the organization's hook: %+v", e)
		}
		for _, e := range l.Items {
			if strings.Contains(e.Title+e.Detail, "s3cr3t") {
				t.Errorf("an entry shows the hook's URL: %+v", e)
			}
		}
		// The limit keeps the oldest: the organization's hook, then the question.
		if l := w.list(principal{sub: "ann"}, 2); !slices.Equal(hooks(l), []string{orgE, q}) || !l.Truncated {
			t.Errorf("limit 2: %v truncated=%v", hooks(l), l.Truncated)
		}

		// Recovered: the project's retried deliveries succeed, the
		// organization's hook is re-enabled.
		w.exec(`UPDATE webhook_deliveries SET status = 'succeeded', error = '' WHERE webhook_id = ?`, projHook)
		w.exec(`UPDATE webhooks SET active = 1, disabled_at = NULL WHERE id = ?`, orgHook)
		if got := hooks(w.list(principal{sub: "ann"}, 10)); !slices.Equal(got, []string{q}) {
			t.Errorf("recovered: %v, want the question alone", got)
		}
	})
}

// TestFailingChannelQueriesUseIndexes: what needs-me reads of failing
// hooks and mail reads only what fails, whatever the deliveries made.
func TestFailingChannelQueriesUseIndexes(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	for name, q := range needsme.ChannelQueries {
		storetest.NoTableScan(t, s, name, q)
	}
}

// TestNothingIsAnEmptyList: nothing waiting answers an empty list, never
// null.
func TestNothingIsAnEmptyList(t *testing.T) {
	w := newWorld(t, storetest.Open(t, "sqlite"))
	for _, p := range []access.Principal{platform, principal{sub: "nobody"}} {
		if l := w.list(p, 10); l.Items == nil {
			t.Errorf("%v: items is nil", p)
		}
	}
}
