package rqlite

import (
	"context"
	"errors"
	"net"
)

// errPeerClosed fails a write on a kept-alive connection that the node has
// already closed (it crashed or restarted while the connection was idle).
// Nothing is written, so net/http retries the request on a new connection
// by itself, whose dial then fails cleanly if the node is gone. Without the
// check the request would be written into the dead connection and come
// back as EOF, indistinguishable from a node that died after reading it.
var errPeerClosed = errors.New("connection closed by the node before the request was sent")

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// checkedDial wraps dial so that every connection checks, before each
// write, whether the node has closed it.
func checkedDial(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return checkedConn{c}, nil
	}
}

type checkedConn struct{ net.Conn }

func (c checkedConn) Write(p []byte) (int, error) {
	if peerClosed(c.Conn) {
		return 0, errPeerClosed
	}
	return c.Conn.Write(p)
}
