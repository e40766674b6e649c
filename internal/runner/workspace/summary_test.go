package workspace

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCommitMessageOfAReport: a session's report becomes the commit's
// subject (its first line, at most 72 characters: a longer one is cut with
// "…" and kept whole in the body) and body (the rest), without control
// characters but line feeds (a tab is a space), the whole bounded to 16 KiB.
func TestCommitMessageOfAReport(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 72) // 72 characters, 144 bytes: not cut
	longer := strings.Repeat("x", 70) + "yz"
	for _, c := range []struct {
		in, subject, body string
	}{
		{"Fixed it.", "Fixed it.", ""},
		{"  Fixed it.  \n\n  Details here.\n", "Fixed it.", "Details here."},
		{"Tab\there\x00\x1b[31m\u0085\u009f\x7f red\nbody\tline\r\n", "Tab here[31m red", "body line"},
		{long + "\nbody", long, "body"},
		{longer + "!\nbody", strings.Repeat("x", 70) + "y…", longer + "!\nbody"},
		{"non\u00a0breaking space and ÿ stay", "non\u00a0breaking space and ÿ stay", ""},
		{"", "", ""},
	} {
		subject, body := summarize(c.in)
		if subject != c.subject || body != c.body {
			t.Errorf("summarize(%q) = %q, %q; want %q, %q", c.in, subject, body, c.subject, c.body)
		}
	}

	// A report past 16 KiB is cut there (on a character boundary) and says so.
	huge := "Subject\n" + strings.Repeat("ab€", 8<<10)
	_, body := summarize(huge)
	if !strings.HasSuffix(body, "…") || !utf8.ValidString(body) {
		t.Fatalf("a huge report's body ends %q, want it cut with …", body[len(body)-10:])
	}
	if n := len("Subject\n") + len(body) - len("…"); n > maxSummary || n < maxSummary-2 {
		t.Errorf("a huge report kept %d bytes, want the first 16 KiB (%d)", n, maxSummary)
	}
	exact := "Subject\n" + strings.Repeat("a", maxSummary-len("Subject\n"))
	if _, body := summarize(exact); strings.HasSuffix(body, "…") {
		t.Error("a report of exactly 16 KiB was cut")
	}
}
