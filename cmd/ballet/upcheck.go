package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/ballet/ballet/internal/config"
)

// upPort is a port ballet up's children will listen on, and the key that
// moves it.
type upPort struct {
	addr string // host:port as configured
	who  string // "Core", "the Knowledge service"
	key  string // where to change it
}

// upPorts lists the ports ballet up's children listen on: Core's
// [http] addr and the Knowledge service's (its own configuration). The
// runner listens on none.
func upPorts(cfg, kcfg config.Config, path, kpath string) []upPort {
	core := "[http] addr in " + orText(path, "a --config FILE")
	know := "[http] addr in " + orText(kpath, "a --knowledge-config FILE") + " (and Core's [knowledge] url with it)"
	return []upPort{
		{addr: cfg.HTTP.Addr, who: "Core", key: core},
		{addr: kcfg.HTTP.Addr, who: "the Knowledge service", key: know},
	}
}

func orText(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// checkPorts runs before ballet up starts or writes anything: two children
// on one port, a port another process holds, and a model API URL (the
// fake model's, say) that points at one of the ports are refused with the
// port and the key that moves it. models maps a variable or key to the
// model API URL it sets.
func checkPorts(ports []upPort, models map[string]string) error {
	seen := map[string]upPort{}
	for _, p := range ports {
		host, port, err := net.SplitHostPort(p.addr)
		if err != nil || port == "0" {
			continue // port 0: any free port, no clash possible
		}
		if q, ok := seen[port]; ok {
			return fmt.Errorf("%s and %s are both configured on port %s: move one (%s, or %s)", q.who, p.who, port, q.key, p.key)
		}
		seen[port] = p
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			why := "cannot be bound"
			if errors.Is(err, syscall.EADDRINUSE) {
				why = "is already in use by another process (another ballet up, a fake model, …)"
			}
			return fmt.Errorf("port %s (%s, %s) %s: %v; stop that process or move %s with %s", port, p.who, p.addr, why, err, p.who, p.key)
		}
		ln.Close()
	}
	for name, raw := range models {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			continue
		}
		if p, ok := seen[port]; ok && local(u.Hostname()) && local(hostOf(p.addr)) {
			return fmt.Errorf("%s (%s) points at port %s, which %s will listen on: run the model on another port, or move %s with %s",
				name, raw, port, p.who, p.who, p.key)
		}
	}
	return nil
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// local tells whether a host is this machine's loopback or every interface.
func local(host string) bool {
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}
