// Package openapi builds the OpenAPI 3.1 documents of Ballet's HTTP APIs
// (Core's and the Knowledge service's) from their route tables: the
// schemas of the request and answer types by reflection (Generator), the
// event log's Event as one of the catalogue's types, and the operations
// (Paths), so that both documents say the same things the same way.
package openapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/event"
)

var (
	timeType  = reflect.TypeFor[time.Time]()
	rawType   = reflect.TypeFor[json.RawMessage]()
	eventType = reflect.TypeFor[event.Event]()

	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// ActorKinds are the values of an event's actor_kind.
var ActorKinds = []string{event.ActorHuman, event.ActorService, event.ActorSystem}

// Ref is a reference to the named schema.
func Ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// Param is a query parameter of an operation.
type Param struct {
	Name, Type, Description string
	Repeat                  bool // it may be given more than once (an array)
}

// Operation is what the document says of one route.
type Operation struct {
	Method, Path, Summary string
	Permission            string // x-permission: what the route needs
	Security              []any  // the credentials it takes
	Query                 []Param
	// Request and Response are zero values of the body types (nil: none);
	// RawBody is the media type of a body of raw bytes instead.
	Request, Response any
	RawBody           string
	OptionalBody      bool
	Statuses          []int // every status it may answer (Statuses)
	// ProtocolErrors: the route speaks a protocol of its own whose errors
	// have the Response's shape too (MCP: JSON-RPC errors).
	ProtocolErrors bool
	// HTML: the success may also be a page of HTML (text/html).
	HTML bool
}

// Statuses lists every status a route may answer: its success status, the
// alternatives it names, and the errors every route can give (a bad query
// or path, authentication, access, a missing resource, an internal error,
// an unavailable dependency; writes also a conflict, bodies also one too
// slow or too large, raw bodies one of another media type).
func Statuses(success int, method string, body, raw bool, also ...int) []int {
	if success == 0 {
		success = http.StatusOK
	}
	out := []int{success, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusInternalServerError, http.StatusServiceUnavailable}
	if method != http.MethodGet {
		out = append(out, http.StatusConflict)
	}
	if body || raw {
		out = append(out, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge)
	}
	if raw {
		out = append(out, http.StatusUnsupportedMediaType)
	}
	out = append(out, also...)
	sort.Ints(out)
	return slices.Compact(out)
}

// OperationID names an operation after its method and its path below
// prefix: GET /api/v1/items/{item}/flow → get_items_item_flow.
func OperationID(method, prefix, path string) string {
	p := strings.NewReplacer("{", "", "}", "", "/", "_").Replace(strings.TrimPrefix(strings.TrimPrefix(path, prefix), "/"))
	return strings.ToLower(method) + "_" + p
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// Paths is the document's paths object of ops; errors answer Error.
func (g *Generator) Paths(prefix string, ops []Operation) map[string]map[string]any {
	paths := map[string]map[string]any{}
	for _, o := range ops {
		op := map[string]any{
			"operationId":  OperationID(o.Method, prefix, o.Path),
			"summary":      o.Summary,
			"x-permission": o.Permission,
			"security":     o.Security,
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(o.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range o.Query {
			s := map[string]any{"type": q.Type}
			if q.Repeat {
				s = map[string]any{"type": "array", "items": s}
			}
			params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": s})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if o.RawBody != "" {
			op["requestBody"] = map[string]any{"required": !o.OptionalBody, "content": map[string]any{
				o.RawBody: map[string]any{"schema": map[string]any{"type": "string", "contentMediaType": o.RawBody}}}}
		}
		if o.Request != nil {
			op["requestBody"] = map[string]any{"required": !o.OptionalBody, "content": map[string]any{
				"application/json": map[string]any{"schema": g.Schema(reflect.TypeOf(o.Request))}}}
		}
		responses := map[string]any{}
		for _, status := range o.Statuses {
			switch {
			case status >= 400:
				schema := Ref("Error")
				if o.ProtocolErrors && o.Response != nil {
					schema = map[string]any{"anyOf": []any{Ref("Error"), g.Schema(reflect.TypeOf(o.Response))}}
				}
				responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status),
					"content": map[string]any{"application/json": map[string]any{"schema": schema}}}
			case status == http.StatusNoContent || status == http.StatusAccepted || o.Response == nil:
				responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status)}
			default:
				content := map[string]any{"application/json": map[string]any{"schema": g.Schema(reflect.TypeOf(o.Response))}}
				if o.HTML {
					content["text/html"] = map[string]any{"schema": map[string]any{"type": "string"}}
				}
				responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status), "content": content}
			}
		}
		op["responses"] = responses
		if paths[o.Path] == nil {
			paths[o.Path] = map[string]any{}
		}
		paths[o.Path][strings.ToLower(o.Method)] = op
	}
	return paths
}

// Generator turns Go types into JSON schemas (2020-12, as OpenAPI 3.1 has
// them), registering named structs under components/schemas.
type Generator struct {
	Schemas map[string]any
	// Enums are the closed sets of string fields: by Go type, JSON field
	// name.
	Enums map[reflect.Type]map[string][]string
	// Events is the catalogue of the event types the API writes: the
	// schema of event.Event is one of them, told apart by type.
	Events event.Catalogue
	types  map[string]reflect.Type // the Go type behind each named schema
}

// NewGenerator returns a generator with the API's enums and events.
func NewGenerator(enums map[reflect.Type]map[string][]string, events event.Catalogue) *Generator {
	return &Generator{Schemas: map[string]any{}, Enums: enums, Events: events, types: map[string]reflect.Type{}}
}

// Name registers t under name, or reports that it is there already. Two
// Go types with one name would make one schema lie: that panics.
func (g *Generator) Name(name string, t reflect.Type) (exists bool) {
	if prev, ok := g.types[name]; ok {
		if prev != t {
			panic(fmt.Sprintf("openapi: schema %s is both %v and %v: rename one", name, prev, t))
		}
		return true
	}
	g.types[name] = t
	g.Schemas[name] = map[string]any{} // placeholder while the type recurses
	return false
}

// Schema returns the schema of t: a $ref for named structs. A type that
// encodes itself says how: SchemaType (a Nullable's value type) or
// JSONSchema.
func (g *Generator) Schema(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		return g.Schema(t.Elem())
	}
	switch v := reflect.Zero(t).Interface().(type) {
	case interface{ SchemaType() reflect.Type }:
		return Nullable(g.Schema(v.SchemaType()))
	case interface{ JSONSchema() map[string]any }:
		return v.JSONSchema()
	}
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case rawType:
		return map[string]any{}
	case eventType:
		return g.eventSchema()
	}
	switch {
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		panic(fmt.Sprintf("openapi: %v encodes itself (MarshalJSON): give it a JSONSchema() map[string]any method", t))
	case t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.Schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.Schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return g.Object(t)
		}
		if !g.Name(t.Name(), t) {
			g.Schemas[t.Name()] = g.Object(t)
		}
		return Ref(t.Name())
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

// Object is the schema of struct t: its JSON fields as encoding/json
// writes them, embedded structs flattened.
func (g *Generator) Object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	g.fields(t, props, &required)
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sort.Strings(required)
		s["required"] = required
	}
	return s
}

// stringList tells whether t is a list of strings (or a pointer to one),
// whose items an enum may close.
func stringList(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String
}

// fields adds t's JSON fields to props: a field is required unless
// omitempty can omit it or it is omitzero; a pointer that is not omitted
// when nil may be null. A field of t shadows one of an embedded struct.
func (g *Generator) fields(t reflect.Type, props map[string]any, required *[]string) {
	var embedded []reflect.Type
	for field := range g.Enums[t] {
		if f, ok := jsonField(t, field); !ok || (f.Type.Kind() != reflect.String && f.Type.Kind() != reflect.Pointer && !stringList(f.Type)) {
			panic(fmt.Sprintf("openapi: enum %v.%s names no string field", t, field))
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		jname, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && jname == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if jname == "" {
			jname = f.Name
		}
		s := g.Schema(f.Type)
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,") && omittable(f.Type)
		omitZero := strings.Contains(","+opts+",", ",omitzero,")
		if _, nullable := reflect.Zero(f.Type).Interface().(interface{ SchemaType() reflect.Type }); nullable && !omitZero {
			// omitempty never omits a struct: the document would call an
			// optional PATCH field required.
			panic(fmt.Sprintf("openapi: %v.%s is a Nullable without omitzero: tag it omitzero", t, f.Name))
		}
		if values, ok := g.Enums[t][jname]; ok {
			s = map[string]any{"type": "string", "enum": values}
			if stringList(f.Type) { // a list of the values (webhook events)
				s = map[string]any{"type": "array", "items": s}
			}
		}
		if f.Type.Kind() == reflect.Pointer && !omitEmpty && !omitZero {
			s = Nullable(s)
		}
		props[jname] = s
		if !omitEmpty && !omitZero {
			*required = append(*required, jname)
		}
	}
	for _, et := range embedded {
		inner := map[string]any{}
		var req []string
		g.fields(et, inner, &req)
		for k, v := range inner {
			if _, shadowed := props[k]; !shadowed {
				props[k] = v
				if slices.Contains(req, k) {
					*required = append(*required, k)
				}
			}
		}
	}
}

// omittable reports whether omitempty can leave out a value of t (it never
// leaves out a struct).
func omittable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Array:
		return t.Len() == 0
	}
	return true
}

// Nullable lets s be null too.
func Nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		out := map[string]any{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{typ, "null"}
		if e, ok := s["enum"].([]string); ok {
			vals := []any{}
			for _, v := range e {
				vals = append(vals, v)
			}
			out["enum"] = append(vals, nil)
		}
		return out
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// eventSchema registers Event: one of the event types of g.Events,
// told apart by type. Each type has its own Event.<type> schema, whose
// payload is EventPayload.<type>.
func (g *Generator) eventSchema() map[string]any {
	if g.Name("Event", eventType) {
		return Ref("Event")
	}
	types := g.Events.Types()
	var variants []any
	mapping := map[string]any{}
	for _, typ := range types {
		pname := "EventPayload." + typ
		g.Name(pname, nil)
		g.Schemas[pname] = g.Schema(reflect.TypeOf(g.Events[typ]))
		entity, _, _ := strings.Cut(typ, ".")
		base := g.Object(eventType)
		props := base["properties"].(map[string]any)
		props["type"] = map[string]any{"type": "string", "const": typ}
		props["entity_type"] = map[string]any{"type": "string", "const": entity}
		props["actor_kind"] = map[string]any{"type": "string", "enum": ActorKinds}
		props["payload"] = Ref(pname)
		vname := "Event." + typ
		g.Name(vname, nil)
		g.Schemas[vname] = base
		variants = append(variants, Ref(vname))
		mapping[typ] = "#/components/schemas/" + vname
	}
	g.Schemas["Event"] = map[string]any{
		"description":   "An entry of the event log; its payload's schema depends on its type (EventPayload.<type>).",
		"oneOf":         variants,
		"discriminator": map[string]any{"propertyName": "type", "mapping": mapping},
	}
	return Ref("Event")
}

// jsonField finds t's field (not of an embedded struct) with JSON name.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name || (n == "" && f.Name == name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
