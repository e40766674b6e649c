// Package client is the Go client Core uses to call the Knowledge service
// (search, read an entry) with the service credential, scoped to an
// organization by the slug in the path. Errors say what failed: a missing
// entry is apperr NotFound, a request the service refuses as invalid (or a
// space or entry slug that is not one, refused before any request) is
// apperr Invalid, and everything else (the service down, slow, answering
// 5xx, or refusing the credential) wraps ErrUnavailable.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/outbound"
)

// DefaultSpace is the space every organization has.
const DefaultSpace = "default"

// DefaultTimeout bounds one call when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// maxAnswer bounds an answer's body: an entry's body and a page of search
// results fit well within it.
const maxAnswer = 8 << 20

// ErrUnavailable marks a call that failed for a reason of the service's or
// the network's: try again later.
var ErrUnavailable = errors.New("the Knowledge service is unavailable")

// ErrNotConfigured is the ErrUnavailable of a Core without a service
// credential ([knowledge] service_token).
var ErrNotConfigured = fmt.Errorf("%w: no service credential is configured ([knowledge] service_token or BALLET_KNOWLEDGE_TOKEN)", ErrUnavailable)

// Entry is an entry as the service answers it. It repeats the JSON fields
// of the service's knowledge.Entry on purpose: Core's client reads the
// service's API, never its domain (the lint keeps Core and the Knowledge
// service apart).
type Entry struct {
	Space     string    `json:"space"`
	Slug      string    `json:"slug"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	Tags      []string  `json:"tags"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by"`
	Deleted   bool      `json:"deleted"`
}

// Result is one search hit: Snippet is HTML-escaped text with <mark>…</mark>
// around the hits. Like Entry, it is the service's answer (knowledge.Hit)
// read from the API, written apart on purpose: Core imports no Knowledge
// internals.
type Result struct {
	Space   string   `json:"space"`
	Slug    string   `json:"slug"`
	Title   string   `json:"title"`
	Version int64    `json:"version"`
	Tags    []string `json:"tags"`
	Snippet string   `json:"snippet"`
	Rank    float64  `json:"rank"`
}

// Query is a search: the words, and optionally a space and tags.
type Query struct {
	Text  string
	Space string
	Tags  []string
}

// Options configure a Client.
type Options struct {
	URL   string // the service's URL ([knowledge] url)
	Token string // the service credential ("": every call fails with ErrNotConfigured)
	// Timeout bounds each call (DefaultTimeout when 0).
	Timeout time.Duration
	// HTTP is the client calls go through (a fresh one when nil).
	HTTP *http.Client
}

// Client calls the Knowledge service.
type Client struct {
	base    string
	token   string
	timeout time.Duration
	http    *http.Client
}

// New returns a client of the service at o.URL.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("knowledge client: %q is not an http(s) URL", o.URL)
	}
	// The client holds the service credential: it never follows a
	// redirect (a 3xx is an error).
	c := &Client{base: strings.TrimRight(o.URL, "/"), token: o.Token, timeout: o.Timeout, http: outbound.Guard(o.HTTP)}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c, nil
}

// Search searches the organization's current entries.
func (c *Client) Search(ctx context.Context, org string, q Query) ([]Result, error) {
	v := url.Values{"q": {q.Text}}
	if q.Space != "" {
		v.Set("space", q.Space)
	}
	for _, t := range q.Tags {
		v.Add("tag", t)
	}
	var out struct {
		Results []Result `json:"results"`
	}
	if q.Space != "" {
		var v apperr.Validator
		knowledge.CheckSpaceSlug(&v, "space", q.Space)
		if err := v.Err(); err != nil {
			return nil, fmt.Errorf("search the knowledge of %s for %q: %w", org, q.Text, err)
		}
	}
	if err := c.get(ctx, "/api/v1/knowledge/orgs/"+url.PathEscape(org)+"/search?"+v.Encode(), &out); err != nil {
		return nil, fmt.Errorf("search the knowledge of %s for %q: %w", org, q.Text, err)
	}
	if out.Results == nil {
		out.Results = []Result{}
	}
	return out.Results, nil
}

// Entry reads an entry of the organization's space (DefaultSpace when
// ""): its current version, or version when it is above 0.
func (c *Client) Entry(ctx context.Context, org, space, slug string, version int64) (Entry, error) {
	if space == "" {
		space = DefaultSpace
	}
	// A slug such as ".." would make the path another resource's (the
	// space's own): names are checked before any request.
	var v apperr.Validator
	knowledge.CheckSpaceSlug(&v, "space", space)
	knowledge.CheckSlug(&v, "slug", slug)
	if err := v.Err(); err != nil {
		return Entry{}, fmt.Errorf("read the knowledge entry %q of space %q: %w", slug, space, err)
	}
	path := "/api/v1/knowledge/orgs/" + url.PathEscape(org) + "/spaces/" + url.PathEscape(space) + "/entries/" + url.PathEscape(slug)
	if version > 0 {
		path += "?version=" + strconv.FormatInt(version, 10)
	}
	var e Entry
	if err := c.get(ctx, path, &e); err != nil {
		return Entry{}, fmt.Errorf("read the knowledge entry %s/%s of %s: %w", space, slug, org, err)
	}
	return e, nil
}

// get calls GET path and decodes the answer into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	if c.token == "" {
		return ErrNotConfigured
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// The error names the URL, never the credential (a header).
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: read the answer: %v", ErrUnavailable, err)
	case len(body) > maxAnswer:
		return fmt.Errorf("%w: the answer exceeds %d bytes", ErrUnavailable, maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%w: the answer is not the expected JSON: %v", ErrUnavailable, err)
	}
	return nil
}

// statusError is the error of an answer other than 200, with the service's
// message (its one error shape) when it sent one.
func statusError(status int, body []byte) error {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		msg = e.Error.Message
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	switch status {
	case http.StatusNotFound:
		return apperr.New(apperr.NotFound, "%s", msg)
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return apperr.New(apperr.Invalid, "%s", msg)
	}
	return fmt.Errorf("%w: %d %s", ErrUnavailable, status, msg)
}
