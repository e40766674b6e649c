package pipeline

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
)

// benchSizes runs up to the default request body limit ([http]
// max_body_bytes, 1 MiB).
var benchSizes = []int{16 << 10, 64 << 10, 256 << 10, 1 << 20}

// badShape builds an input of about size bytes: prefix, then item repeated
// (with its index substituted for %d, if any) joined by sep, then suffix.
type badShape struct {
	name                      string
	json                      bool
	prefix, item, sep, suffix string
}

var badShapes = []badShape{
	{name: "YAMLFlowScalars", prefix: "stages: [", item: "1", sep: ",", suffix: "]\n"},
	{name: "YAMLBlockScalars", prefix: "stages:\n", item: "- 1", sep: "\n", suffix: "\n"},
	{name: "YAMLFlowMaps", prefix: "stages: [", item: "{id: a, kind: robot, next: {done: x}}", sep: ",", suffix: "]\n"},
	{name: "YAMLBlockMaps", prefix: "stages:\n", item: "  - id: s%d\n    kind: agent\n    next: {done: s%d}", sep: "\n", suffix: "\n"},
	{name: "YAMLChain", prefix: "stages:\n", item: "  - {id: s%d, kind: agent}", sep: "\n", suffix: "\n"},
	{name: "YAMLUnknownKeys", prefix: "", item: "k%d: 1", sep: "\n", suffix: "\n"},
	{name: "YAMLSkills", prefix: "stages:\n  - id: a\n    kind: agent\n    skills: [", item: "x", sep: ",", suffix: "]\n"},
	{name: "YAMLDeep", prefix: "stages: ", item: "[", sep: "", suffix: ""},
	{name: "JSONScalars", json: true, prefix: `{"stages":[`, item: "1", sep: ",", suffix: "]}"},
	{name: "JSONScalarsLines", json: true, prefix: "{\"stages\":[\n", item: "1", sep: ",\n", suffix: "]}"},
	{name: "JSONMaps", json: true, prefix: `{"stages":[`, item: `{"id":"a","kind":"robot"}`, sep: ",", suffix: "]}"},
	{name: "JSONUnknownKeys", json: true, prefix: "{", item: `"k%d":1`, sep: ",", suffix: "}"},
}

func (s badShape) build(size int) []byte {
	var b bytes.Buffer
	b.WriteString(s.prefix)
	for i := 0; b.Len() < size-len(s.suffix)-len(s.item)-16; i++ {
		if i > 0 {
			b.WriteString(s.sep)
		}
		item := s.item
		if bytes.Contains([]byte(item), []byte("%d")) {
			item = string(bytes.ReplaceAll([]byte(item), []byte("%d"), []byte(strconv.Itoa(i))))
		}
		b.WriteString(item)
	}
	b.WriteString(s.suffix)
	return b.Bytes()
}

// BenchmarkParseBadShapes parses inputs of growing size in the shapes that
// used to take time quadratic in their size. ns/op must grow linearly with
// the size (×4 per step).
func BenchmarkParseBadShapes(b *testing.B) {
	for _, shape := range badShapes {
		for _, size := range benchSizes {
			data := shape.build(size)
			b.Run(fmt.Sprintf("%s/%dKiB", shape.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if shape.json {
						DecodeJSON(data)
					} else {
						Parse(data)
					}
				}
			})
		}
	}
}
