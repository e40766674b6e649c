// Package strictjson decodes JSON sent by clients strictly, with the JSON v2
// semantics (github.com/go-json-experiment/json, the mirror of Go's
// encoding/json/v2): exactly one value; member names matched exactly, never
// case-insensitively; unknown and duplicate members refused; strings that
// are valid UTF-8 without unpaired surrogate escapes. A problem comes back as
// an *Error naming the offending value by its path (repository.url,
// stages[2].id), so that callers can answer with the field at fault.
//
// encoding/json (v1) accepts all of these: it lets the last duplicate win,
// matches "TiTlE" to title and replaces invalid text with U+FFFD.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Error is a problem with the input; Field is the path of the value at
// fault, "" for the input as a whole.
type Error struct {
	Field   string
	Message string
	// Malformed: the input is not JSON at all (a syntax error, a value cut
	// short, data after the value), rather than JSON Ballet does not take.
	Malformed bool
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "JSON " + e.Message
	}
	return e.Field + ": " + e.Message
}

// options are the strict options. The last three are v2's defaults, spelled
// out because they are the point.
var options = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
)

// Options are the strict decoding options, for a type's own
// UnmarshalJSONFrom that decodes a part of its value (it inherits them from
// its decoder; these are for decoding outside one).
func Options() json.Options { return options }

// Unmarshal decodes b, which must hold exactly one JSON value, into v.
func Unmarshal(b []byte, v any) error {
	if len(bytes.TrimLeft(b, " \t\r\n")) == 0 {
		return &Error{Message: "is empty: a JSON object is required"}
	}
	return explain(json.Unmarshal(b, v, options))
}

// Read decodes the single JSON value that r holds into v. An error reading
// r is returned as it is (for example *http.MaxBytesError).
func Read(r io.Reader, v any) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return Unmarshal(b, v)
}

// explain turns a decoding error into an *Error; read errors pass through.
func explain(err error) error {
	var (
		syn *jsontext.SyntacticError
		sem *json.SemanticError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syn):
		return syntactic(syn)
	case errors.As(err, &sem):
		return semantic(sem)
	}
	return err
}

func syntactic(e *jsontext.SyntacticError) error {
	field := Path(e.JSONPointer)
	switch {
	case errors.Is(e.Err, jsontext.ErrDuplicateName):
		return &Error{Field: field, Message: "is given twice: a member may appear only once"}
	case e.Err != nil && strings.Contains(e.Err.Error(), "invalid UTF-8"): // jsonwire.ErrInvalidUTF8 is not exported
		return &Error{Field: field, Message: "must be valid UTF-8"}
	case e.Err != nil && strings.Contains(e.Err.Error(), "surrogate"):
		return &Error{Field: field, Message: `holds an unpaired surrogate escape (\ud800–\udfff must come in high-low pairs)`}
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		return &Error{Message: "is malformed JSON: it ends too early", Malformed: true}
	case e.Err != nil && strings.Contains(e.Err.Error(), "after top-level value"):
		return &Error{Message: "must hold exactly one JSON object", Malformed: true}
	}
	msg := "is malformed JSON at byte " + strconv.FormatInt(e.ByteOffset, 10)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if field != "" {
		msg += " (in " + field + ")"
	}
	return &Error{Message: msg, Malformed: true}
}

func semantic(e *json.SemanticError) error {
	field := Path(e.JSONPointer)
	switch {
	case errors.Is(e.Err, json.ErrUnknownName):
		msg := "unknown field"
		if want := foldMatch(e.GoType, e.JSONPointer.LastToken()); want != "" {
			msg += fmt.Sprintf(" (names are case-sensitive: did you mean %q?)", want)
		}
		return &Error{Field: field, Message: msg}
	case errors.Is(e.Err, strconv.ErrSyntax), errors.Is(e.Err, strconv.ErrRange):
		return &Error{Field: field, Message: fmt.Sprintf("must be %s, not %s", expected(e.GoType), e.JSONValue)}
	case e.Err != nil && !errors.Is(e.Err, io.ErrUnexpectedEOF):
		// A type's own UnmarshalJSON refused the value: its message says why.
		return &Error{Field: field, Message: e.Err.Error()}
	}
	got := kindName(e.JSONKind)
	if field == "" {
		return &Error{Message: "must be a JSON object, not " + got}
	}
	return &Error{Field: field, Message: fmt.Sprintf("must be %s, not %s", expected(e.GoType), got)}
}

// Path renders a JSON pointer as a field path: /stages/2/id is stages[2].id.
// A token of digits is taken for an index (Ballet has no member named by
// digits).
func Path(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "this value"
}

// expected describes the JSON a Go type takes.
func expected(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// foldMatch returns the JSON name of a field of struct t that equals name
// but for case ("" when none does).
func foldMatch(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "-" || (f.Anonymous && tag == "") {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag != name && strings.EqualFold(tag, name) {
			return tag
		}
	}
	return ""
}
