package main

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// publishRun runs `ballet pipeline publish args…` in-process.
func publishRun(stdin string, args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := pipelineRun(append([]string{"publish"}, args...), strings.NewReader(stdin), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// TestPipelinePublish publishes YAML files to a real Core on SQLite: the
// latest version is read first unless --version says it; problems are
// printed exactly as validate prints them; a conflict names the latest
// version.
func TestPipelinePublish(t *testing.T) {
	e := apitest.New(t, storetest.Open(t, "sqlite"))
	e.Org("acme")
	e.Project("acme", "ACME")
	dir := writeFiles(t, map[string]string{"good.yaml": goodPipeline, "bad.yaml": badPipeline})
	t.Chdir(dir)
	srv := []string{"--server", e.URL, "--token", apitest.BootstrapToken, "--project", "ACME"}
	latest := func(name string) (int64, pipeline.Definition) {
		var v struct {
			Version    int64
			Definition pipeline.Definition
		}
		e.Admin(200, "GET", "/api/v1/projects/ACME/pipelines/"+name, nil).JSON(t, &v)
		return v.Version, v.Definition
	}
	want, _ := pipeline.Parse([]byte(goodPipeline))

	// Based on the latest version, read first: the template (0), then 1.
	for _, v := range []string{"1", "2"} {
		stdout, stderr, code := publishRun("", append(srv, "good.yaml")...)
		if code != 0 || stdout != "good.yaml: published as pipeline default of ACME version "+v+"\n" || stderr != "" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	}
	if v, d := latest("default"); v != 2 || !reflect.DeepEqual(d, want) {
		t.Fatalf("latest: version %d, %+v", v, d)
	}

	// A stale --version: a conflict naming the latest.
	stdout, stderr, code := publishRun("", append(srv, "--version", "1", "good.yaml")...)
	if code != 1 || stdout != "" || !regexp.MustCompile(`^ballet pipeline publish: good.yaml: not published: pipeline default of ACME was based on version 1, but the latest is version 2 \(by bootstrap at \S+Z\); review it, then publish again with --version 2\n$`).MatchString(stderr) {
		t.Fatalf("conflict: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// Problems: exactly what validate prints, on stderr; nothing published.
	var validated bytes.Buffer
	if code := pipelineRun([]string{"validate", "bad.yaml"}, nil, &validated, &bytes.Buffer{}); code != 1 {
		t.Fatalf("validate: exit %d", code)
	}
	stdout, stderr, code = publishRun("", append(srv, "bad.yaml")...)
	if code != 1 || stdout != "" || stderr != validated.String() {
		t.Fatalf("problems: exit %d\nstdout: %s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, validated.String())
	}
	stdout, stderr, code = publishRun("stages: [\n", append(srv, "-")...)
	if code != 1 || !strings.HasPrefix(stderr, "<stdin>:") || !strings.HasSuffix(stderr, "[yaml_syntax]\n") {
		t.Fatalf("syntax: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	stdout, stderr, code = publishRun("stages:\n  - {id: a, kind: agent, name: \xff}\n", append(srv, "-")...)
	if code != 1 || stderr != "<stdin>: the YAML does not parse: invalid leading UTF-8 octet [yaml_syntax]\n" {
		t.Fatalf("not UTF-8: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if v, _ := latest("default"); v != 2 {
		t.Fatalf("published despite problems: version %d", v)
	}

	// A ticket type's pipeline from stdin, with the token from the
	// environment; its first version.
	t.Setenv("BALLET_TOKEN", apitest.BootstrapToken)
	stdout, stderr, code = publishRun(goodPipeline, "--server", e.URL, "--project", "ACME", "--name", "bug", "--version", "0", "-")
	if code != 0 || stdout != "<stdin>: published as pipeline bug of ACME version 1\n" {
		t.Fatalf("bug: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// Refusals: a name that is no ticket type, a bad token, an unknown
	// project, no Core at all.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", e.URL, "--project", "ACME", "--name", "story", "good.yaml"}, `good.yaml: name: "story" is not "default" or one of the project's ticket types`},
		{[]string{"--server", e.URL, "--token", "wrong", "--project", "ACME", "good.yaml"}, "read the latest version of pipeline default of ACME: "},
		{[]string{"--server", e.URL, "--project", "NOPE", "--version", "0", "good.yaml"}, `good.yaml: project "NOPE" not found (404 Not Found)`},
		{[]string{"--server", "http://127.0.0.1:1", "--project", "ACME", "good.yaml"}, "connection refused"},
	} {
		stdout, stderr, code := publishRun("", tc.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s\nwant %q", tc.args, code, stdout, stderr, tc.want)
		}
	}

	// The binary itself.
	stdout, stderr, code = runBinary(t, dir, "", append([]string{"pipeline", "publish"}, append(srv, "good.yaml")...)...)
	if code != 0 || stdout != "good.yaml: published as pipeline default of ACME version 3\n" {
		t.Fatalf("binary: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestPipelinePublishUsage(t *testing.T) {
	dir := writeFiles(t, map[string]string{"good.yaml": goodPipeline})
	t.Chdir(dir)
	t.Setenv("BALLET_TOKEN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--project", "ACME", "--token", "t"}, "give exactly one FILE"},
		{[]string{"--project", "ACME", "--token", "t", "a.yaml", "b.yaml"}, "give exactly one FILE"},
		{[]string{"--token", "t", "good.yaml"}, "--project is required"},
		{[]string{"--project", "ACME", "good.yaml"}, "no token: pass --token or set BALLET_TOKEN"},
		{[]string{"--project", "ACME", "--token", "t", "--version", "-3", "good.yaml"}, `invalid value "-3" for flag -version: must be a whole number, 0 or more`},
		{[]string{"--project", "ACME", "--token", "t", "--version", "x", "good.yaml"}, `invalid value "x" for flag -version`},
		{[]string{"--project", "ACME", "--token", "t", "nope.yaml"}, "nope.yaml"},
		{[]string{"--frobnicate"}, "frobnicate"},
	} {
		stdout, stderr, code := publishRun("", tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s\nwant %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestHelpDoesNotPrintTheToken: --help lists the flags with their defaults;
// the token from $BALLET_TOKEN is not one of them.
func TestHelpDoesNotPrintTheToken(t *testing.T) {
	t.Setenv("BALLET_TOKEN", "secret-token-from-the-environment")
	for _, args := range [][]string{{"pipeline", "publish", "--help"}, {"events", "follow", "--help"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if strings.Contains(out, "secret-token") || !strings.Contains(out, "-token") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pipeline", "publish", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "ballet pipeline publish --project KEY") {
		t.Errorf("publish --help: exit %d\n%s", code, stdout.String())
	}
}
