package tracker

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Nullable is a PATCH field that distinguishes absent (Set false), null
// (Set, Value nil) and a value.
type Nullable[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSON records that the field was present.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// MarshalJSON writes the value or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) { return json.Marshal(n.Value) }

// SchemaType tells the OpenAPI generator which type the field carries.
func (Nullable[T]) SchemaType() reflect.Type { return reflect.TypeFor[T]() }
