package server

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a connection is refused (label of ballet_http_connections_refused_total).
const (
	RefusedTotal   = "total"    // the server holds max_conns connections
	RefusedPerAddr = "per_addr" // the remote address holds max_conns_per_ip
)

// ConnMetrics counts the connections a ConnLimiter admits and refuses.
type ConnMetrics struct {
	open    prometheus.Gauge
	refused *prometheus.CounterVec
}

// NewConnMetrics registers the connection metrics on reg.
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
func NewConnMetrics(reg prometheus.Registerer) *ConnMetrics {
	m := &ConnMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ballet_http_connections",
			Help: "Open HTTP connections (WebSockets included).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ballet_http_connections_refused_total",
			Help: "Connections refused at once because of http.max_conns (total) or http.max_conns_per_ip (per_addr).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.open, m.refused)
	return m
}

// refuseAnswer is what a refused connection reads before it is closed.
const refuseAnswer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\n" +
	"Content-Length: %d\r\n\r\n%s"

// LimitConns returns l admitting at most total connections at once and at
// most perAddr from one remote IP address (0: no per-address cap). Unlike a
// listener that stops accepting at its cap (whose excess connections wait
// in the kernel's queue for as long as the holders stay), it accepts every
// connection and answers an excess one with a 503 at once, then closes it.
// A connection counts until it is closed, hijacked ones (WebSockets)
// included. m may be nil.
func LimitConns(l net.Listener, total, perAddr int, m *ConnMetrics) net.Listener {
	return &connLimiter{Listener: l, total: total, perAddr: perAddr, m: m, byAddr: map[string]int{}}
}

type connLimiter struct {
	net.Listener
	total, perAddr int
	m              *ConnMetrics

	mu     sync.Mutex
	open   int
	byAddr map[string]int
}

// Accept returns the next admitted connection; refused ones never reach
// the caller.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteIP(c)
		if reason := l.admit(addr); reason != "" {
			if l.m != nil {
				l.m.refused.WithLabelValues(reason).Inc()
			}
			go refuse(c, reason)
			continue
		}
		if l.m != nil {
			l.m.open.Inc()
		}
		return &limitedConn{Conn: c, l: l, addr: addr}, nil
	}
}

// admit counts a new connection from addr, or returns why it may not open.
func (l *connLimiter) admit(addr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open >= l.total:
		return RefusedTotal
	case l.perAddr > 0 && l.byAddr[addr] >= l.perAddr:
		return RefusedPerAddr
	}
	l.open++
	l.byAddr[addr]++
	return ""
}

func (l *connLimiter) release(addr string) {
	l.mu.Lock()
	l.open--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
	l.mu.Unlock()
	if l.m != nil {
		l.m.open.Dec()
	}
}

// refuse answers 503 and closes c. It half-closes first and drains what
// the client sent for a moment, so that the client reads the answer
// instead of a reset.
func refuse(c net.Conn, reason string) {
	defer c.Close()
	msg := `{"error":{"code":"unavailable","message":"too many connections to this server; retry later"}}`
	if reason == RefusedPerAddr {
		msg = `{"error":{"code":"unavailable","message":"too many connections from your address; close some and retry"}}`
	}
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(c, refuseAnswer, len(msg), msg); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// remoteIP is the connection's remote IP address (its whole address when
// it has no IP).
func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		return host
	}
	return c.RemoteAddr().String()
}

// limitedConn gives its slot back when it is closed (once).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	addr string
	once sync.Once
}

// CloseWrite half-closes like the TCP connection beneath, which the HTTP
// server uses to end a connection gracefully.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
