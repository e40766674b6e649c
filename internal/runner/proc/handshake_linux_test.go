package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestHandshakeRunsTheCommandAfterGo: a wrapper's handshake script says
// it is armed, gets the go of Start, and runs the session's command in its
// place, without the handshake's files.
func TestHandshakeRunsTheCommandAfterGo(t *testing.T) {
	t.Parallel()
	lines := make(chan string, 4)
	s, err := Start(context.Background(), Spec{ID: "handshake-go", Path: "/bin/sh",
		Args: []string{"-c", HandshakeScript, "ballet-session", "/bin/sh", "-c",
			`[ -e /proc/self/fd/3 ] || [ -e /proc/self/fd/4 ] && echo "files left: $(ls /proc/self/fd)" || echo clean; echo "$0 $1" `, "first", "second"},
		Handshake: true, OnLine: func(b []byte, _ bool) { lines <- string(b) }})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if r := s.Wait(); r.Reason != Exited || r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	close(lines)
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	if len(got) != 2 || got[0] != "clean" || got[1] != "first second" {
		t.Errorf("the command printed %q, want clean and its arguments", got)
	}
}

// TestHandshakeWithoutGoRunsNothing: a runner that goes away before its go
// (its end of the pipe closes) leaves a script that exits HandshakeGone
// without running the session's command.
func TestHandshakeWithoutGoRunsNothing(t *testing.T) {
	t.Parallel()
	ran := filepath.Join(t.TempDir(), "ran")
	hs, err := newHandshake()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", HandshakeScript, "ballet-session", "/usr/bin/touch", ran)
	cmd.ExtraFiles = []*os.File{hs.goR, hs.armedW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hs.started()
	var b [1]byte
	_ = hs.armedR.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := hs.armedR.Read(b[:]); n != 1 {
		t.Fatalf("the script never said it is armed: %v", err)
	}
	hs.close() // the runner is gone: no go
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != HandshakeGone {
		t.Errorf("the script ended %v, want exit status %d", err, HandshakeGone)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the session's command ran without a go (%v)", err)
	}
}

// TestHandshakeOfAWrapperThatDiesFirst: a wrapper that ends before its
// script ran (bwrap refusing its options) ends Start's wait at once; the
// session ends as the wrapper did.
func TestHandshakeOfAWrapperThatDiesFirst(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s, err := Start(context.Background(), Spec{ID: "handshake-dies", Path: "/bin/sh", Args: []string{"-c", "echo cannot >&2; exit 1"}, Handshake: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > handshakeWait/2 {
		t.Errorf("Start waited %s for a wrapper that was gone", d)
	}
	<-s.Done()
	if r := s.Wait(); r.ExitCode != 1 || r.Stderr != "cannot\n" {
		t.Errorf("%+v", r)
	}
	if err := StartHandshaken(&exec.Cmd{Path: "/bin/true", ExtraFiles: []*os.File{os.Stdin}}); err == nil {
		t.Error("StartHandshaken took a command with extra files of its own")
	}
}
