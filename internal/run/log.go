package run

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transcript"
	"github.com/ballet/ballet/internal/transition"
)

// A run's log is its session's output, uploaded by its runner in chunks
// (rows of run_logs, base64 text: rqlite does not carry blobs faithfully).
// Each chunk is appended where the log ends; Core keeps Config.LogLimit
// bytes and marks the cut. Log chunks are not events: like heartbeats they
// are operational data, written without an event or a version bump.
const (
	DefaultLogLimit = 8 << 20 // bytes of a run's log kept ([runs] log_limit)
	MaxLogRead      = 1 << 20 // bytes of one read
	// appendTries bounds the re-reads of an upload that lost its race to
	// another upload of the same run (each re-read then sees a repeat or
	// a gap, so one more is nearly always enough).
	appendTries = 5
)

// LogPage is a piece of a run's log.
type LogPage struct {
	Offset     int64  `json:"offset"`      // where data starts
	NextOffset int64  `json:"next_offset"` // where data ends: the offset of the next read
	Data       string `json:"data"`        // the bytes (invalid UTF-8 reads as U+FFFD)
	Truncated  bool   `json:"truncated"`   // the log reached its limit: what followed was dropped
	Finished   bool   `json:"finished"`    // the run has ended: once next_offset stops moving, the log is whole
}

// logEnd is where a run's log ends.
type logEnd struct {
	size      int64
	truncated bool
}

// readLogEnd reads the end of runID's log: its last chunk.
func readLogEnd(ctx context.Context, q store.Store, runID string) (logEnd, error) {
	rows, err := q.Query(ctx, `SELECT start + size, truncated FROM run_logs WHERE run_id = ? ORDER BY start DESC LIMIT 1`, runID)
	if err != nil {
		return logEnd{}, fmt.Errorf("read the end of run %s's log: %w", runID, err)
	}
	var end logEnd
	if rows.Len() == 1 {
		if err := rows.Scan(0, &end.size, &end.truncated); err != nil {
			return logEnd{}, fmt.Errorf("read the end of run %s's log: %w", runID, err)
		}
	}
	return end, nil
}

// logChunk is a chunk to store, with the answer once it is.
type logChunk struct {
	start     int64
	data      []byte
	truncated bool
	answer    runproto.LogAppended
}

// decideAppend decides what an upload of data at offset does to a log
// that ends at end and keeps limit bytes: nothing (ok false) for a repeat
// (the chunk ends at or before the end) or once the log is truncated; a
// conflict for a gap; else the chunk's new bytes, cut at the limit (the
// cut marks the log truncated; a chunk of no bytes may carry the mark).
// The gap's message names no number but the stored size, which the
// runner reads from it.
func decideAppend(end logEnd, offset int64, data []byte, limit int64) (logChunk, bool, error) {
	stored := runproto.LogAppended{Size: end.size, Truncated: end.truncated}
	switch {
	case end.truncated:
		return logChunk{answer: stored}, false, nil
	case offset > end.size:
		return logChunk{}, false, apperr.New(apperr.Conflict,
			"the log holds %d bytes: a chunk must start at or before its end, byte %d", end.size, end.size)
	case offset+int64(len(data)) <= end.size:
		return logChunk{answer: stored}, false, nil
	}
	fresh := data[end.size-offset:]
	room := max(limit-end.size, 0)
	if int64(len(fresh)) <= room {
		return logChunk{start: end.size, data: fresh, answer: runproto.LogAppended{Size: end.size + int64(len(fresh))}}, true, nil
	}
	return logChunk{start: end.size, data: fresh[:room], truncated: true, answer: runproto.LogAppended{Size: end.size + room, Truncated: true}}, true, nil
}

// appendChunk is the guarded insert of c into runID's log: it lands only
// while the run is running and the log ends (untruncated) exactly at
// c.start, so that of two uploads at one offset only one can.
func appendChunk(runID string, c logChunk) store.Statement {
	return store.Stmt(`INSERT INTO run_logs (run_id, start, size, truncated, data)
SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'running')
AND COALESCE((SELECT CASE WHEN truncated = 1 THEN -1 ELSE start + size END FROM run_logs WHERE run_id = ? ORDER BY start DESC LIMIT 1), 0) = ?`,
		runID, c.start, len(c.data), c.truncated, base64.StdEncoding.EncodeToString(c.data), runID, runID, c.start)
}

// AppendLog appends data, uploaded by the session's runner (Held), to run
// runID's log at byte offset: offset must not be past the
// log's end (a gap: 409 naming the stored size); a chunk that ends at or
// before it is a repeat and changes nothing. The log takes chunks while
// the run is running (409 once it has ended) and keeps Config.LogLimit
// bytes; past them it marks the log truncated and drops what comes.
func (s *Service) AppendLog(ctx context.Context, runID string, offset int64, data []byte) (runproto.LogAppended, error) {
	if err := bounds.LogOffset.Err("offset", offset); err != nil {
		return runproto.LogAppended{}, err
	}
	if len(data) > runproto.MaxLogChunk {
		return runproto.LogAppended{}, apperr.New(apperr.TooLarge, "a log chunk is at most %d bytes (this one has %d)", runproto.MaxLogChunk, len(data))
	}
	for try := 1; ; try++ {
		r, err := s.Get(ctx, runID)
		if err != nil {
			return runproto.LogAppended{}, err
		}
		if r.Status != StatusRunning {
			// No number in the message: the runner reads the stored size
			// out of a 409's message.
			return runproto.LogAppended{}, apperr.New(apperr.Conflict, "the run is %s, not running: its log takes no more chunks", r.Status)
		}
		end, err := readLogEnd(ctx, s.store, runID)
		if err != nil {
			return runproto.LogAppended{}, err
		}
		c, write, err := decideAppend(end, offset, data, s.cfg.LogLimit)
		if err != nil || !write {
			return c.answer, err
		}
		_, err = s.store.Exec(ctx, appendChunk(runID, c), transition.Guard)
		switch {
		case err == nil:
			return c.answer, nil
		case try < appendTries && (errors.Is(err, store.ErrLostRace) || errors.Is(err, store.ErrUnknownOutcome)):
			// Another upload landed first, the run ended, or the write's
			// fate is unknown: the next read tells (a chunk that did land
			// reads as a repeat).
		default:
			return runproto.LogAppended{}, fmt.Errorf("append to run %s's log: %w", runID, err)
		}
	}
}

// ReadLog returns run r's log from byte offset on, at most MaxLogRead
// bytes, ending on a whole UTF-8 character when more follows. Read r
// before calling it: a run read as finished has its whole log in the
// store, since no chunk lands once a run has ended. An offset past the
// log's end is a 400 naming it.
func (s *Service) ReadLog(ctx context.Context, r Run, offset int64) (LogPage, error) {
	if err := s.logGone(ctx, r); err != nil {
		return LogPage{}, err
	}
	end, err := readLogEnd(ctx, s.store, r.ID)
	if err != nil {
		return LogPage{}, err
	}
	if offset < 0 || offset > end.size {
		return LogPage{}, apperr.Fields([]apperr.FieldError{{Field: "offset",
			Message: fmt.Sprintf("must be from 0 to the log's size, %d, not %d", end.size, offset)}})
	}
	hi := min(end.size, offset+MaxLogRead)
	// The chunk holding offset starts at the greatest start at or before
	// it; the chunks after it up to hi follow.
	rows, err := s.store.Query(ctx, `SELECT start, data FROM run_logs WHERE run_id = ?
AND start >= COALESCE((SELECT MAX(start) FROM run_logs WHERE run_id = ? AND start <= ?), 0) AND start < ? ORDER BY start`,
		r.ID, r.ID, offset, hi)
	if err != nil {
		return LogPage{}, fmt.Errorf("read run %s's log: %w", r.ID, err)
	}
	buf := make([]byte, 0, hi-offset)
	for i := range rows.Len() {
		var start int64
		var enc string
		if err := rows.Scan(i, &start, &enc); err != nil {
			return LogPage{}, fmt.Errorf("read run %s's log: %w", r.ID, err)
		}
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return LogPage{}, fmt.Errorf("run %s's log chunk at %d: %w", r.ID, start, err)
		}
		lo := max(offset-start, 0)
		up := min(int64(len(b)), hi-start)
		if lo < up {
			buf = append(buf, b[lo:up]...)
		}
	}
	if offset+int64(len(buf)) < end.size {
		buf = wholeRunes(buf)
	}
	return LogPage{Offset: offset, NextOffset: offset + int64(len(buf)), Data: string(buf), Truncated: end.truncated,
		Finished: r.Final()}, nil
}

// wholeRunes drops an incomplete UTF-8 character from b's end (the next
// read starts with it), unless that would leave nothing.
func wholeRunes(b []byte) []byte {
	for i := len(b) - 1; i > 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// TranscriptPage is a run's log read as a transcript (GET
// /runs/{run}/transcript): the entries of internal/transcript, whether
// the transcript or the log was cut, and whether the run has ended.
type TranscriptPage struct {
	transcript.Transcript
	// LogTruncated: the log reached [runs] log_limit; what the session
	// printed after it was never stored.
	LogTruncated bool `json:"log_truncated"`
	Finished     bool `json:"finished"` // the run has ended: the transcript is whole
}

// Transcript reads run r's whole log (at most [runs] log_limit bytes, in
// chunks) and parses it as its adapter's output (internal/transcript).
// Read r before calling it, as for ReadLog. A finished run's transcript
// is parsed once and kept (its log no longer changes).
func (s *Service) Transcript(ctx context.Context, r Run) (TranscriptPage, error) {
	if err := s.logGone(ctx, r); err != nil {
		return TranscriptPage{}, err
	}
	if r.Final() {
		if p, ok := s.transcripts.Get(r.ID); ok {
			return p, nil
		}
	}
	end, err := readLogEnd(ctx, s.store, r.ID)
	if err != nil {
		return TranscriptPage{}, err
	}
	p := transcript.NewParser(r.Adapter)
	var partial []byte // a line that continues in the next chunk
	for offset := int64(0); offset < end.size && !p.Full(); {
		page, err := s.ReadLog(ctx, r, offset)
		if err != nil {
			return TranscriptPage{}, err
		}
		if page.NextOffset <= offset {
			break
		}
		offset = page.NextOffset
		data := append(partial, page.Data...)
		for {
			line, rest, ok := bytes.Cut(data, []byte{'\n'})
			if !ok {
				break
			}
			p.Line(line)
			data = rest
		}
		partial = data
	}
	if len(partial) > 0 && !p.Full() {
		p.Line(partial)
	}
	page := TranscriptPage{Transcript: p.Transcript(), LogTruncated: end.truncated, Finished: r.Final()}
	if page.Finished {
		s.transcripts.Put(r.ID, page)
	}
	return page, nil
}
