package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/outbound"
	"github.com/ballet/ballet/internal/pipeline"
)

// pipelinePublish sends a YAML file to Core as a new version of a project's
// pipeline: `ballet pipeline publish`.
func pipelinePublish(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline publish", stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "Core's URL")
	token := fs.String("token", "", "bearer token (default $BALLET_TOKEN); needs project.update")
	project := fs.String("project", "", "project key (required)")
	name := fs.String("name", "default", `pipeline name: "default" or a ticket type`)
	version := int64(-1)
	fs.Func("version", "the version FILE is based on, 0 for the first (default: the latest, read first)", func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return errors.New("must be a whole number, 0 or more")
		}
		version = v
		return nil
	})
	if code, done := parseFlags(fs, args, pipelineUsage, stdout); done {
		return code
	}
	if *token == "" {
		*token = os.Getenv("BALLET_TOKEN")
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "ballet pipeline publish: "+format+"\n", args...)
		return 1
	}
	switch {
	case fs.NArg() != 1:
		fmt.Fprintf(stderr, "ballet pipeline publish: give exactly one FILE\n\n%s", pipelineUsage)
		return 2
	case *project == "":
		fmt.Fprintf(stderr, "ballet pipeline publish: --project is required\n\n%s", pipelineUsage)
		return 2
	case *token == "":
		fmt.Fprintln(stderr, "ballet pipeline publish: no token: pass --token or set BALLET_TOKEN")
		return 2
	}
	file, data, err := readPipelineFile(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "ballet pipeline publish:", err)
		return 2
	}
	if !utf8.Valid(data) {
		// JSON cannot carry the file as written (invalid bytes would
		// arrive as U+FFFD): report what validate reports.
		if _, problems := pipeline.Parse(data); len(problems) > 0 {
			printProblems(stderr, file, problems)
			return 1
		}
		return fail("%s: not published: it is not UTF-8 text", file)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &apiClient{server: strings.TrimSuffix(*server, "/"), token: *token, http: outbound.Client(time.Minute)}
	base := "/api/v1/projects/" + url.PathEscape(*project) + "/pipelines"
	what := fmt.Sprintf("pipeline %s of %s", *name, *project)
	if version < 0 {
		latest, err := c.latest(ctx, base, *name)
		if err != nil {
			return fail("read the latest version of %s: %v", what, err)
		}
		version = latest.Version
	}

	var out struct{ Version int64 }
	err = c.do(ctx, "PUT", base+"/"+url.PathEscape(*name), map[string]any{"version": version, "yaml": string(data)}, &out)
	var ae *apiError
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "%s: published as %s version %d\n", file, what, out.Version)
		return 0
	case errors.As(err, &ae) && ae.Status == http.StatusBadRequest && len(ae.Problems()) > 0:
		printProblems(stderr, file, ae.Problems())
		return 1
	case errors.As(err, &ae) && ae.Status == http.StatusConflict:
		latest, err := c.latest(ctx, base, *name)
		if err != nil {
			return fail("%s: not published: %s was based on version %d, but another version was published meanwhile", file, what, version)
		}
		return fail("%s: not published: %s was based on version %d, but the latest is version %d (by %s%s); review it, then publish again with --version %d",
			file, what, version, latest.Version, latest.CreatedBy, at(latest.CreatedAt), latest.Version)
	}
	return fail("%s: %v", file, err)
}

func at(t *time.Time) string {
	if t == nil {
		return ""
	}
	return " at " + t.UTC().Format(time.RFC3339)
}

// pipelineVersion is what publish reads of a pipeline version.
type pipelineVersion struct {
	Name      string
	Version   int64
	CreatedBy string     `json:"created_by"`
	CreatedAt *time.Time `json:"created_at"`
}

// latest returns the latest version of the project's pipeline name, version
// 0 when none was saved.
func (c *apiClient) latest(ctx context.Context, base, name string) (pipelineVersion, error) {
	var list struct{ Pipelines []pipelineVersion }
	if err := c.do(ctx, "GET", base, nil, &list); err != nil {
		return pipelineVersion{}, err
	}
	for _, p := range list.Pipelines {
		if p.Name == name {
			return p, nil
		}
	}
	return pipelineVersion{Name: name}, nil
}

// apiClient calls Core's REST API.
type apiClient struct {
	server, token string
	http          *http.Client
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, http.StatusText(e.Status))
}

// Problems returns the details when they are a pipeline's problems (not
// field errors).
func (e *apiError) Problems() []pipeline.Problem {
	var ps []pipeline.Problem
	if json.Unmarshal(e.Details, &ps) != nil {
		return nil
	}
	for _, p := range ps {
		if p.Code == "" {
			return nil
		}
	}
	return ps
}

// do sends body (if not nil) as JSON and decodes a 2xx answer into out; any
// other answer is an *apiError.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error apiError }
		_ = json.Unmarshal(b, &e)
		e.Error.Status = resp.StatusCode
		return &e.Error
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}
