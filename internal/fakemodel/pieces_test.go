package fakemodel

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// pieces cuts text into deltas of at most 16 KiB without splitting a
// character, and loses nothing.
func TestPieces(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("x", chunk), strings.Repeat("x", chunk+1),
		strings.Repeat("é", chunk), "x" + strings.Repeat("€", chunk)} {
		ps := pieces(s)
		if strings.Join(ps, "") != s {
			t.Errorf("%d bytes: the pieces do not make up the text", len(s))
		}
		for _, p := range ps {
			if len(p) == 0 || len(p) > chunk || !utf8.ValidString(p) {
				t.Errorf("%d bytes: a piece of %d bytes (valid UTF-8: %v)", len(s), len(p), utf8.ValidString(p))
			}
		}
	}
}
