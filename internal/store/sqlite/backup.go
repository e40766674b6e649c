package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// Backup writes a consistent snapshot of the database at path to the new
// file to, while its holder goes on serving: SQLite's VACUUM INTO, on a
// connection of its own, reads one snapshot (a WAL read transaction, which
// never blocks the writer) and writes it compacted into a temporary file
// beside to, renamed to to once whole and synced. to must not exist; its
// folder is created if needed.
func Backup(ctx context.Context, path, to string) error {
	if _, err := os.Stat(path); err != nil {
		return fileError("read the database", path, err)
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s exists: a backup is written to a new file (remove it or name another)", to)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return fileError("create the backup's folder", filepath.Dir(to), err)
	}
	tmp, err := tempBeside(to, ".backup-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite", "file:"+path+"?"+url.Values{"_pragma": {"busy_timeout(10000)"}}.Encode())
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return fmt.Errorf("snapshot %s into %s: %w", path, tmp, err)
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, to); err != nil {
		return fileError("move the backup into place", to, err)
	}
	return syncDir(filepath.Dir(to))
}

// Snapshot is what Check found in a database file.
type Snapshot struct {
	Migrations []string // the names in its schema_migrations, in order
	Bytes      int64    // its size
}

// Check opens the database file read-only and checks it: SQLite's
// integrity_check must answer ok, and it must be a Ballet database (a
// schema_migrations table). It returns the migrations it holds.
func Check(ctx context.Context, file string) (Snapshot, error) {
	st, err := os.Stat(file)
	if err != nil {
		return Snapshot{}, fileError("read the database", file, err)
	}
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		return Snapshot{}, fmt.Errorf("open %s: %w", file, err)
	}
	defer db.Close()
	var verdict []string
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s is not a SQLite database: %w", file, err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return Snapshot{}, fmt.Errorf("check %s: %w", file, err)
		}
		verdict = append(verdict, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Snapshot{}, fmt.Errorf("%s is not a SQLite database: %w", file, err)
	}
	if len(verdict) != 1 || verdict[0] != "ok" {
		return Snapshot{}, fmt.Errorf("%s fails SQLite's integrity check: %s", file, strings.Join(verdict, "; "))
	}
	names, err := db.QueryContext(ctx, store.AppliedQuery)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s is not a Ballet database (no schema_migrations): %w", file, err)
	}
	defer names.Close()
	snap := Snapshot{Bytes: st.Size()}
	for names.Next() {
		var n string
		if err := names.Scan(&n); err != nil {
			return Snapshot{}, fmt.Errorf("read %s's migrations: %w", file, err)
		}
		snap.Migrations = append(snap.Migrations, n)
	}
	return snap, names.Err()
}

// Restore replaces the database at path with the snapshot from (checked
// first by the caller: Check). It takes path's lock first, so it refuses
// with a *LockedError while a process holds the database — a running
// `ballet serve` (or `ballet up`'s Core) holds it from start to exit, and
// the kernel frees it when that process dies however it dies. Under the
// lock the current database, if any, is moved aside with its -wal and
// -shm files to path + ".replaced-<UTC time>" (returned; "" when there was
// none), and a synced copy of from renamed into place.
func Restore(from, path string, now time.Time) (aside string, err error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", fileError("create the database folder", dir, err)
		}
	}
	lk, err := lock(path)
	if err != nil {
		return "", err
	}
	defer lk.release()
	tmp, err := tempBeside(path, ".restore-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if err := copyFile(from, tmp); err != nil {
		return "", err
	}
	// The current database moves aside whole: its file with its WAL (which
	// may hold its latest commits) and shared-memory index, under one name
	// SQLite opens them by; nothing of it is read, so a damaged one moves too.
	if _, err := os.Stat(path); err == nil {
		aside = path + ".replaced-" + now.UTC().Format("20060102T150405Z")
		for _, suffix := range []string{"-wal", "-shm", ""} {
			if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", fileError("move the current database aside", aside+suffix, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fileError("read the database", path, err)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} { // left by a database already gone
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return aside, fileError("remove the old database's", f, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return aside, fileError("move the restored database into place", path, err)
	}
	return aside, syncDir(filepath.Dir(path))
}

// tempBeside names a new empty temporary file in the folder of name (so
// that renaming it onto name is atomic).
func tempBeside(name, pattern string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+pattern)
	if err != nil {
		return "", fileError("create a file beside", name, err)
	}
	n := f.Name()
	f.Close()
	// VACUUM INTO writes only into an empty or absent file.
	if err := os.Remove(n); err != nil {
		return "", fileError("prepare", n, err)
	}
	return n, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fileError("read the backup", from, err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fileError("write", to, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("sync %s: %w", to, err)
	}
	return out.Close()
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fileError("sync", name, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fileError("sync the folder", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync the folder %s: %w", dir, err)
	}
	return nil
}
