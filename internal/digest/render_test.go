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
