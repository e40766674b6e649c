package runner

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/runner/protocol"
	"github.com/ballet/ballet/internal/runproto"
)

// core is a fake log endpoint: it keeps what it is sent, and answers as
// the next of its scripted answers says (then 200).
type logCore struct {
	mu      sync.Mutex
	log     []byte
	limit   int64
	posts   []int64 // the offsets posted
	sizes   []int   // the chunk sizes
	answers []error // scripted failures, in order
	block   chan struct{}
	posted  chan struct{} // gets a value per post
}

func (c *logCore) post(ctx context.Context, offset int64, data []byte) (runproto.LogAppended, error) {
	c.mu.Lock()
	c.posts = append(c.posts, offset)
	c.sizes = append(c.sizes, len(data))
	var fail error
	if len(c.answers) > 0 {
		fail, c.answers = c.answers[0], c.answers[1:]
	}
	block := c.block
	c.mu.Unlock()
	if c.posted != nil {
		c.posted <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return runproto.LogAppended{}, ctx.Err()
		}
	}
	if fail != nil {
		return runproto.LogAppended{}, fail
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset != int64(len(c.log)) {
		return runproto.LogAppended{}, &protocol.Error{Status: http.StatusConflict, Message: "gap"}
	}
	c.log = append(c.log, data...)
	trunc := c.limit > 0 && int64(len(c.log)) > c.limit
	if trunc {
		c.log = c.log[:c.limit]
	}
	return runproto.LogAppended{Size: int64(len(c.log)), Truncated: trunc}, nil
}

func (c *logCore) snapshot() ([]byte, []int64, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.log), append([]int64(nil), c.posts...), append([]int(nil), c.sizes...)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func runUploader(t *testing.T, u *uploader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-u.done })
	go u.run(ctx)
}

// The output reaches Core whole, in order, in chunks of at most 1 MiB.
func TestUploaderSendsEverythingInChunks(t *testing.T) {
	t.Parallel()
	c := &logCore{}
	u := newUploader(c.post, clock.Real{}, quiet, 8<<20, retryPolicy{time.Second, time.Second})
	runUploader(t, u)
	var want bytes.Buffer
	for i := range 5 {
		line := bytes.Repeat([]byte{byte('a' + i)}, 700<<10)
		want.Write(line)
		_, _ = u.Write(line)
	}
	u.flush(context.Background(), time.Hour, time.Hour)
	got, _, sizes := c.snapshot()
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("Core got %d bytes, want %d", len(got), want.Len())
	}
	for _, s := range sizes {
		if s > runproto.MaxLogChunk {
			t.Errorf("a chunk of %d bytes", s)
		}
	}
}

// A chunk Core could not take (unreachable, 503) is sent again after 1 s,
// then 2 s … on the clock; a refusal (403) ends the upload.
func TestUploaderRetriesThenGivesUpOnRefusal(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	unavailable := &protocol.Error{Status: http.StatusServiceUnavailable}
	c := &logCore{answers: []error{unavailable, io.ErrUnexpectedEOF}, posted: make(chan struct{}, 10)}
	u := newUploader(c.post, clk, quiet, 8<<20, retryPolicy{time.Second, 30 * time.Second})
	runUploader(t, u)
	_, _ = u.Write([]byte("hello\n"))
	<-c.posted
	clk.BlockUntil(1)
	clk.Advance(999 * time.Millisecond)
	select {
	case <-c.posted:
		t.Fatal("sent again before its second")
	default:
	}
	clk.Advance(time.Millisecond)
	<-c.posted
	clk.BlockUntil(1)
	clk.Advance(2 * time.Second)
	<-c.posted
	u.flush(context.Background(), time.Hour, time.Hour)
	if got, posts, _ := c.snapshot(); string(got) != "hello\n" || len(posts) != 3 {
		t.Errorf("Core has %q after %d posts", got, len(posts))
	}

	c = &logCore{answers: []error{&protocol.Error{Status: http.StatusForbidden}}}
	u = newUploader(c.post, clk, quiet, 8<<20, retryPolicy{time.Second, 30 * time.Second})
	runUploader(t, u)
	_, _ = u.Write([]byte("x"))
	<-u.done
	_, _ = u.Write([]byte("y")) // dropped, without blocking
	if _, posts, _ := c.snapshot(); len(posts) != 1 {
		t.Errorf("%d posts after a refusal", len(posts))
	}
}

// What Core would not keep is not sent: one byte past the limit (so that
// Core marks the truncation), then nothing — and it is not held in memory
// either.
func TestUploaderStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	c := &logCore{limit: 10}
	u := newUploader(c.post, clock.Real{}, quiet, 10, retryPolicy{time.Second, time.Second})
	_, _ = u.Write([]byte(strings.Repeat("x", 25)))
	if len(u.buf) != 11 || u.dropped != 14 {
		t.Errorf("buffered %d, dropped %d; want 11 and 14", len(u.buf), u.dropped)
	}
	runUploader(t, u)
	u.flush(context.Background(), time.Hour, time.Hour)
	if got, posts, _ := c.snapshot(); len(got) != 10 || len(posts) != 1 {
		t.Errorf("Core holds %d bytes after %d posts", len(got), len(posts))
	}
}

// Write never blocks the session, whatever Core does; flush gives up after
// its wait on the clock.
func TestUploaderNeverBlocksTheSession(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	c := &logCore{block: make(chan struct{}), posted: make(chan struct{}, 10)}
	u := newUploader(c.post, clk, quiet, 8<<20, retryPolicy{time.Second, time.Second})
	runUploader(t, u)
	_, _ = u.Write([]byte("first"))
	<-c.posted // Core now hangs on the first chunk
	for range 100 {
		_, _ = u.Write(bytes.Repeat([]byte("y"), 1<<20))
	}
	u.mu.Lock()
	if len(u.buf) > 8<<20+1 {
		t.Errorf("%d bytes buffered", len(u.buf))
	}
	u.mu.Unlock()
	flushed := make(chan struct{})
	go func() { u.flush(context.Background(), 30*time.Second, 30*time.Second); close(flushed) }()
	clk.BlockUntil(1)
	clk.Advance(30 * time.Second)
	<-flushed
}

// A gap (Core holds fewer bytes than were sent: it lost some) is bridged
// by a line saying so, sent where Core's log ends; the upload goes on.
func TestUploaderBridgesAGap(t *testing.T) {
	t.Parallel()
	c := &logCore{}
	u := newUploader(c.post, clock.Real{}, quiet, 8<<20, retryPolicy{time.Second, time.Second})
	u.offset = 10 // as if 10 bytes had been taken, and Core lost 5 of them
	c.log = []byte("01234")
	c.answers = []error{&protocol.Error{Status: http.StatusConflict, Message: "the log holds 5 bytes; a chunk must start there"}}
	runUploader(t, u)
	_, _ = u.Write([]byte("next\n"))
	u.flush(context.Background(), time.Hour, time.Hour)
	got, posts, _ := c.snapshot()
	if want := "01234\n[ballet runner: 5 bytes of this log were lost on the way to Core]\nnext\n"; string(got) != want || posts[1] != 5 {
		t.Errorf("Core holds %q (posts at %v), want %q", got, posts, want)
	}
}

func TestRetryPolicy(t *testing.T) {
	p := retryPolicy{time.Second, 30 * time.Second}
	var got []time.Duration
	for i := range 8 {
		got = append(got, p.delay(i))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Errorf("delays %v", got)
			break
		}
	}
	if p.delay(1000) != 30*time.Second {
		t.Error("no cap for a large attempt")
	}
}

// errorText keeps finish's error valid for Core: printable (line feeds and
// tabs kept), without repeats, within 16 KiB.
func TestErrorText(t *testing.T) {
	if got := errorText([]string{"a\x1b[31mred", "", "a\x1b[31mred", "line\n\tnext\r", "bad \xff utf8"}); got != "a [31mred\nline\n\tnext\nbad ? utf8" {
		t.Errorf("%q", got)
	}
	if got := errorText([]string{strings.Repeat("é", 20000)}); len(got) > runproto.MaxError || !strings.HasSuffix(got, "…") {
		t.Errorf("%d bytes", len(got))
	}
}

// A usage a CLI or model API told beyond what Core takes (bounds.Tokens,
// bounds.CostUSD) is reported at the bound, never refused: a refused
// finish would leave the run's spend at nothing.
func TestUsageWithinCoreBounds(t *testing.T) {
	huge := runproto.Usage{InputTokens: math.MaxInt64, OutputTokens: -5, CacheReadTokens: 7, CacheWriteTokens: bounds.Tokens.Max + 1, CostUSD: math.Inf(1)}
	want := runproto.Usage{InputTokens: bounds.Tokens.Max, OutputTokens: 0, CacheReadTokens: 7, CacheWriteTokens: bounds.Tokens.Max, CostUSD: float64(bounds.CostUSD.Max)}
	if got := bounded(huge); got != want {
		t.Errorf("bounded(%+v) = %+v, want %+v", huge, got, want)
	}
	if got := bounded(runproto.Usage{InputTokens: 3, CostUSD: math.NaN()}); got != (runproto.Usage{InputTokens: 3}) {
		t.Errorf("a NaN cost: %+v", got)
	}
	ok := runproto.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: 0.5}
	if got := bounded(ok); got != ok {
		t.Errorf("bounded(%+v) = %+v", ok, got)
	}
}
