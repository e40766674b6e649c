package sqlite

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// LockedError is returned by Open when another process (or another Open
// in this one) holds the database: two Cores on one SQLite file would both
// lead, running two schedulers and orchestrators.
type LockedError struct {
	Path string // the database file
	Lock string // the lock file
	PID  int    // the holder's process id (0: unknown)
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
		if e.PID == os.Getpid() {
			holder += " (this one: the database is already open)"
		}
	}
	return fmt.Sprintf("database %s is in use: %s holds its lock %s (is another `ballet serve` running on it?)", e.Path, holder, e.Lock)
}

// lockFile is the held lock of a database.
type lockFile struct{ f *os.File }

// lock takes the exclusive advisory lock on path + ".lock" and writes this
// process's id into it, for the message of whoever tries next. The kernel
// releases the lock when the process ends, however it ends (SIGKILL too),
// so a stale lock file is harmless: it is never deleted, only re-locked.
func lock(path string) (*lockFile, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fileError("create the lock file", name, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if !held {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return nil, &LockedError{Path: path, Lock: name, PID: pid}
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fileError("write the lock file", name, err)
	}
	return &lockFile{f: f}, nil
}

// release gives the lock up (closing the file releases it); again is a
// no-op.
func (l *lockFile) release() error {
	if l == nil {
		return nil
	}
	if err := l.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// fileError words a file system error so that a person sees at once what
// is wrong and where: "permission denied: PATH".
func fileError(what, name string, err error) error {
	var pe *fs.PathError
	path := name
	if errors.As(err, &pe) {
		path = pe.Path
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%s: permission denied: %s", what, path)
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}
