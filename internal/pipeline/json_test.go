package pipeline

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestJSONShape(t *testing.T) {
	js, err := json.Marshal(Definition{MaxIterations: 2, Stages: []Stage{
		{ID: "a", Kind: KindAgent},
		{ID: "b", Name: "B", Kind: KindAgent, Adapter: AdapterOpenCode, Model: "m", Skills: []string{"go"}, Instructions: "i", TimeoutMinutes: 5, Next: Next{Done: "c", Failed: TargetFailed, Blocked: TargetQuestion}},
		{ID: "c", Kind: KindPlatform, Action: ActionMerge},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_iterations":2,"stages":[{"id":"a","kind":"agent"},` +
		`{"id":"b","name":"B","kind":"agent","adapter":"opencode","model":"m","skills":["go"],"instructions":"i","timeout_minutes":5,"next":{"done":"c","failed":"$failed","blocked":"$question"}},` +
		`{"id":"c","kind":"platform","action":"merge"}]}`
	if string(js) != want {
		t.Errorf("JSON\n got %s\nwant %s", js, want)
	}
	p, _ := json.Marshal(Problem{Code: "c", Path: "p", Message: "m"})
	if string(p) != `{"code":"c","path":"p","message":"m"}` {
		t.Errorf("problem JSON %s", p)
	}
	p, _ = json.Marshal(Problem{Code: "c", Path: "p", Message: "m", Line: 2, Column: 3})
	if string(p) != `{"code":"c","path":"p","message":"m","line":2,"column":3}` {
		t.Errorf("problem JSON %s", p)
	}
}

func TestDecodeJSON(t *testing.T) {
	rows := []struct {
		name, json string
		want       []string
	}{
		{"minimal", `{"stages":[{"id":"a","kind":"agent"}]}`, nil},
		{"nulls and empties are not written", `{"max_iterations":null,"stages":[{"id":"a","kind":"agent","name":"","adapter":"","model":null,"skills":[],"instructions":null,"action":"","timeout_minutes":0,"next":{"done":"","failed":null}}]}`, nil},
		{"unknown field", `{"stages":[{"id":"a","kind":"agent","adaptor":"opencode"}]}`, []string{"unknown_field@stages[0].adaptor"}},
		{"unknown top-level field", `{"version":3,"stages":[{"id":"a","kind":"agent"}]}`, []string{"unknown_field@version"}},
		{"unknown outcome", `{"stages":[{"id":"a","kind":"agent","next":{"ok":"$done"}}]}`, []string{"unknown_field@stages[0].next.ok"}},
		{"duplicate key", `{"stages":[{"id":"a","id":"b","kind":"agent"}]}`, []string{"duplicate_field@stages[0].id"}},
		{"max_iterations as string", `{"max_iterations":"3","stages":[{"id":"a","kind":"agent"}]}`, []string{"invalid_type@max_iterations"}},
		{"max_iterations 0", `{"max_iterations":0,"stages":[{"id":"a","kind":"agent"}]}`, []string{"max_iterations_range@max_iterations"}},
		{"max_iterations huge", `{"max_iterations":123456789012345678901234,"stages":[{"id":"a","kind":"agent"}]}`, []string{"max_iterations_range@max_iterations"}},
		{"timeout as float", `{"stages":[{"id":"a","kind":"agent","timeout_minutes":1.5}]}`, []string{"invalid_type@stages[0].timeout_minutes"}},
		{"timeout with exponent", `{"stages":[{"id":"a","kind":"agent","timeout_minutes":1e2}]}`, []string{"invalid_type@stages[0].timeout_minutes"}},
		{"id as number", `{"stages":[{"id":1,"kind":"agent"}]}`, []string{"invalid_type@stages[0].id"}},
		{"stages as object", `{"stages":{"id":"a"}}`, []string{"invalid_type@stages"}},
		{"skills as string", `{"stages":[{"id":"a","kind":"agent","skills":"go"}]}`, []string{"invalid_type@stages[0].skills"}},
		{"root array", `[]`, []string{"invalid_type@"}},
		{"root null", `null`, []string{"empty_pipeline@stages"}},
		{"validated", `{"stages":[{"id":"a","kind":"agent","next":{"done":"b"}},{"id":"a","kind":"human","model":"x"}]}`, []string{"unknown_target@stages[0].next.done", "duplicate_id@stages[1].id", "field_not_allowed@stages[1].model"}},
		{"syntax", `{"stages":[{"id":"a",}]}`, []string{"json_syntax@"}},
		{"truncated", `{"stages":[`, []string{"json_syntax@"}},
		{"empty", ``, []string{"json_syntax@"}},
		{"trailing data", `{"stages":[{"id":"a","kind":"agent"}]} {}`, []string{"json_syntax@"}},
		{"too deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), []string{"json_syntax@"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			_, ps := DecodeJSON([]byte(row.json))
			got := summary(ps)
			want := row.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("problems\n got %q\nwant %q\n%v", got, want, ps)
			}
		})
	}
}

func TestDecodeJSONPositions(t *testing.T) {
	src := "{\n  \"stages\": [\n    {\"id\": \"a\", \"kind\": \"robot\"}\n  ]\n}"
	_, ps := DecodeJSON([]byte(src))
	if len(ps) != 1 || ps[0].Line != 3 || ps[0].Column != 25 || ps[0].Code != CodeUnknownKind {
		t.Fatalf("%+v", ps)
	}
	_, ps = DecodeJSON([]byte("{\n  \"stages\": [,]\n}"))
	if len(ps) != 1 || ps[0].Line != 2 || ps[0].Code != CodeJSONSyntax {
		t.Fatalf("%+v", ps)
	}
}

func TestDecodeJSONTemplate(t *testing.T) {
	js, err := json.Marshal(Template())
	if err != nil {
		t.Fatal(err)
	}
	d, ps := DecodeJSON(js)
	if len(ps) > 0 || !reflect.DeepEqual(d, Template()) {
		t.Fatalf("%v\n%#v", ps, d)
	}
}
