//go:build unix

package rqlite

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/ballet/ballet/internal/testkit/hang"
)

// pending reports how many bytes wait to be read on c (at most one is
// looked at), without consuming them.
func pending(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var buf [1]byte
	if err := rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPeerClosed checks the socket look-up behind checkedConn: a write on
// a connection the node has closed is refused with nothing written, and
// data waiting to be read is not taken for a close.
func TestPeerClosed(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dial := checkedDial((&net.Dialer{}).DialContext)
	c, err := dial(t.Context(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("write on a live connection: %v", err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(srv, buf); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	raw := c.(checkedConn).Conn
	hang.WaitFor(t, "the byte arrived", func() bool { return pending(t, raw) == 1 })
	if peerClosed(raw) {
		t.Fatal("pending data taken for a close")
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	hang.WaitFor(t, "the close seen", func() bool { return peerClosed(raw) })
	if n, err := c.Write([]byte("request")); n != 0 || !errors.Is(err, errPeerClosed) {
		t.Fatalf("write on a closed connection: %d %v", n, err)
	}
}
