package server

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/tracker"
)

type inner struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

type outer struct {
	inner
	B       string                      `json:"b"` // shadows inner's
	Ptr     *int                        `json:"ptr"`
	Opt     *int                        `json:"opt,omitempty"`
	Struct  inner                       `json:"struct,omitempty"` // omitempty never omits a struct
	Zero    inner                       `json:"zero,omitzero"`
	Null    strictjson.Nullable[string] `json:"null,omitzero"`
	Skipped string                      `json:"-"`
	hidden  string
}

type selfEncoded int

func (selfEncoded) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type described int

func (described) MarshalJSON() ([]byte, error) { return []byte(`1.5`), nil }
func (described) JSONSchema() map[string]any   { return map[string]any{"type": "number"} }

// TestSchemaOfStruct: a schema lists what encoding/json writes, required
// and nullable as it writes it.
func TestSchemaOfStruct(t *testing.T) {
	g := newSchemaGen()
	g.schema(reflect.TypeFor[outer]())
	s := g.schemas["outer"].(map[string]any)
	props := s["properties"].(map[string]any)
	want := "a b null opt ptr struct zero"
	if got := strings.Join(slices.Sorted(maps.Keys(props)), " "); got != want {
		t.Fatalf("properties %s, want %s", got, want)
	}
	if got := strings.Join(s["required"].([]string), " "); got != "a b ptr struct" {
		t.Errorf("required %s", got)
	}
	if b, _ := json.Marshal(props["ptr"]); string(b) != `{"type":["integer","null"]}` {
		t.Errorf("ptr %s", b)
	}
	if b, _ := json.Marshal(props["opt"]); string(b) != `{"type":"integer"}` {
		t.Errorf("opt %s", b)
	}
	if b, _ := json.Marshal(props["b"]); string(b) != `{"type":"string"}` {
		t.Errorf("b %s (the outer field shadows the embedded one)", b)
	}
	if b, _ := json.Marshal(props["null"]); string(b) != `{"type":["string","null"]}` {
		t.Errorf("null %s", b)
	}
	if b, _ := json.Marshal(g.schema(reflect.TypeFor[described]())); string(b) != `{"type":"number"}` {
		t.Errorf("described %s", b)
	}
}

// TestSchemaRefusesWhatItCannotKnow: a type that encodes itself without
// saying how, and two types under one name, are programming errors.
func TestSchemaRefusesWhatItCannotKnow(t *testing.T) {
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			if v := recover(); v == nil || !strings.Contains(v.(string), want) {
				t.Errorf("%s: panic %v, want one naming %q", name, v, want)
			}
		}()
		f()
	}
	mustPanic("self-encoded", "JSONSchema", func() { newSchemaGen().schema(reflect.TypeFor[selfEncoded]()) })
	type patch struct {
		Field strictjson.Nullable[string] `json:"field,omitempty"`
	}
	mustPanic("a Nullable without omitzero", "omitzero", func() { newSchemaGen().schema(reflect.TypeFor[patch]()) })
	type Item struct{ X int }
	mustPanic("one name, two types", "schema Item", func() {
		g := newSchemaGen()
		g.schema(reflect.TypeFor[tracker.Item]())
		g.schema(reflect.TypeFor[Item]())
	})
}
