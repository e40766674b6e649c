package openapi

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/strictjson"
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
	g := NewGenerator(nil, nil)
	g.Schema(reflect.TypeFor[outer]())
	s := g.Schemas["outer"].(map[string]any)
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
	if b, _ := json.Marshal(g.Schema(reflect.TypeFor[described]())); string(b) != `{"type":"number"}` {
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
	mustPanic("self-encoded", "JSONSchema", func() { NewGenerator(nil, nil).Schema(reflect.TypeFor[selfEncoded]()) })
	type patch struct {
		Field strictjson.Nullable[string] `json:"field,omitempty"`
	}
	mustPanic("a Nullable without omitzero", "omitzero", func() { NewGenerator(nil, nil).Schema(reflect.TypeFor[patch]()) })
	mustPanic("one name, two types", "schema inner", func() {
		g := NewGenerator(nil, nil)
		g.Schema(reflect.TypeFor[inner]())
		type inner struct{ X int }
		g.Schema(reflect.TypeFor[inner]())
	})
	mustPanic("an enum of no field", "names no string field", func() {
		NewGenerator(map[reflect.Type]map[string][]string{reflect.TypeFor[inner](): {"nope": {"x"}}}, nil).Schema(reflect.TypeFor[inner]())
	})
}

// TestPaths: an operation's parameters, body and answers, errors in the
// one Error shape.
func TestPaths(t *testing.T) {
	g := NewGenerator(map[reflect.Type]map[string][]string{reflect.TypeFor[inner](): {"a": {"x", "y"}}}, nil)
	paths := g.Paths("/api/v1/", []Operation{{Method: "PUT", Path: "/api/v1/things/{thing}", Summary: "Save a thing", Permission: "things.write",
		Query: []Param{{Name: "tag", Type: "string", Repeat: true}}, Request: inner{}, Response: outer{},
		Statuses: Statuses(0, "PUT", true, false, 422)}})
	op := paths["/api/v1/things/{thing}"]["put"].(map[string]any)
	if op["operationId"] != "put_things_thing" || op["x-permission"] != "things.write" {
		t.Errorf("operation %v", op)
	}
	if b, _ := json.Marshal(op["parameters"]); string(b) != `[{"in":"path","name":"thing","required":true,"schema":{"type":"string"}},`+
		`{"description":"","in":"query","name":"tag","schema":{"items":{"type":"string"},"type":"array"}}]` {
		t.Errorf("parameters %s", b)
	}
	var codes []string
	for code := range op["responses"].(map[string]any) {
		codes = append(codes, code)
	}
	if got := strings.Join(slices.Sorted(slices.Values(codes)), " "); got != "200 400 401 403 404 408 409 413 422 500 503" {
		t.Errorf("responses %s", got)
	}
	if b, _ := json.Marshal(g.Schemas["inner"].(map[string]any)["properties"].(map[string]any)["a"]); string(b) != `{"enum":["x","y"],"type":"string"}` {
		t.Errorf("enum %s", b)
	}
}
