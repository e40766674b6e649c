package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/pipeline"
)

// runBinary runs the built binary (see TestMain) with stdin and returns its
// stdout, stderr and exit status.
func runBinary(t *testing.T, dir, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	goodPipeline = "stages:\n  - {id: implement, kind: agent}\n  - {id: integrate, kind: platform, action: merge}\n"
	badPipeline  = "max_iterations: 30\nstages:\n  - id: implement\n    kind: agnet\n    next: {done: reviw}\n"
)

func TestPipelineValidate(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"good.yaml": goodPipeline, "bad.yaml": badPipeline, "broken.yaml": "stages: [\n"})
	tests := []struct {
		name         string
		args         []string
		stdin        string
		code         int
		stdout       string
		stderrSubstr string
	}{
		{"valid", []string{"good.yaml"}, "", 0, "good.yaml: ok\n", ""},
		{"problems", []string{"bad.yaml"}, "", 1,
			"bad.yaml:1:17: max_iterations: max_iterations is 30; it must be between 1 and 20 [max_iterations_range]\n" +
				"bad.yaml:4:11: stages[0].kind: kind \"agnet\" of stage \"implement\" is unknown; use agent, human or platform [unknown_kind]\n" +
				"bad.yaml:5:18: stages[0].next.done: done of stage \"implement\" leads to \"reviw\", which is neither a stage id nor $done, $failed or $question [unknown_target]\n",
			""},
		{"syntax error", []string{"broken.yaml"}, "", 1, "bad", ""},
		{"several files", []string{"good.yaml", "bad.yaml"}, "", 1, "good.yaml: ok\nbad.yaml:1:17:", ""},
		{"stdin", []string{"-"}, goodPipeline, 0, "<stdin>: ok\n", ""},
		{"stdin with problems", []string{"-"}, "stages: []\n", 1, "<stdin>:1:9: stages: the pipeline has no stages; it needs at least one [empty_pipeline]\n", ""},
		{"missing file", []string{"nope.yaml"}, "", 2, "", "nope.yaml"},
		{"missing file wins", []string{"bad.yaml", "nope.yaml"}, "", 2, "bad.yaml:1:17:", "nope.yaml"},
		{"no file", nil, "", 2, "", "no FILE given"},
		{"bad flag", []string{"--frobnicate", "good.yaml"}, "", 2, "", "frobnicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runBinary(t, dir, tc.stdin, append([]string{"pipeline", "validate"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			switch {
			case tc.name == "syntax error":
				if !strings.HasPrefix(stdout, "broken.yaml:") || !strings.HasSuffix(stdout, "[yaml_syntax]\n") {
					t.Errorf("stdout %q", stdout)
				}
			case strings.HasSuffix(tc.stdout, "\n") || tc.stdout == "":
				if stdout != tc.stdout {
					t.Errorf("stdout\n%s\nwant\n%s", stdout, tc.stdout)
				}
			default:
				if !strings.HasPrefix(stdout, tc.stdout) {
					t.Errorf("stdout\n%s\nwant prefix\n%s", stdout, tc.stdout)
				}
			}
			if !strings.Contains(stderr, tc.stderrSubstr) || (tc.stderrSubstr == "" && stderr != "") {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.stderrSubstr)
			}
		})
	}
}

func TestPipelineRender(t *testing.T) {
	t.Parallel()
	messy := "# comment\nstages:\n- kind: agent\n  id: implement\n  next:\n    failed: '$question'\n"
	canonical := "stages:\n  - id: implement\n    kind: agent\n    next: {failed: $question}\n"
	dir := writeFiles(t, map[string]string{"messy.yaml": messy, "bad.yaml": badPipeline})
	template, err := pipeline.Render(pipeline.Template())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		args         []string
		stdin        string
		code         int
		stdout       string
		stderrSubstr string
	}{
		{"file", []string{"messy.yaml"}, "", 0, canonical, ""},
		{"stdin", nil, messy, 0, canonical, ""},
		{"stdin dash", []string{"-"}, messy, 0, canonical, ""},
		{"template", []string{"--template"}, "", 0, string(template), ""},
		{"problems", []string{"bad.yaml"}, "", 1, "", "bad.yaml:4:11: stages[0].kind: kind \"agnet\""},
		{"empty stdin", nil, "", 1, "", "<stdin>: stages: the pipeline has no stages; it needs at least one [empty_pipeline]\n"},
		{"template and file", []string{"--template", "messy.yaml"}, "", 2, "", "--template takes no FILE"},
		{"two files", []string{"messy.yaml", "bad.yaml"}, "", 2, "", "one FILE at most"},
		{"missing file", []string{"nope.yaml"}, "", 2, "", "nope.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runBinary(t, dir, tc.stdin, append([]string{"pipeline", "render"}, tc.args...)...)
			if code != tc.code || stdout != tc.stdout {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", code, tc.code, stdout, tc.stdout, stderr)
			}
			if !strings.Contains(stderr, tc.stderrSubstr) || (tc.stderrSubstr == "" && stderr != "") {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.stderrSubstr)
			}
		})
	}
}

// TestPipelineTemplateValidates pipes `render --template` into `validate -`.
func TestPipelineTemplateValidates(t *testing.T) {
	t.Parallel()
	tpl, _, code := runBinary(t, "", "", "pipeline", "render", "--template")
	if code != 0 {
		t.Fatalf("render --template: exit %d", code)
	}
	stdout, stderr, code := runBinary(t, "", tpl, "pipeline", "validate", "-")
	if code != 0 || stdout != "<stdin>: ok\n" {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	again, _, _ := runBinary(t, "", tpl, "pipeline", "render")
	if again != tpl {
		t.Fatalf("render of the template is not stable:\n%s\n%s", tpl, again)
	}
}

func TestPipelineUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pipeline"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "ballet pipeline validate FILE") {
		t.Errorf("no subcommand: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"pipeline", "frobnicate"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown subcommand: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"pipeline", "help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "render --template") {
		t.Errorf("help: exit %d, %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "ballet pipeline") {
		t.Errorf("ballet help does not mention pipeline: %q", stdout.String())
	}
	// In-process, with a given stdin.
	stdout.Reset()
	stderr.Reset()
	if code := pipelineRun([]string{"validate", "-"}, strings.NewReader(goodPipeline), &stdout, &stderr); code != 0 || stdout.String() != "<stdin>: ok\n" {
		t.Errorf("in-process validate: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
}
