package run

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/runproto"
)

func TestDecideAppend(t *testing.T) {
	const limit = 10
	for _, c := range []struct {
		name      string
		end       logEnd
		offset    int64
		data      string
		write     bool
		start     int64
		kept      string
		truncated bool
		answer    runproto.LogAppended
		conflict  bool
	}{
		{name: "first chunk", offset: 0, data: "abc", write: true, kept: "abc", answer: runproto.LogAppended{Size: 3}},
		{name: "next chunk", end: logEnd{size: 3}, offset: 3, data: "de", write: true, start: 3, kept: "de", answer: runproto.LogAppended{Size: 5}},
		{name: "a repeat", end: logEnd{size: 5}, offset: 0, data: "abc", answer: runproto.LogAppended{Size: 5}},
		{name: "a repeat ending at the end", end: logEnd{size: 5}, offset: 3, data: "de", answer: runproto.LogAppended{Size: 5}},
		{name: "an empty chunk at the end", end: logEnd{size: 5}, offset: 5, answer: runproto.LogAppended{Size: 5}},
		{name: "an overlap keeps the new bytes", end: logEnd{size: 5}, offset: 3, data: "defg", write: true, start: 5, kept: "fg", answer: runproto.LogAppended{Size: 7}},
		{name: "a gap", end: logEnd{size: 5}, offset: 6, data: "x", conflict: true},
		{name: "up to the limit", end: logEnd{size: 7}, offset: 7, data: "hij", write: true, start: 7, kept: "hij", answer: runproto.LogAppended{Size: 10}},
		{name: "past the limit", end: logEnd{size: 7}, offset: 7, data: "hijk", write: true, start: 7, kept: "hij", truncated: true,
			answer: runproto.LogAppended{Size: 10, Truncated: true}},
		{name: "one byte past a full log marks it", end: logEnd{size: 10}, offset: 10, data: "k", write: true, start: 10, truncated: true,
			answer: runproto.LogAppended{Size: 10, Truncated: true}},
		{name: "a truncated log drops everything", end: logEnd{size: 10, truncated: true}, offset: 10, data: "k", answer: runproto.LogAppended{Size: 10, Truncated: true}},
		{name: "a truncated log drops a chunk past its end too", end: logEnd{size: 10, truncated: true}, offset: 99, data: "k",
			answer: runproto.LogAppended{Size: 10, Truncated: true}},
		{name: "a log over a lowered limit", end: logEnd{size: 12}, offset: 12, data: "x", write: true, start: 12, truncated: true,
			answer: runproto.LogAppended{Size: 12, Truncated: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, write, err := decideAppend(c.end, c.offset, []byte(c.data), limit)
			if c.conflict {
				if apperr.Code(err) != apperr.Conflict {
					t.Fatalf("error %v, want a conflict", err)
				}
				return
			}
			if err != nil || write != c.write || got.answer != c.answer {
				t.Fatalf("got %+v write %v err %v, want write %v answer %+v", got, write, err, c.write, c.answer)
			}
			if write && (got.start != c.start || string(got.data) != c.kept || got.truncated != c.truncated) {
				t.Fatalf("chunk at %d %q truncated %v, want at %d %q truncated %v", got.start, got.data, got.truncated, c.start, c.kept, c.truncated)
			}
		})
	}
}

func TestWholeRunes(t *testing.T) {
	s := []byte("aé€😀")
	for n := 0; n <= len(s); n++ {
		got := wholeRunes(s[:n])
		if !utf8.Valid(got) && n > 0 && utf8.Valid(s[:n]) {
			t.Fatalf("%d: cut a valid text to %q", n, got)
		}
		if len(got) > 1 && !utf8.Valid(got) {
			t.Fatalf("%d: %q ends in a partial character", n, got)
		}
		if !bytes.HasPrefix(s, got) || len(s[:n])-len(got) >= utf8.UTFMax {
			t.Fatalf("%d: %q", n, got)
		}
	}
	if got := wholeRunes([]byte{0xff, 0xfe}); len(got) != 2 {
		t.Fatalf("invalid bytes are not characters to wait for: %q", got)
	}
}
