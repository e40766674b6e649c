package pipeline

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Render writes a definition as canonical YAML, the form the UI's YAML tab,
// Export and `ballet pipeline render` show:
//
//   - only what is written: a zero max_iterations, empty fields and empty
//     next entries (the defaults) are left out, so rendering never spells out
//     a default the user did not write;
//   - keys in a fixed order: max_iterations, stages; per stage id, kind, name,
//     adapter, model, skills, knowledge, instructions, action,
//     timeout_minutes, next;
//   - two-space indentation, stages as a block list ("  - id: …");
//   - skills and knowledge as flow lists ([go, docs]) and next as a flow mapping in the
//     order done, failed, blocked ({done: review, failed: $question});
//   - multi-line strings as literal blocks (|), other strings plain, quoted
//     only where YAML needs it (and yes/no/on/off, booleans to YAML 1.1);
//     no line wrapping.
//
// Parse(Render(d)) gives back d for any definition without invalid UTF-8
// (which is an error), whether it validates or not, so a definition being
// edited can be shown too; empty skill and knowledge lists read back as
// nil.
func Render(d Definition) (out []byte, err error) {
	if err := checkUTF8(d); err != nil {
		return nil, err
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	if d.MaxIterations != 0 {
		put(root, "max_iterations", intNode(d.MaxIterations))
	}
	stages := &yaml.Node{Kind: yaml.SequenceNode}
	if len(d.Stages) == 0 {
		stages.Style = yaml.FlowStyle
	}
	for _, s := range d.Stages {
		m := &yaml.Node{Kind: yaml.MappingNode}
		putStr(m, "id", s.ID)
		putStr(m, "kind", s.Kind)
		putStr(m, "name", s.Name)
		putStr(m, "adapter", s.Adapter)
		putStr(m, "model", s.Model)
		putList(m, "skills", s.Skills)
		putList(m, "knowledge", s.Knowledge)
		putStr(m, "instructions", s.Instructions)
		putStr(m, "action", s.Action)
		if s.TimeoutMinutes != 0 {
			put(m, "timeout_minutes", intNode(s.TimeoutMinutes))
		}
		if !s.Next.IsZero() {
			next := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			for _, o := range Outcomes() {
				putStr(next, o, s.Next.Get(o))
			}
			put(m, "next", next)
		}
		stages.Content = append(stages.Content, m)
	}
	put(root, "stages", stages)

	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("pipeline: render: %v", v)
		}
	}()
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("pipeline: render: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("pipeline: render: %w", err)
	}
	return buf.Bytes(), nil
}

func checkUTF8(d Definition) error {
	for i, s := range d.Stages {
		for _, v := range append([]string{s.ID, s.Kind, s.Name, s.Adapter, s.Model, s.Instructions, s.Action, s.Next.Done, s.Next.Failed, s.Next.Blocked}, slices.Concat(s.Skills, s.Knowledge)...) {
			if !utf8.ValidString(v) {
				return fmt.Errorf("pipeline: render: %s holds text that is not valid UTF-8", stagePath(i))
			}
		}
	}
	return nil
}

func put(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// putList puts a non-empty list of strings as a flow list.
func putList(m *yaml.Node, key string, list []string) {
	if len(list) == 0 {
		return
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range list {
		seq.Content = append(seq.Content, strNode(v))
	}
	put(m, key, seq)
}

func putStr(m *yaml.Node, key, v string) {
	if v != "" {
		put(m, key, strNode(v))
	}
}

func intNode(v int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
}

// strNode is a string scalar: the encoder quotes it when it would otherwise
// read as another type ("3", "true", "~") or is not a valid plain scalar.
func strNode(v string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	if yaml11Bools[v] {
		// A string to YAML 1.2, but a boolean to YAML 1.1 readers.
		n.Style = yaml.DoubleQuotedStyle
	}
	if strings.Contains(v, "\n") {
		n.Style = yaml.LiteralStyle
		// Other line breaks would be normalised to \n inside a block
		// scalar, and the YAML library cannot read back a block scalar
		// that starts with a tab: escape those instead.
		if strings.ContainsAny(v, "\r\u0085\u2028\u2029") || strings.HasPrefix(v, "\t") {
			n.Style = yaml.DoubleQuotedStyle
		}
	}
	return n
}

var yaml11Bools = map[string]bool{}

func init() {
	for _, s := range []string{"y", "yes", "n", "no", "on", "off"} {
		yaml11Bools[s] = true
		yaml11Bools[strings.ToUpper(s)] = true
		yaml11Bools[strings.ToUpper(s[:1])+s[1:]] = true
	}
}
