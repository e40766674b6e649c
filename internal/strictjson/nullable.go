package strictjson

import (
	"bytes"
	"encoding/json"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Nullable is a PATCH field that distinguishes absent (Set false), null
// (Set, Value nil) and a value (RFC 7386: null removes or clears). Event
// payloads use it too, to tell a cleared value (null) from an unchanged
// one (absent, with omitzero).
type Nullable[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSONFrom records that the field was present and decodes the
// value with the decoder's own options, so that a strict decode of the
// body stays strict inside the value (unknown or miscased fields, paths).
func (n *Nullable[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	n.Set = true
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		n.Value = nil
		return err
	}
	var v T
	if err := jsonv2.UnmarshalDecode(dec, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// UnmarshalJSON is UnmarshalJSONFrom for encoding/json callers, strict too.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Value = nil
		return nil
	}
	var v T
	if err := Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// MarshalJSON writes the value or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) { return json.Marshal(n.Value) }

// SchemaType tells the OpenAPI generator which type the field carries.
func (Nullable[T]) SchemaType() reflect.Type { return reflect.TypeFor[T]() }
