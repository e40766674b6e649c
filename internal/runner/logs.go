package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/runner/protocol"
	"github.com/ballet/ballet/internal/runproto"
)

// defaultLogLimit is what Core keeps of a run's log when the lease does
// not say ([runs] log_limit's default).
const defaultLogLimit = 8 << 20

// logPoster sends one chunk of a run's log: protocol.Client.AppendLog for
// one run.
type logPoster func(ctx context.Context, offset int64, data []byte) (runproto.LogAppended, error)

// uploader sends a session's output to Core in chunks as it comes. Write
// never blocks and never fails: it buffers, and what Core would not keep
// anyway (past the log's limit) is dropped — all but one byte beyond the
// limit, which makes Core mark the log truncated. Each chunk is retried
// with backoff on the clock until Core takes it; a refusal (a 4xx other
// than a gap) ends the upload.
type uploader struct {
	post  logPoster
	clock clock.Clock
	log   *slog.Logger
	limit int64 // bytes Core keeps
	retry retryPolicy

	mu       sync.Mutex
	buf      []byte // accepted, not yet sent
	offset   int64  // where buf starts: the bytes Core has
	accepted int64  // every byte accepted so far (offset + len(buf), marks included)
	dropped  int64  // bytes not accepted
	closed   bool   // no more writes; run ends once buf is sent
	stopped  bool   // Core refused: nothing more is sent
	// unreachable: the last try failed as a Core that is down does (a
	// transport error, 503…): flush then waits longer.
	unreachable bool
	wake        chan struct{}
	done        chan struct{}
}

func newUploader(post logPoster, clk clock.Clock, log *slog.Logger, limit int64, retry retryPolicy) *uploader {
	if limit <= 0 {
		limit = defaultLogLimit
	}
	return &uploader{post: post, clock: clk, log: log, limit: limit, retry: retry,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Write buffers p for upload. It never blocks the session.
func (u *uploader) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.stopped {
		u.dropped += int64(len(p))
		return len(p), nil
	}
	room := u.limit + 1 - u.accepted // one byte past the limit: Core marks the truncation
	take := int64(len(p))
	if take > room {
		take = max(room, 0)
	}
	u.buf = append(u.buf, p[:take]...)
	u.accepted += take
	u.dropped += int64(len(p)) - take
	u.signal()
	return len(p), nil
}

func (u *uploader) signal() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// close ends the writes; run returns once everything is sent (or ctx
// ends).
func (u *uploader) close() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.signal()
}

// gapRE finds the numbers in Core's 409 message, one of which is the
// stored size.
var gapRE = regexp.MustCompile(`\d+`)

// run sends the buffer until close and an empty buffer, a refusal, or ctx.
func (u *uploader) run(ctx context.Context) {
	defer close(u.done)
	attempt := 0
	for {
		u.mu.Lock()
		n := min(len(u.buf), runproto.MaxLogChunk)
		chunk := u.buf[:n:n]
		offset, finished := u.offset, u.stopped || (u.closed && len(u.buf) == 0)
		u.mu.Unlock()
		if finished {
			return
		}
		if n == 0 {
			select {
			case <-u.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		ans, err := u.post(ctx, offset, chunk)
		switch {
		case err == nil:
			attempt = 0
			u.mu.Lock()
			u.unreachable = false
			u.buf = u.buf[n:]
			u.offset += int64(n)
			if ans.Truncated { // Core keeps nothing more
				u.stopped = true
			}
			u.mu.Unlock()
		case ctx.Err() != nil:
			return
		case protocol.StatusOf(err) == http.StatusConflict:
			if !u.resync(err, offset) {
				u.stop("the log upload lost its place", err)
				return
			}
		case protocol.Retryable(err):
			u.mu.Lock()
			u.unreachable = true
			u.mu.Unlock()
			if !sleep(ctx, u.clock, u.retry.delay(attempt)) {
				return
			}
			attempt++
		default:
			u.stop("Core refused the log", err)
			return
		}
	}
}

// resync handles a gap: Core holds fewer bytes than were sent (the stored
// size is in its message). What is missing cannot be sent again; a line
// saying so takes its place.
func (u *uploader) resync(err error, offset int64) bool {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return false
	}
	var stored int64 = -1
	for _, m := range gapRE.FindAllString(pe.Message, -1) {
		if v, perr := strconv.ParseInt(m, 10, 64); perr == nil && v < offset {
			if stored >= 0 && stored != v {
				return false // two candidates: no guessing
			}
			stored = v
		}
	}
	if stored < 0 {
		return false
	}
	mark := fmt.Sprintf("\n[ballet runner: %d bytes of this log were lost on the way to Core]\n", offset-stored)
	u.mu.Lock()
	u.buf = append([]byte(mark), u.buf...)
	u.offset = stored
	u.mu.Unlock()
	return true
}

func (u *uploader) stop(why string, err error) {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	u.log.Warn("session log: "+why+"; the rest of the log is not uploaded", "err", err)
}

// flush closes the uploader and waits until the log is sent, at most
// wait on the clock — or, while Core is unreachable, up to outage: the
// log's end must reach Core before the run's finish (a finished run's log
// takes nothing more), and a Core restarting is soon back.
func (u *uploader) flush(ctx context.Context, wait, outage time.Duration) {
	u.close()
	start := u.clock.Now()
	for next := wait; ; {
		t := u.clock.NewTimer(next)
		select {
		case <-u.done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		u.mu.Lock()
		down := u.unreachable
		u.mu.Unlock()
		waited := u.clock.Now().Sub(start)
		if !down || waited >= outage {
			u.log.Warn("session log: Core did not take the whole log in time; the rest is dropped", "waited", waited)
			return
		}
		next = min(wait, outage-waited)
	}
}

// retryPolicy is the backoff between tries of a call to Core.
type retryPolicy struct {
	first, cap time.Duration
}

// delay is the wait before try attempt+1: first, doubling, at most cap.
func (p retryPolicy) delay(attempt int) time.Duration {
	d := p.first
	for range min(attempt, 30) {
		d *= 2
		if d >= p.cap {
			return p.cap
		}
	}
	return min(d, p.cap)
}

// sleep waits d on clk; false when ctx ended first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	return clock.Sleep(ctx, clk, d) == nil
}
