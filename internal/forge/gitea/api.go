package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
)

// target is a repository resolved for one call.
type target struct {
	base, owner, name string // API base without /api/v1
	token             string
	full              string // owner/name, for errors
}

// Target parses a repository's location: the API base (without /api/v1),
// owner and name. Exported for the lead's wiring and tests.
func Target(repo forge.Repo) (base, owner, name string, err error) {
	if err := forge.CheckLocation(forge.KindGitea, repo.URL); err != nil {
		return "", "", "", fmt.Errorf("gitea: repository.url: %w", err)
	}
	u, _ := url.Parse(repo.URL)
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", "", "", fmt.Errorf("gitea: repository.url %q must be http(s)://host[/path]/owner/repo", repo.URL)
	}
	owner, name = parts[len(parts)-2], strings.TrimSuffix(parts[len(parts)-1], ".git")
	if name == "" {
		return "", "", "", fmt.Errorf("gitea: repository.url %q names no repository", repo.URL)
	}
	prefix := strings.Join(parts[:len(parts)-2], "/")
	base = u.Scheme + "://" + u.Host
	if prefix != "" {
		base += "/" + prefix
	}
	if repo.APIURL != "" {
		a, err := url.Parse(repo.APIURL)
		if err != nil || (a.Scheme != "http" && a.Scheme != "https") || a.Host == "" || a.User != nil || a.RawQuery != "" || a.Fragment != "" {
			return "", "", "", fmt.Errorf("gitea: repository.api_url %q must be an http(s) URL without credentials, such as https://host/api/v1", repo.APIURL)
		}
		p := strings.TrimSuffix(a.Path, "/")
		if !strings.HasSuffix(p, "/api/v1") {
			return "", "", "", fmt.Errorf("gitea: repository.api_url %q must end with /api/v1", repo.APIURL)
		}
		base = a.Scheme + "://" + a.Host + strings.TrimSuffix(p, "/api/v1")
	}
	return base, owner, name, nil
}

func (f *Forge) target(repo forge.Repo) (target, error) {
	base, owner, name, err := Target(repo)
	if err != nil {
		return target{}, err
	}
	t := target{base: base, owner: owner, name: name, full: owner + "/" + name}
	if repo.CredentialsRef != "" {
		_, tok, err := forge.ResolveCredentials(repo.Organization, repo.CredentialsRef, f.secrets)
		if err != nil {
			return target{}, fmt.Errorf("gitea: %s: %w", t.full, err)
		}
		t.token = tok
	}
	return t, nil
}

// client is an SDK client for one call: the SDK keeps the context per
// client.
func (f *Forge) client(ctx context.Context, t target) *sdk.Client {
	opts := []sdk.ClientOption{sdk.SetHTTPClient(f.hc), sdk.SetContext(ctx), sdk.SetGiteaVersion(""), sdk.SetUserAgent("ballet")}
	if t.token != "" {
		opts = append(opts, sdk.SetToken(t.token))
	}
	c, _ := sdk.NewClient(t.base, opts...) // with SetGiteaVersion("") it asks nothing and cannot fail
	return c
}

// needToken refuses a write without credentials.
func needToken(t target, call string) error {
	if t.token == "" {
		return fmt.Errorf("gitea: %s in %s: the repository has no credentials_ref: Ballet needs a token with write access to the repository", call, t.full)
	}
	return nil
}

// callError wraps the outcome of one API call: nil on success, a
// *forge.RateLimitedError for a rate limit, else an error naming the call
// and the repository.
func (f *Forge) callError(t target, call string, resp *sdk.Response, err error) error {
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
		if rl := forge.RateLimit(status, resp.Header, f.clock.Now()); rl != nil {
			return fmt.Errorf("gitea: %s in %s: %w", call, t.full, rl)
		}
	}
	if err == nil && (status == 0 || status/100 == 2) {
		return nil
	}
	if err == nil {
		err = errors.New(http.StatusText(status))
	}
	if status != 0 {
		return &apiError{call: call, repo: t.full, status: status, err: redact(err, t.token)}
	}
	return fmt.Errorf("gitea: %s in %s: %w", call, t.full, redact(err, t.token))
}

// redact keeps the token out of an error whatever a server or proxy echoed.
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return redacted{msg: strings.ReplaceAll(err.Error(), token, "xxxxx"), err: err}
}

// redacted is an error whose message has the token removed; errors.Is and
// errors.As still see the original.
type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

// apiError is an answer of Gitea other than 2xx.
type apiError struct {
	call, repo string
	status     int
	err        error
}

func (e *apiError) Error() string {
	return fmt.Sprintf("gitea: %s in %s: HTTP %d: %s", e.call, e.repo, e.status, oneLine(e.err.Error()))
}

func (e *apiError) Unwrap() error { return e.err }

// statusOf is the HTTP status of an apiError, else 0.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// branchHead returns the head commit of branch, "" when it does not exist.
func (f *Forge) branchHead(ctx context.Context, t target, branch string) (string, error) {
	b, resp, err := f.client(ctx, t).GetRepoBranch(t.owner, t.name, branch)
	if err = f.callError(t, "read branch "+branch, resp, err); err != nil {
		if statusOf(err) == http.StatusNotFound {
			return "", nil
		}
		return "", err
	}
	if b == nil || b.Commit == nil || b.Commit.ID == "" {
		return "", fmt.Errorf("gitea: read branch %s in %s: no head commit in the answer", branch, t.full)
	}
	return b.Commit.ID, nil
}

func (f *Forge) pull(ctx context.Context, t target, n int) (*sdk.PullRequest, error) {
	p, resp, err := f.client(ctx, t).GetPullRequest(t.owner, t.name, int64(n))
	if err = f.callError(t, fmt.Sprintf("read pull request #%d", n), resp, err); err != nil {
		return nil, err
	}
	return p, nil
}

func (f *Forge) sleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, f.clock, d)
}
