package run

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/lru"
	"github.com/ballet/ballet/internal/transcript"
)

// TestTranscriptCacheEvicts: the cache holds about its bytes, the least
// recently read going first; a transcript larger than the cache is not kept.
func TestTranscriptCacheEvicts(t *testing.T) {
	page := func(text string) TranscriptPage {
		return TranscriptPage{Transcript: transcript.Transcript{Entries: []transcript.TranscriptEntry{{Kind: "text", Text: text}}}, Finished: true}
	}
	one := page(strings.Repeat("a", 1000))
	c := lru.New[string](3*transcriptSize(one), transcriptSize)
	for _, id := range []string{"r1", "r2", "r3"} {
		c.Put(id, one)
	}
	if _, ok := c.Get("r1"); !ok { // r1 is now the most recently read
		t.Fatal("r1 is not kept")
	}
	c.Put("r4", one)
	if _, ok := c.Get("r2"); ok {
		t.Fatal("r2, the least recently read, is still kept past the bound")
	}
	for _, id := range []string{"r1", "r3", "r4"} {
		if got, ok := c.Get(id); !ok || got.Entries[0].Text != one.Entries[0].Text {
			t.Fatalf("%s: %+v, %v", id, got, ok)
		}
	}
	c.Put("big", page(strings.Repeat("b", 4*transcriptSize(one))))
	if _, ok := c.Get("big"); ok {
		t.Fatal("a transcript larger than the cache is kept")
	}
	if _, ok := c.Get("r4"); !ok {
		t.Fatal("a transcript too large to keep evicted the others")
	}
}
