package digest

import (
	"strings"
	"testing"
	"time"
)

// TestHTMLEscapes: every text in the page is escaped (a ticket's title, a
// failure's reason are people's and agents' text), links stay links.
func TestHTMLEscapes(t *testing.T) {
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	d := Digest{Subject: "Ballet digest — 1 failed or stuck", Since: at.Add(-24 * time.Hour), At: at, Failures: 1,
		Projects: []DigestProject{{Org: "acme", Project: "ACME", Name: `<i>Acme</i>`, Link: "https://b.example/projects/ACME",
			Failures: []DigestFailure{{Kind: FailureFailed, Item: "ACME-1", Title: `<script>alert(1)</script>`, At: at,
				Reason: `"quoted" & <b>bold</b>`, Link: "https://b.example/items/ACME-1#flow"}}}}}
	page, err := HTML(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"<script>", "<b>bold", "<i>Acme"} {
		if strings.Contains(page, raw) {
			t.Errorf("the page holds %q unescaped:\n%s", raw, page)
		}
	}
	for _, want := range []string{"&lt;script&gt;", `href="https://b.example/items/ACME-1#flow"`, "failed: &#34;quoted&#34; &amp; &lt;b&gt;bold&lt;/b&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if text := Text(d); !strings.Contains(text, "ACME-1 <script>alert(1)</script> — failed: \"quoted\" & <b>bold</b>") {
		t.Errorf("the text part:\n%s", text)
	}
}

// TestChannelsRendered: the failing delivery channels are listed before the
// projects, in the text and the HTML, each linking where the admin acts.
func TestChannelsRendered(t *testing.T) {
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	d := Digest{Subject: "Ballet digest — 2 need you", Since: at.Add(-24 * time.Hour), At: at, Needs: 2, Projects: []DigestProject{},
		Channels: []DigestChannel{
			{Kind: "mail_failing", Title: "Mail is failing", Since: at.Add(-3 * time.Hour), Detail: "1 mail(s) are being retried — 421 <busy>",
				Link: "https://b.example/platform#mail"},
			{Kind: "webhook_failing", Org: "acme", Project: "ACME", Webhook: "w1", Title: "Webhook to hooks.example.com", Since: at,
				Detail: "Its deliveries fail and are being retried — HTTP 500", Link: "https://b.example/projects/ACME/settings#webhooks"}}}
	text := Text(d)
	for _, want := range []string{"== Delivery failing ==",
		"- Mail is failing — 1 mail(s) are being retried — 421 <busy> (failing for 3 h)\n  https://b.example/platform#mail",
		"- Webhook to hooks.example.com (acme/ACME) — Its deliveries fail and are being retried — HTTP 500 (failing since just now)\n" +
			"  https://b.example/projects/ACME/settings#webhooks"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	page, err := HTML(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">Delivery failing</h2>", `<a href="https://b.example/platform#mail">Mail is failing</a> — 1 mail(s) are being retried — 421 &lt;busy&gt;`,
		`<a href="https://b.example/projects/ACME/settings#webhooks">Webhook to hooks.example.com</a> (acme/ACME)`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}
