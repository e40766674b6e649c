package door

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/tenancy"
)

type fuzzBody struct {
	Name    string            `json:"name"`
	Version *int64            `json:"version"`
	Tags    []string          `json:"tags,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Nested  *struct {
		On bool `json:"on"`
	} `json:"nested,omitempty"`
}

// FuzzDecode: any body decodes or fails with an application error that has
// a code, a message and a status — never a panic, never a 500; what decodes
// holds only valid UTF-8.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"a","version":1}`, `{"name":1}`, `{"x":1}`, `{`, ``, `[]`, `{} {}`,
		`{"tags":["a",2]}`, `{"labels":{"a":"b"}}`, `{"nested":{"on":"yes"}}`, `{"version":1e400}`,
		`{"name":"a","name":"b"}`, `{"NAME":"a"}`, `{"name":"\ud800"}`, "{\"name\":\"\xff\"}", `{"labels":{"a":"1","a":"2"}}`} {
		f.Add([]byte(s))
	}
	const limit = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		hr := httptest.NewRequest("POST", "/x", bytes.NewReader(b))
		rec := httptest.NewRecorder()
		hr.Body = http.MaxBytesReader(rec, hr.Body, limit)
		r := &Call{Request: hr, limit: limit}
		var v fuzzBody
		err := r.Decode(&v)
		if err == nil {
			texts := append([]string{v.Name}, v.Tags...)
			for k, val := range v.Labels {
				texts = append(texts, k, val)
			}
			for _, s := range texts {
				if !utf8.ValidString(s) {
					t.Fatalf("body %q decoded to invalid UTF-8 %q", b, s)
				}
			}
			return
		}
		code := apperr.Code(err)
		if status, ok := Status(code); code == apperr.Internal || !ok || status >= 500 || err.Error() == "" {
			t.Fatalf("body %q: %v (code %s)", b, err, code)
		}
	})
}

// TestDecodeStrict: what encoding/json let through — duplicate fields (the
// last won), field names in any case, invalid UTF-8 and unpaired surrogate
// escapes (both became U+FFFD), unknown fields inside a nullable value — is
// refused with the field at fault, by its path.
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type stage struct {
		ID string `json:"id"`
	}
	type body struct {
		Title      string                                  `json:"title"`
		Version    int64                                   `json:"version"`
		Stages     []stage                                 `json:"stages"`
		Repository strictjson.Nullable[tenancy.Repository] `json:"repository,omitempty"`
		Labels     map[string]string                       `json:"labels,omitempty"`
		Definition json.RawMessage                         `json:"definition,omitempty"`
	}
	cases := []struct {
		body, field, message string
	}{
		{`{"title":"a","title":"b"}`, "title", "is given twice: a member may appear only once"},
		{`{"stages":[{"id":"a"},{"id":"b","id":"c"}]}`, "stages[1].id", "is given twice: a member may appear only once"},
		{`{"labels":{"a":"1","a":"2"}}`, "labels.a", "is given twice: a member may appear only once"},
		{`{"definition":{"stages":[{"id":"a","id":"b"}]}}`, "definition.stages[0].id", "is given twice: a member may appear only once"},
		{`{"TiTlE":"a"}`, "TiTlE", `unknown field (names are case-sensitive: did you mean "title"?)`},
		{`{"stages":[{"ID":"a"}]}`, "stages[0].ID", `unknown field (names are case-sensitive: did you mean "id"?)`},
		{`{"repository":{"URL":"/srv/x.git"}}`, "repository.URL", `unknown field (names are case-sensitive: did you mean "url"?)`},
		{`{"repository":{"forge":"git","bogus":1}}`, "repository.bogus", "unknown field"},
		{`{"repository":{"forge":1}}`, "repository.forge", "must be a string, not number"},
		{"{\"title\":\"a\xffb\"}", "title", "must be valid UTF-8"},
		{"{\"labels\":{\"a\xff\":\"x\"}}", "labels", "must be valid UTF-8"},
		{`{"title":"a\ud800"}`, "title", `holds an unpaired surrogate escape (\ud800–\udfff must come in high-low pairs)`},
		{`{"title":"\udc00\ud800"}`, "title", `holds an unpaired surrogate escape (\ud800–\udfff must come in high-low pairs)`},
		{`{"version":1.5}`, "version", "must be an integer, not 1.5"},
		{`{"version":1e400}`, "version", "must be an integer, not 1e400"},
		{`{"version":"1"}`, "version", "must be an integer, not string"},
		{`{"stages":{}}`, "stages", "must be an array, not object"},
		{`{"x":1}`, "x", "unknown field"},
	}
	const limit = 4096
	for _, c := range cases {
		var v body
		err := decode(limit, c.body, &v)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.Invalid {
			t.Errorf("%s: %v, want invalid", c.body, err)
			continue
		}
		fe := ae.FieldErrors()
		if len(fe) != 1 || fe[0].Field != c.field || fe[0].Message != c.message {
			t.Errorf("%s: %+v\nwant   [{Field:%s Message:%s}]", c.body, fe, c.field, c.message)
		}
	}
	// What is fine stays fine: a surrogate pair, escapes, null for a
	// nullable, a repository in exactly its own field names.
	var v body
	if err := decode(limit, `{"title":"\ud83d\ude00 \u00e9","repository":null,"stages":[{"id":"a"}]}`, &v); err != nil {
		t.Fatal(err)
	}
	if v.Title != "😀 é" || !v.Repository.Set || v.Repository.Value != nil || len(v.Stages) != 1 {
		t.Fatalf("%+v", v)
	}
	v = body{}
	if err := decode(limit, `{"repository":{"forge":"git","url":"/srv/a.git","default_branch":"main","credentials_ref":""}}`, &v); err != nil {
		t.Fatal(err)
	}
	if r := v.Repository.Value; r == nil || r.URL != "/srv/a.git" || r.DefaultBranch != "main" {
		t.Fatalf("%+v", v.Repository)
	}
	// Whole-body problems keep their messages; an oversized body is 413.
	for b, want := range map[string]string{
		``:                               "request body is empty: a JSON object is required",
		`  `:                             "request body is empty: a JSON object is required",
		`{"title":"a"} {}`:               "request body must hold exactly one JSON object",
		`[1]`:                            "request body must be a JSON object, not array",
		`{"title":"a"`:                   "request body is malformed JSON: it ends too early",
		`{"title":}`:                     "request body is malformed JSON at byte 9",
		strings.Repeat(" ", 5000) + "{}": "request body exceeds 4096 bytes",
	} {
		err := decode(limit, b, &body{})
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%.40q: %v, want %s…", b, err, want)
		}
	}
}

// decode decodes body into v as a Call with a body limit of limit bytes.
func decode(limit int64, body string, v any) error {
	hr := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	hr.Body = http.MaxBytesReader(httptest.NewRecorder(), hr.Body, limit)
	return (&Call{Request: hr, limit: limit}).Decode(v)
}

// BenchmarkDecode decodes a typical item body (a 4 KiB description).
func BenchmarkDecode(b *testing.B) {
	body := `{"type":"task","title":"Add a health endpoint","description":"` + strings.Repeat("lorem ipsum dolor sit amet ", 150) +
		`","acceptance_criteria":"GET /health answers 200","epic":"ACME-1","state":"ready"}`
	const limit = 1 << 20
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var in struct {
			Type               string `json:"type"`
			Title              string `json:"title"`
			Description        string `json:"description"`
			AcceptanceCriteria string `json:"acceptance_criteria"`
			Epic               string `json:"epic"`
			State              string `json:"state"`
		}
		if err := decode(limit, body, &in); err != nil {
			b.Fatal(err)
		}
	}
}
