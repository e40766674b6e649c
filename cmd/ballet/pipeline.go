package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ballet/ballet/internal/pipeline"
)

const pipelineUsage = `Usage:
  ballet pipeline validate FILE...    check pipeline YAML files ("-" reads stdin)
  ballet pipeline render [FILE]       print the canonical YAML of FILE (default: stdin)
  ballet pipeline render --template   print Ballet's template pipeline
  ballet pipeline publish --project KEY [--name NAME] [--version N]
                          [--server URL] [--token T] FILE
                                      publish FILE as a new version of a project's pipeline

validate prints every problem as FILE:LINE:COL: path: message [code] and exits
1 when there are problems, or prints FILE: ok and exits 0. render prints the
problems to stderr and exits 1 instead of printing YAML.

publish sends FILE to Core (--server, default http://127.0.0.1:8080) with the
token --token (default $BALLET_TOKEN), which needs project.update, as the next
version of the pipeline NAME (--name: "default", the default, or a ticket
type) of project KEY. --version N is the version FILE is based on (0 for the
first); without it publish reads the latest version first. It prints
"FILE: published as pipeline NAME of KEY version N" and exits 0. Problems are
printed to stderr as validate prints them, exit 1; so is a conflict (another
version was published after N: the message names the latest), as is any other
refusal.

Exit status 2 means a usage error or an unreadable file.
`

const stdinName = "<stdin>"

func pipelineCmd(args []string, stdout, stderr io.Writer) int {
	return pipelineRun(args, os.Stdin, stdout, stderr)
}

func pipelineRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, pipelineUsage)
		return 2
	}
	switch args[0] {
	case "validate":
		return pipelineValidate(args[1:], stdin, stdout, stderr)
	case "render":
		return pipelineRender(args[1:], stdin, stdout, stderr)
	case "publish":
		return pipelinePublish(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, pipelineUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "ballet pipeline: unknown command %q\n\n%s", args[0], pipelineUsage)
		return 2
	}
}

func pipelineValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline validate", stderr)
	if code, done := parseFlags(fs, args, pipelineUsage, stdout); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "ballet pipeline validate: no FILE given\n\n%s", pipelineUsage)
		return 2
	}
	code := 0
	for _, file := range fs.Args() {
		name, data, err := readPipelineFile(file, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "ballet pipeline validate:", err)
			code = 2
			continue
		}
		_, problems := pipeline.Parse(data)
		if len(problems) == 0 {
			fmt.Fprintf(stdout, "%s: ok\n", name)
			continue
		}
		printProblems(stdout, name, problems)
		code = max(code, 1)
	}
	return code
}

func pipelineRender(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline render", stderr)
	template := fs.Bool("template", false, "print Ballet's template pipeline")
	if code, done := parseFlags(fs, args, pipelineUsage, stdout); done {
		return code
	}
	var def pipeline.Definition
	switch {
	case *template && fs.NArg() > 0:
		fmt.Fprintf(stderr, "ballet pipeline render: --template takes no FILE\n\n%s", pipelineUsage)
		return 2
	case fs.NArg() > 1:
		fmt.Fprintf(stderr, "ballet pipeline render: one FILE at most\n\n%s", pipelineUsage)
		return 2
	case *template:
		def = pipeline.Template()
	default:
		file := "-"
		if fs.NArg() == 1 {
			file = fs.Arg(0)
		}
		name, data, err := readPipelineFile(file, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "ballet pipeline render:", err)
			return 2
		}
		var problems []pipeline.Problem
		def, problems = pipeline.Parse(data)
		if len(problems) > 0 {
			printProblems(stderr, name, problems)
			return 1
		}
	}
	out, err := pipeline.Render(def)
	if err != nil {
		fmt.Fprintln(stderr, "ballet pipeline render:", err)
		return 1
	}
	stdout.Write(out)
	return 0
}

// readPipelineFile reads FILE, or stdin for "-".
func readPipelineFile(file string, stdin io.Reader) (string, []byte, error) {
	if file == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return stdinName, nil, fmt.Errorf("read stdin: %w", err)
		}
		return stdinName, data, nil
	}
	data, err := os.ReadFile(file)
	return file, data, err
}

// printProblems writes FILE:LINE:COL: path: message [code], one a line.
func printProblems(w io.Writer, name string, problems []pipeline.Problem) {
	for _, p := range problems {
		sep := ": "
		if p.Line > 0 {
			sep = ":"
		}
		fmt.Fprintf(w, "%s%s%s\n", name, sep, p)
	}
}
