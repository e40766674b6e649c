//go:build unix

package rqlite

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the peer of c has closed the connection (a
// FIN or RST is waiting to be read), without consuming anything. It uses
// Control, not Read, because net/http's read loop holds the read lock
// while it waits for a response.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	_ = rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0 // EOF; n > 0 is data waiting, not a close
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			closed = true // ECONNRESET and the like
		}
	})
	return closed
}
