package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The lock holder child: opens the database, says so, and waits to be
// killed.
const envHolder = "BALLET_SQLITE_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if path := os.Getenv(envHolder); path != "" {
		s, err := Open(context.Background(), path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		defer s.Close()
		fmt.Println("open")
		select {} // until SIGKILL
	}
	os.Exit(m.Run())
}

// A second Open of one database fails, naming the file and the holder's
// process; once the first is closed, it opens again.
func TestSecondOpenIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "core.db")
	first, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || le.Path != path {
		t.Fatalf("second open: %v", err)
	}
	for _, want := range []string{path, "process " + strconv.Itoa(os.Getpid()), path + ".lock"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not name %q", err, want)
		}
	}
	// A shared open (tests, tools) is still possible beside the holder.
	shared, err := OpenShared(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	again.Close()
}

// Another process holding the database is named by its pid; once it is
// SIGKILLed (no chance to clean up), the database opens.
func TestKilledHolderReleasesTheLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "core.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHolder+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "open\n" {
		t.Fatalf("holder: %q", line)
	}
	_, err = Open(ctx, path)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid {
		t.Fatalf("open beside the holder (pid %d): %v", cmd.Process.Pid, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	s.Close()
}

// A folder that cannot be created or written names the problem and the
// path.
func TestFolderErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), filepath.Join(file, "data", "core.db"))
	if err == nil || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), file) {
		t.Fatalf("a file in the way: %v", err)
	}
	// Permission errors read "permission denied: PATH" (the real case runs
	// as another user in cmd/ballet's TestUnwritableDataFolder).
	err = fileError("create the lock file", "data/core.db.lock", &fs.PathError{Op: "open", Path: "data/core.db.lock", Err: syscall.EACCES})
	if err.Error() != "create the lock file: permission denied: data/core.db.lock" {
		t.Fatalf("got %q", err)
	}
}
