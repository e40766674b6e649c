package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"unicode/utf8"
)

// MaxURL bounds a hook's URL (characters).
const MaxURL = 2048

// blocked are the networks a hook may not reach unless private targets are
// allowed: besides what netip classifies (loopback, RFC 1918 and unique
// local, link-local with the metadata address 169.254.169.254,
// unspecified, multicast), these.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),         // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),     // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),      // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),     // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),       // reserved, and the broadcast address
	netip.MustParsePrefix("fd00:ec2::254/128"), // the EC2 metadata service over IPv6 (in fc00::/7 too)
	netip.MustParsePrefix("100::/64"),          // discard-only
	netip.MustParsePrefix("2001:db8::/32"),     // documentation
}

// Blocked tells whether a hook may not reach the address a: loopback,
// private (RFC 1918, unique local), link-local (the cloud metadata
// services), carrier-grade NAT, unspecified, multicast, reserved. An IPv4
// address inside IPv6 (mapped, NAT64, 6to4) is judged as the IPv4 address.
func Blocked(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = embedded(a.Unmap())
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixto4 = netip.MustParsePrefix("2002::/16")
)

// embedded returns the IPv4 address an IPv6 address carries (NAT64,
// 6to4), else a itself.
func embedded(a netip.Addr) netip.Addr {
	if !a.Is6() {
		return a
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixto4.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}
	return a
}

// ErrBlocked is a target refused as private (Blocked).
var ErrBlocked = errors.New("is a loopback, private, link-local or otherwise internal address, which webhooks may not reach " +
	"(a platform admin may allow them: [notify] allow_private_targets)")

// Control is the net.Dialer Control of deliveries: it refuses to connect
// to a Blocked address. It runs on the address about to be connected, after
// name resolution, so a name that resolved to a public address when the
// hook was created and to a private one now (DNS rebinding) is refused.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook target %q: not an address: %w", address, err)
	}
	if Blocked(ap.Addr()) {
		return fmt.Errorf("webhook target %s %w", ap.Addr(), ErrBlocked)
	}
	return nil
}

// Resolver resolves a host name (net.Resolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL is the creation-time check of a hook's URL: http or https, a
// host, no credentials, at most MaxURL characters; unless allowPrivate,
// neither a literal internal address nor a name that resolves to one (every
// address it resolves to is checked). The error reads after "url ".
func CheckURL(ctx context.Context, res Resolver, raw string, allowPrivate bool) error {
	host, err := parseURL(raw)
	if err != nil || allowPrivate {
		return err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if Blocked(a) {
			return fmt.Errorf("%s %w", a, ErrBlocked)
		}
		return nil
	}
	addrs, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("host %q does not resolve", host)
	}
	for _, a := range addrs {
		if Blocked(a) {
			return fmt.Errorf("host %q resolves to %s, which %w", host, a, ErrBlocked)
		}
	}
	return nil
}

// parseURL checks what a URL must be without resolving it and returns its
// host (without the port).
func parseURL(raw string) (string, error) {
	switch {
	case raw == "":
		return "", errors.New("is required")
	case utf8.RuneCountInString(raw) > MaxURL:
		return "", fmt.Errorf("is longer than %d characters", MaxURL)
	case strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", errors.New("must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("must be an http or https URL")
	case u.User != nil:
		return "", errors.New("must not carry credentials (user:password@)")
	case u.Opaque != "":
		return "", errors.New("must be an absolute http(s) URL")
	case u.Hostname() == "":
		return "", errors.New("must name a host")
	}
	if p := u.Port(); p != "" {
		if n, ok := port(p); !ok || n == 0 {
			return "", fmt.Errorf("port %q is not 1–65535", p)
		}
	}
	return u.Hostname(), nil
}

// port parses a decimal port.
func port(s string) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 65535 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}
