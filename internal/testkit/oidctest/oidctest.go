// Package oidctest is a minimal but real OpenID Connect issuer for tests:
// an HTTP server on 127.0.0.1 that serves discovery
// (/.well-known/openid-configuration) and its signing keys (JWKS), and
// mints RS256-signed ID tokens for any subject, with options for the ways a
// token can be wrong (expired, another audience, another issuer, a bad
// signature, a tampered payload). It also runs the authorization code flow
// with PKCE (S256) for a registered client (Client): its authorization
// endpoint approves at once, as the subject set by SignInAs, and its token
// endpoint checks the code (once), the redirect URI, the client and the
// verifier before it hands out the ID token (with the nonce asked for). The key is generated per Issuer. The
// issuer can be stopped and started again on the same address, to test an
// identity provider that is down.
package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultAudience is the audience (client id) of the tokens an Issuer
// mints unless told otherwise.
const DefaultAudience = "ballet-test"

// Issuer is a running (or stopped) OIDC issuer.
type Issuer struct {
	// URL is the issuer identifier and base URL (http://127.0.0.1:port).
	URL string
	// Audience is the default aud of minted tokens.
	Audience string

	key   *rsa.PrivateKey
	kid   string
	addr  string
	hits  atomic.Int64
	mu    sync.Mutex
	srv   *http.Server
	ln    net.Listener
	tb    testing.TB
	token int

	// The code flow (under mu).
	clientID, clientSecret string
	signIn                 string   // the subject the authorization endpoint approves
	signInOpts             []Option // changes to the ID tokens it leads to
	codes                  map[string]grant
	clientAuth             []string // how each exchange authenticated its client: basic or post
}

// grant is an authorization code's request, until it is exchanged.
type grant struct {
	clientID, redirectURI, nonce, challenge, subject string
	opts                                             []Option
}

// New starts an issuer; it stops when the test ends.
func New(tb testing.TB) *Issuer {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatalf("oidctest: generate key: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oidctest: listen: %v", err)
	}
	i := &Issuer{Audience: DefaultAudience, key: key, kid: fmt.Sprintf("test-%d", time.Now().UnixNano()), addr: ln.Addr().String(), tb: tb}
	i.URL = "http://" + i.addr
	i.serve(ln)
	tb.Cleanup(i.Stop)
	return i
}

func (i *Issuer) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.discovery)
	mux.HandleFunc("GET /jwks", i.jwks)
	mux.HandleFunc("GET /authorize", i.authorize)
	mux.HandleFunc("POST /token", i.exchange)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	i.mu.Lock()
	i.srv, i.ln = srv, ln
	i.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Stop takes the issuer down: connections to its address are refused.
func (i *Issuer) Stop() {
	i.mu.Lock()
	srv := i.srv
	i.srv = nil
	i.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Start brings a stopped issuer up again on the same address, with the
// same key.
func (i *Issuer) Start() {
	i.tb.Helper()
	i.mu.Lock()
	running := i.srv != nil
	i.mu.Unlock()
	if running {
		return
	}
	var ln net.Listener
	var err error
	for range 100 { // the port was ours a moment ago; it may take a moment to free
		if ln, err = net.Listen("tcp", i.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		i.tb.Fatalf("oidctest: listen again on %s: %v", i.addr, err)
	}
	i.serve(ln)
}

// Requests returns how many requests the issuer has served (discovery and
// keys), to check when a relying party contacts it.
func (i *Issuer) Requests() int64 { return i.hits.Load() }

func (i *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	i.hits.Add(1)
	writeJSON(w, map[string]any{
		"issuer":                                i.URL,
		"authorization_endpoint":                i.URL + "/authorize",
		"token_endpoint":                        i.URL + "/token",
		"jwks_uri":                              i.URL + "/jwks",
		"response_types_supported":              []string{"code", "id_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
}

func (i *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	i.hits.Add(1)
	pub := i.key.PublicKey
	writeJSON(w, map[string]any{"keys": []any{map[string]any{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": i.kid,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// mint is a token being built.
type mint struct {
	claims map[string]any
	key    *rsa.PrivateKey
	tamper bool
}

// Option changes a minted token.
type Option func(*mint)

// Expired makes a token that expired an hour ago.
func Expired() Option {
	return func(m *mint) {
		now := time.Now()
		m.claims["iat"] = now.Add(-2 * time.Hour).Unix()
		m.claims["exp"] = now.Add(-time.Hour).Unix()
	}
}

// ExpiresIn sets the token's lifetime from now.
func ExpiresIn(d time.Duration) Option {
	return func(m *mint) { m.claims["exp"] = time.Now().Add(d).Unix() }
}

// Audience sets aud.
func Audience(aud string) Option { return func(m *mint) { m.claims["aud"] = aud } }

// IssuedBy sets iss (a wrong issuer, for instance).
func IssuedBy(iss string) Option { return func(m *mint) { m.claims["iss"] = iss } }

// BadSignature signs the token with a key the issuer does not publish
// (under the published key id).
func BadSignature() Option {
	return func(m *mint) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		m.key = k
	}
}

// Tampered changes the payload after signing (the subject gains a suffix),
// as an attacker editing a token would.
func Tampered() Option { return func(m *mint) { m.tamper = true } }

// Claim sets any claim.
func Claim(name string, value any) Option { return func(m *mint) { m.claims[name] = value } }

// Token mints a signed ID token for subject: iss, aud, sub, iat, exp (one
// hour) and a unique jti, changed by opts.
func (i *Issuer) Token(tb testing.TB, subject string, opts ...Option) string {
	tb.Helper()
	i.mu.Lock()
	i.token++
	n := i.token
	i.mu.Unlock()
	now := time.Now()
	m := &mint{key: i.key, claims: map[string]any{
		"iss": i.URL, "aud": i.Audience, "sub": subject,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprintf("t%d", n),
	}}
	for _, o := range opts {
		o(m)
	}
	header, err := json.Marshal(map[string]any{"alg": "RS256", "typ": "JWT", "kid": i.kid})
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(m.claims)
	if err != nil {
		tb.Fatal(err)
	}
	signed := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, m.key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	if m.tamper {
		m.claims["sub"] = fmt.Sprint(m.claims["sub"]) + "-tampered"
		payload, _ = json.Marshal(m.claims)
		signed = b64(header) + "." + b64(payload)
	}
	return signed + "." + b64(sig)
}

// Claims decodes a token's payload without verifying it (for assertions).
func Claims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("oidctest: not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("oidctest: payload: %w", err)
	}
	var c map[string]any
	return c, json.Unmarshal(b, &c)
}

// Client registers the one client of the code flow (secret "": a public
// client, PKCE alone).
func (i *Issuer) Client(id, secret string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.clientID, i.clientSecret = id, secret
}

// SignInAs makes the authorization endpoint approve every request at once
// as subject; opts change the ID tokens of those sign-ins (Claim("nonce",
// …) for a wrong nonce, Audience(…), Expired(), …).
func (i *Issuer) SignInAs(subject string, opts ...Option) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.signIn, i.signInOpts = subject, opts
}

// ClientAuth lists how each code exchange so far authenticated its
// client: "basic" (client_secret_basic, the Authorization header) or
// "post" (the id, and any secret, in the form).
func (i *Issuer) ClientAuth() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]string(nil), i.clientAuth...)
}

// oauthError answers an OAuth error (RFC 6749 5.2).
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// authorize approves an authorization request as the SignInAs subject and
// sends the browser back with a code and the state.
func (i *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	i.hits.Add(1)
	q := r.URL.Query()
	i.mu.Lock()
	defer i.mu.Unlock()
	switch {
	case i.clientID == "" || q.Get("client_id") != i.clientID:
		oauthError(w, http.StatusBadRequest, "unauthorized_client", "unknown client_id "+q.Get("client_id"))
		return
	case q.Get("response_type") != "code":
		oauthError(w, http.StatusBadRequest, "unsupported_response_type", "response_type must be code")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "PKCE with S256 is required")
		return
	case !strings.Contains(" "+q.Get("scope")+" ", " openid "):
		oauthError(w, http.StatusBadRequest, "invalid_scope", "scope must include openid")
		return
	case q.Get("redirect_uri") == "" || i.signIn == "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "no redirect_uri, or nobody to sign in (SignInAs)")
		return
	}
	code := b64(randomBytes(24))
	if i.codes == nil {
		i.codes = map[string]grant{}
	}
	i.codes[code] = grant{clientID: i.clientID, redirectURI: q.Get("redirect_uri"), nonce: q.Get("nonce"),
		challenge: q.Get("code_challenge"), subject: i.signIn, opts: i.signInOpts}
	u, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad redirect_uri")
		return
	}
	back := u.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	u.RawQuery = back.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// exchange is the token endpoint: a code once, for its client, redirect
// URI and PKCE verifier.
func (i *Issuer) exchange(w http.ResponseWriter, r *http.Request) {
	i.hits.Add(1)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	} else {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	}
	i.mu.Lock()
	how := "post"
	if basic {
		how = "basic"
	}
	i.clientAuth = append(i.clientAuth, how)
	g, ok := i.codes[r.PostForm.Get("code")]
	delete(i.codes, r.PostForm.Get("code")) // once
	wantID, wantSecret := i.clientID, i.clientSecret
	i.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case id != wantID || secret != wantSecret:
		oauthError(w, http.StatusUnauthorized, "invalid_client", "wrong client credentials")
	case r.PostForm.Get("grant_type") != "authorization_code" || !ok:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
	case g.clientID != id || g.redirectURI != r.PostForm.Get("redirect_uri"):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code was issued to another client or redirect_uri")
	case b64(sum[:]) != g.challenge:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code_verifier does not match the code_challenge")
	default:
		opts := append([]Option{Audience(g.clientID), Claim("nonce", g.nonce), Claim("email", g.subject+"@example.com")}, g.opts...)
		writeJSON(w, map[string]any{"access_token": b64(randomBytes(24)), "token_type": "Bearer", "expires_in": 3600,
			"id_token": i.Token(i.tb, g.subject, opts...)})
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}
