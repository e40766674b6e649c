package run_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// logService is a run service over the world's store that keeps limit
// bytes of a log.
func (w *world) logService(limit int64) *run.Service {
	return run.NewService(w.st, w.applier, w.fc, w.tr, run.Config{Grace: grace, LogLimit: limit, OnFinish: flow.OnRunFinished})
}

func (w *world) append(svc *run.Service, p *auth.Principal, id string, offset int64, data string) (runproto.LogAppended, error) {
	w.t.Helper()
	before := w.lastSeq()
	a, err := svc.AppendLog(w.ctx, id, offset, []byte(data))
	if after := w.lastSeq(); after != before {
		w.t.Fatalf("a log upload wrote events %d…%d: log chunks are not events", before+1, after)
	}
	return a, err
}

func TestAppendAndReadLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s)
		svc := w.logService(1024)
		w.newRun()
		l, p := w.lease()
		id := l.Run.ID
		want := func(a runproto.LogAppended, err error, size int64, truncated bool) {
			t.Helper()
			if err != nil || a.Size != size || a.Truncated != truncated {
				t.Fatalf("appended %+v, %v; want size %d truncated %v", a, err, size, truncated)
			}
		}
		a, err := w.append(svc, p, id, 0, "hello ")
		want(a, err, 6, false)
		a, err = w.append(svc, p, id, 0, "hello ") // the same chunk again
		want(a, err, 6, false)
		a, err = w.append(svc, p, id, 2, "llo") // ends before the end
		want(a, err, 6, false)
		a, err = w.append(svc, p, id, 0, "hello world") // overlaps: its new bytes land
		want(a, err, 11, false)
		if _, err = w.append(svc, p, id, 12, "!"); apperr.Code(err) != apperr.Conflict || !strings.Contains(err.Error(), "holds 11 bytes") {
			t.Fatalf("a gap: %v", err)
		}
		if _, err = w.append(svc, p, id, -1, "x"); apperr.Code(err) != apperr.Invalid {
			t.Fatalf("a negative offset: %v", err)
		}
		if _, err = w.append(svc, p, id, 11, strings.Repeat("x", runproto.MaxLogChunk+1)); apperr.Code(err) != apperr.TooLarge {
			t.Fatalf("an oversized chunk: %v", err)
		}
		binary := "\x00\xff\xfe\n"
		a, err = w.append(svc, p, id, 11, binary)
		want(a, err, 15, false)

		// Reads: any offset up to the end; the page says where to go on.
		r := w.get(id)
		page, err := svc.ReadLog(w.ctx, r, 6)
		if err != nil || page.Offset != 6 || page.NextOffset != 15 || page.Data != "world"+binary || page.Truncated || page.Finished {
			t.Fatalf("read from 6: %+v, %v", page, err)
		}
		if page, err = svc.ReadLog(w.ctx, r, 15); err != nil || page.NextOffset != 15 || page.Data != "" {
			t.Fatalf("read at the end: %+v, %v", page, err)
		}
		if _, err = svc.ReadLog(w.ctx, r, 16); apperr.Code(err) != apperr.Invalid || !strings.Contains(err.Error(), "offset") {
			t.Fatalf("read past the end: %v", err)
		}

		// The limit: the log is cut and marked, and then takes nothing.
		a, err = w.append(svc, p, id, 15, strings.Repeat("a", 2000))
		want(a, err, 1024, true)
		a, err = w.append(svc, p, id, 1024, "more")
		want(a, err, 1024, true)
		a, err = w.append(svc, p, id, 3000, "much more") // the runner's own count goes on
		want(a, err, 1024, true)
		page, err = svc.ReadLog(w.ctx, r, 0)
		if err != nil || page.NextOffset != 1024 || page.Data != "hello world"+binary+strings.Repeat("a", 1009) || !page.Truncated {
			t.Fatalf("the truncated log: next %d truncated %v, %v", page.NextOffset, page.Truncated, err)
		}

		// Once the run has ended its log takes no more chunks, and reads
		// say it is finished.
		if _, err := w.svc.Finish(w.ctx, w.runnerP.Actor, id, run.FinishInput{ExitStatus: ptr(0)}); err != nil {
			t.Fatal(err)
		}
		_, err = w.append(svc, p, id, 1024, "late")
		if apperr.Code(err) != apperr.Conflict || !strings.Contains(err.Error(), "not running") || strings.ContainsAny(err.Error(), "0123456789") {
			t.Fatalf("after finish: %v (the runner reads a 409's numbers as the stored size: none may be there)", err)
		}
		if page, err = svc.ReadLog(w.ctx, w.get(id), 1000); err != nil || !page.Finished || page.NextOffset != 1024 {
			t.Fatalf("the finished run's log: %+v, %v", page, err)
		}

		// A queued run has no session yet: its log takes nothing either.
		q := w.newRun()
		scoped := &auth.Principal{TokenKind: auth.KindRun, Scopes: []string{"run:" + q.ID}}
		if _, err := w.append(svc, scoped, q.ID, 0, "x"); apperr.Code(err) != apperr.Conflict {
			t.Fatalf("a queued run: %v", err)
		}
	})
}

// TestLogAppendIsGuarded: two uploads decided on the same read of the log
// cannot both land, and none lands once the run has ended (the guard, not
// the read, decides).
func TestLogAppendIsGuarded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s)
		w.newRun()
		l, _ := w.lease()
		id := l.Run.ID
		if _, err := s.Exec(w.ctx, run.AppendChunk(id, 0, []byte("first")), transition.Guard); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(w.ctx, run.AppendChunk(id, 0, []byte("other")), transition.Guard); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a second chunk at the same offset: %v, want a lost race", err)
		}
		if _, err := s.Exec(w.ctx, run.AppendChunk(id, 3, []byte("st")), transition.Guard); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a chunk inside the log: %v, want a lost race", err)
		}
		if _, err := w.svc.Finish(w.ctx, w.runnerP.Actor, id, run.FinishInput{ExitStatus: ptr(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(w.ctx, run.AppendChunk(id, 5, []byte("late")), transition.Guard); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a chunk after the finish: %v, want a lost race", err)
		}
		page, err := w.svc.ReadLog(w.ctx, w.get(id), 0)
		if err != nil || page.Data != "first" {
			t.Fatalf("the log: %+v, %v", page, err)
		}
	})
}

// TestReadLogPages reads a log of several chunks page by page: each page
// at most MaxLogRead bytes, ending on a whole character when more
// follows, and together exactly the log.
func TestReadLogPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s)
		svc := w.logService(3 << 20)
		w.newRun()
		l, _ := w.lease()
		id := l.Run.ID
		log := []byte("a" + strings.Repeat("é", 1<<20) + "end") // a page boundary at 1 MiB cuts an é
		for off := 0; off < len(log); off += 700_000 {          // chunk boundaries cut some too
			chunk := log[off:min(off+700_000, len(log))]
			if _, err := svc.AppendLog(w.ctx, id, int64(off), chunk); err != nil {
				t.Fatal(err)
			}
		}
		r := w.get(id)
		var got []byte
		pages := 0
		for off := int64(0); off < int64(len(log)); pages++ {
			page, err := svc.ReadLog(w.ctx, r, off)
			if err != nil {
				t.Fatal(err)
			}
			n := page.NextOffset - page.Offset
			if page.Offset != off || n <= 0 || n > run.MaxLogRead || !utf8.ValidString(page.Data) {
				t.Fatalf("page at %d: next %d, %d bytes, valid %v", off, page.NextOffset, len(page.Data), utf8.ValidString(page.Data))
			}
			got = append(got, page.Data...)
			off = page.NextOffset
		}
		if !bytes.Equal(got, log) || pages != 3 {
			t.Fatalf("read %d bytes in %d pages, want the %d bytes of the log in 3", len(got), pages, len(log))
		}
		page, err := svc.ReadLog(w.ctx, r, 699_999) // within a chunk, across the next
		if err != nil || page.Data != string(log[699_999:699_999+len(page.Data)]) || len(page.Data) < run.MaxLogRead-3 {
			t.Fatalf("a read across chunks: %d bytes, %v", len(page.Data), err)
		}
	})
}

// TestTranscriptOfFinishedRunIsKept: a running run's transcript is parsed
// from its log on every read (it grows); a finished run's is parsed once
// and kept, since its log takes no more chunks (the second read after the
// finish does not read the log: its rows are gone and it still answers).
func TestTranscriptOfFinishedRunIsKept(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s)
		w.newRun()
		l, _ := w.lease()
		id := l.Run.ID
		line := func(text string) string {
			return `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"` + text + `"}]}}` + "\n"
		}
		entries := func(want int) {
			t.Helper()
			tr, err := w.svc.Transcript(w.ctx, w.get(id))
			if err != nil || len(tr.Entries) != want {
				t.Fatalf("transcript: %+v, %v; want %d entries", tr, err, want)
			}
		}
		first := line("I read the test.")
		if _, err := w.svc.AppendLog(w.ctx, id, 0, []byte(first)); err != nil {
			t.Fatal(err)
		}
		entries(1)
		if _, err := w.svc.AppendLog(w.ctx, id, int64(len(first)), []byte(line("I fix the parser."))); err != nil {
			t.Fatal(err)
		}
		entries(2) // a running run's transcript is read again
		if _, err := w.svc.Finish(w.ctx, w.runnerP.Actor, id, run.FinishInput{ExitStatus: ptr(0)}); err != nil {
			t.Fatal(err)
		}
		entries(2)
		if _, err := s.Exec(w.ctx, store.Stmt(`DELETE FROM run_logs WHERE run_id = ?`, id)); err != nil {
			t.Fatal(err)
		}
		entries(2) // kept: the log is not read again
	})
}
