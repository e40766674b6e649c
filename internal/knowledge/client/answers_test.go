package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/knowledge/client"
)

// TestClientReadsWhatAProxyOrAnOldServiceAnswers: an answer without the
// service's error shape (a proxy's HTML page) is unavailable with the
// status's own text; a search answering no results list gives an empty
// list, never nil (it is written as [] to the agent). The client asks
// for JSON.
func TestClientReadsWhatAProxyOrAnOldServiceAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/json" {
			http.Error(w, "ask for JSON", http.StatusNotAcceptable) // as a proxy that serves HTML by default might
			return
		}
		if strings.HasSuffix(r.URL.Path, "/search") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"results": null}`))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>upstream down</html>"))
	}))
	defer srv.Close()
	c, err := client.New(client.Options{URL: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Entry(ctx, "acme", "", "x", 0); !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Errorf("a proxy's 502 page: %v, want unavailable saying 502 Bad Gateway", err)
	}
	rs, err := c.Search(ctx, "acme", client.Query{Text: "x"})
	if err != nil || rs == nil || len(rs) != 0 {
		t.Errorf("a search answering null: %#v, %v; want an empty list", rs, err)
	}
}

// TestClientTakesAnHTTPOrHTTPSURLWithAHost: the service's address is an
// http or https URL naming a host; anything else is refused when the
// client is made.
func TestClientTakesAnHTTPOrHTTPSURLWithAHost(t *testing.T) {
	for _, u := range []string{"http://knowledge.example:8090", "https://knowledge.example"} {
		if _, err := client.New(client.Options{URL: u, Token: token}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"ftp://knowledge.example", "https://", "http://", "knowledge.example", "unix:///run/k.sock"} {
		if _, err := client.New(client.Options{URL: u, Token: token}); err == nil {
			t.Errorf("%s: accepted", u)
		}
	}
}
