package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// fill writes mb megabytes into a table of its own in s (1 MiB a row).
func fill(t testing.TB, s *Store, mb int) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, data TEXT NOT NULL)`)); err != nil {
		t.Fatal(err)
	}
	row := strings.Repeat("x", 1<<20)
	for range mb {
		if _, err := s.Exec(ctx, store.Stmt(`INSERT INTO blobs (data) VALUES (?)`, row)); err != nil {
			t.Fatal(err)
		}
	}
}

// A backup is a whole, consistent copy taken while the holder writes:
// every row committed before it is in it, the writer goes on meanwhile,
// and restore refuses while the holder has the database open, then works
// once it has closed it, keeping the replaced database aside.
func TestBackupWhileWritingAndRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "core.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 4)
	var wrote atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Exec(ctx, store.Stmt(`INSERT INTO blobs (data) VALUES ('small')`)); err != nil {
				t.Error(err)
				return
			}
			wrote.Add(1)
		}
	}()
	before := wrote.Load()
	to := filepath.Join(dir, "backups", "snap.db") // the folder is created
	if err := Backup(ctx, path, to); err != nil {
		t.Fatal(err)
	}
	during := wrote.Load() - before
	close(stop)
	wg.Wait()
	if _, err := Check(ctx, to); err == nil || !strings.Contains(err.Error(), "not a Ballet database") {
		t.Fatalf("a database without migrations: %v", err)
	}
	// integrity_check passed (Check got to the migrations): count the rows.
	snap, err := OpenShared(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := snap.Query(ctx, `SELECT COUNT(*), SUM(length(data) > 100) FROM blobs`)
	if err != nil {
		t.Fatal(err)
	}
	var n, big int64
	if err := rows.Scan(0, &n, &big); err != nil || big != 4 || n < 4+before {
		t.Fatalf("the backup holds %d rows (%d big): want every row committed before it (%d)", n, big, 4+before)
	}
	snap.Close()
	t.Logf("the writer committed %d rows while the backup ran", during)

	var locked *LockedError
	if _, err := Restore(to, path, time.Now()); !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Fatalf("restore over an open database: %v", err)
	}
	s.Close()
	aside, err := Restore(to, path, time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC))
	if err != nil || aside != path+".replaced-20261207T010203Z" {
		t.Fatalf("restore: %q, %v", aside, err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old database's WAL is still there: %v", err)
	}
	r, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows, err = r.Query(ctx, `SELECT COUNT(*) FROM blobs`)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	if rows.Scan(0, &got); got != n {
		t.Fatalf("the restored database holds %d rows, the backup %d", got, n)
	}
	old, err := OpenShared(ctx, aside)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	rows, err = old.Query(ctx, `SELECT COUNT(*) FROM blobs`)
	if err != nil {
		t.Fatal(err)
	}
	var kept int64
	if rows.Scan(0, &kept); kept != 4+wrote.Load() {
		t.Fatalf("the replaced database holds %d rows, want all %d written: its WAL was lost", kept, 4+wrote.Load())
	}
}

// BenchmarkBackup measures a backup of a database of BALLET_BACKUP_MB
// megabytes (default 100) while a writer commits small rows, and the
// writer's longest commit meanwhile.
func BenchmarkBackup(b *testing.B) {
	mb := 100
	if v, err := strconv.Atoi(os.Getenv("BALLET_BACKUP_MB")); err == nil && v > 0 {
		mb = v
	}
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "core.db")
	s, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s, mb)
	b.ResetTimer()
	for i := range b.N {
		stop := make(chan struct{})
		var worst atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				if _, err := s.Exec(ctx, store.Stmt(`INSERT INTO blobs (data) VALUES ('small')`)); err != nil {
					b.Error(err)
					return
				}
				if d := time.Since(start).Nanoseconds(); d > worst.Load() {
					worst.Store(d)
				}
			}
		}()
		start := time.Now()
		if err := Backup(ctx, path, filepath.Join(dir, "snap"+strconv.Itoa(i)+".db")); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(mb)/took.Seconds(), "MB/s")
		b.ReportMetric(float64(worst.Load())/1e6, "max-write-ms")
	}
}
