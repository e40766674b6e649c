package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/webhook"
)

func TestBlockedAddresses(t *testing.T) {
	for _, c := range []struct {
		addr    string
		blocked bool
	}{
		{"127.0.0.1", true}, {"127.9.9.9", true}, {"::1", true},
		{"10.1.2.3", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"192.168.1.1", true},
		{"fc00::1", true}, {"fd12:3456::1", true}, {"fd00:ec2::254", true},
		{"169.254.169.254", true}, {"169.254.1.1", true}, {"fe80::1", true},
		{"100.64.0.1", true}, {"100.127.255.254", true},
		{"0.0.0.0", true}, {"::", true}, {"0.1.2.3", true},
		{"224.0.0.1", true}, {"239.1.1.1", true}, {"ff02::1", true}, {"255.255.255.255", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"64:ff9b::a9fe:a9fe", true}, {"2002:c0a8:0101::1", true},
		{"198.18.0.1", true}, {"192.0.0.8", true},
		// Public addresses.
		{"93.184.216.34", false}, {"8.8.8.8", false}, {"172.32.0.1", false}, {"100.128.0.1", false}, {"11.0.0.1", false},
		{"2606:4700::1111", false}, {"::ffff:8.8.8.8", false}, {"64:ff9b::808:808", false},
	} {
		if got := webhook.Blocked(netip.MustParseAddr(c.addr)); got != c.blocked {
			t.Errorf("Blocked(%s) = %v, want %v", c.addr, got, c.blocked)
		}
	}
	if !webhook.Blocked(netip.Addr{}) {
		t.Error("the zero address is not blocked")
	}
}

// resolver answers every name with its addresses (a name not listed does
// not resolve).
type resolver map[string][]string

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range r[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if len(out) == 0 {
		return nil, errors.New("no such host")
	}
	return out, nil
}

var names = resolver{
	"hooks.example.com": {"93.184.216.34"},
	"localhost":         {"127.0.0.1", "::1"},
	"mixed.example.com": {"93.184.216.34", "10.0.0.7"},
	"meta.example.com":  {"169.254.169.254"},
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url, err string
	}{
		{"https://hooks.example.com/ballet", ""},
		{"http://hooks.example.com:8080/x?y=1", ""},
		{"https://93.184.216.34/x", ""},
		{"http://127.0.0.1:8080/x", "internal address"},
		{"http://[::1]/x", "internal address"},
		{"http://10.0.0.1/x", "internal address"},
		{"http://169.254.169.254/latest/meta-data/", "internal address"},
		{"http://[fd00:ec2::254]/", "internal address"},
		{"http://100.64.1.1/", "internal address"},
		{"http://0.0.0.0/", "internal address"},
		{"http://localhost:9/x", `resolves to 127.0.0.1`},
		{"http://mixed.example.com/", `resolves to 10.0.0.7`},
		{"http://meta.example.com/", `resolves to 169.254.169.254`},
		{"http://nowhere.invalid/", "does not resolve"},
		{"ftp://hooks.example.com/", "http or https"},
		{"hooks.example.com/x", "http or https"},
		{"https://user:pw@hooks.example.com/", "credentials"},
		{"https://token@hooks.example.com/", "credentials"},
		{"https:///x", "must name a host"},
		{"https://hooks.example.com:0/", "port"},
		{"https://hooks.example.com:99999/", "port"},
		{"https://hooks.example.com/a b", "spaces"},
		{"", "required"},
		{"https://hooks.example.com/" + strings.Repeat("a", webhook.MaxURL), "longer than"},
	} {
		err := webhook.CheckURL(ctx, names, c.url, false)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("CheckURL(%q): %v, want ok", c.url, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("CheckURL(%q): %v, want ~%q", c.url, err, c.err)
		}
	}
	// Allowed private targets: a loopback receiver passes; the rest of the
	// rules still hold.
	if err := webhook.CheckURL(ctx, names, "http://127.0.0.1:8080/x", true); err != nil {
		t.Errorf("with private targets allowed: %v", err)
	}
	if err := webhook.CheckURL(ctx, names, "http://u:p@127.0.0.1/", true); err == nil {
		t.Error("credentials passed with private targets allowed")
	}
}

// FuzzCheckURL: whatever the text, CheckURL never panics, and what it
// accepts is an http(s) URL with a host, no credentials, whose literal
// address or resolved addresses are public.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/x", "http://127.0.0.1/", "http://[::ffff:127.0.0.1]/", "http://0x7f.1/",
		"http://2130706433/", "http://[fd00:ec2::254]/", "https://user@hooks.example.com", "http://localhost./", "HTTP://HOOKS.EXAMPLE.COM/",
		"http://hooks.example.com:80@10.0.0.1/", "http://10.0.0.1#@hooks.example.com/", "http://[::1%25eth0]/", "//hooks.example.com/"} {
		f.Add(s)
	}
	public := resolver{"hooks.example.com": {"93.184.216.34"}, "localhost": {"127.0.0.1"}, "localhost.": {"127.0.0.1"}}
	f.Fuzz(func(t *testing.T, raw string) {
		err := webhook.CheckURL(context.Background(), public, raw, false)
		if err != nil {
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			t.Fatalf("accepted %q, which does not parse: %v", raw, perr)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Hostname() == "" {
			t.Fatalf("accepted %q: scheme %q, user %v, host %q", raw, u.Scheme, u.User, u.Hostname())
		}
		a, aerr := netip.ParseAddr(u.Hostname())
		if aerr == nil && webhook.Blocked(a) {
			t.Fatalf("accepted %q, whose address %s is internal", raw, a)
		}
		if aerr != nil && u.Hostname() != "hooks.example.com" {
			t.Fatalf("accepted %q, whose host %q does not resolve", raw, u.Hostname())
		}
	})
}

// The dialer's guard runs on the resolved address: a name that resolves
// to a loopback address (a DNS rebinding after the hook was created) is
// refused at connect time, and the receiver hears nothing; the same client
// with private targets allowed reaches it (the guard, not the setup,
// refuses).
func TestTheDialerRefusesANameReboundToAnInternalAddress(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rebound := resolver{"rebound.example.com": {"127.0.0.1"}}
	target := "http://rebound.example.com:" + u.Port() + "/hook"

	_, err := webhook.NewClient(false, rebound, 5*time.Second).Post(target, "application/json", strings.NewReader("{}"))
	if err == nil || !errors.Is(err, webhook.ErrBlocked) {
		t.Fatalf("posting to a name rebound to 127.0.0.1: %v, want the guard's refusal", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the receiver was reached %d times", hits.Load())
	}
	resp, err := webhook.NewClient(true, rebound, 5*time.Second).Post(target, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("with private targets allowed: %v", err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("with private targets allowed the receiver was reached %d times, want 1", hits.Load())
	}
	// A literal address is dialled through the guard too.
	if _, err := webhook.NewClient(false, net0{}, 5*time.Second).Post(srv.URL, "application/json", strings.NewReader("{}")); !errors.Is(err, webhook.ErrBlocked) {
		t.Fatalf("posting to %s: %v, want the guard's refusal", srv.URL, err)
	}
}

// net0 resolves as the system does for literal addresses.
type net0 struct{}

func (net0) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, err := netip.ParseAddr(host)
	return []netip.Addr{a}, err
}

// No redirect is followed: the 3xx answer is the client's, and the
// redirect's target hears nothing.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	resp, err := webhook.NewClient(true, nil, 5*time.Second).Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || elsewhere.Load() != 0 {
		t.Fatalf("answer %d, redirect target reached %d times; want 307 and none", resp.StatusCode, elsewhere.Load())
	}
}
