//go:build !unix

package rqlite

import "net"

// peerClosed cannot look at the socket on this platform.
func peerClosed(net.Conn) bool { return false }
