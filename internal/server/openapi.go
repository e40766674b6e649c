package server

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

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apijson"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// OpenAPI builds the OpenAPI 3.1 document of the route table. Schemas come
// from the routes' Request and Response types by reflection, named after
// their Go types; events get one schema per type from EventPayloads. It
// panics on a programming error (two types with one name, an enum naming a
// field that does not exist), which every test that starts an API meets.
// Build it once: it is not cheap.
func (a *API) OpenAPI() map[string]any {
	g := newSchemaGen()
	paths := map[string]map[string]any{}
	param := regexp.MustCompile(`\{([a-z_]+)\}`)
	for _, rt := range a.routes {
		op := map[string]any{
			"operationId":  operationID(rt),
			"summary":      rt.Summary,
			"x-permission": string(rt.Perm),
			"security":     []any{map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}},
		}
		switch rt.Perm {
		case PermWebhook:
			op["security"] = []any{map[string]any{"giteaSignature": []any{}}, map[string]any{"githubSignature": []any{}}}
		case PermService:
			op["security"] = []any{map[string]any{"serviceCredential": []any{}}}
		case PermSignIn:
			op["security"] = []any{} // the credential is in the body
		}
		var params []any
		for _, m := range param.FindAllStringSubmatch(rt.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.RawBody != "" {
			op["requestBody"] = map[string]any{"required": !rt.OptionalBody, "content": map[string]any{
				rt.RawBody: map[string]any{"schema": map[string]any{"type": "string", "contentMediaType": rt.RawBody}}}}
		}
		if rt.Request != nil {
			op["requestBody"] = map[string]any{"required": !rt.OptionalBody, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.Request))}}}
		}
		responses := map[string]any{}
		for _, status := range rt.statuses() {
			switch {
			case status >= 400:
				schema := ref("Error")
				if rt.Serve != nil && rt.Response != nil { // a protocol's own errors too (MCP: JSON-RPC errors)
					schema = map[string]any{"anyOf": []any{ref("Error"), g.schema(reflect.TypeOf(rt.Response))}}
				}
				responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status),
					"content": map[string]any{"application/json": map[string]any{"schema": schema}}}
			case status == http.StatusNoContent || status == http.StatusAccepted || rt.Response == nil:
				responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status)}
			default:
				responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status),
					"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.Response))}}}
			}
		}
		op["responses"] = responses
		if paths[rt.Path] == nil {
			paths[rt.Path] = map[string]any{}
		}
		paths[rt.Path][strings.ToLower(rt.Method)] = op
	}
	g.schema(eventType) // the realtime API sends events too
	g.errorSchema()
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Ballet Core API", "version": "v1"},
		"paths":   paths,
		"components": map[string]any{
			"schemas": g.schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"serviceCredential": map[string]any{"type": "http", "scheme": "bearer",
					"description": "the Knowledge service credential ([knowledge] service_token); no user credential"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": "ballet_session",
					"description": "a browser session (POST /api/v1/session); writes must come from Ballet's own origin"},
				"giteaSignature": map[string]any{"type": "apiKey", "in": "header", "name": "X-Gitea-Signature",
					"description": "hex HMAC-SHA256 of the body under the project's repository.webhook_secret_ref"},
				"githubSignature": map[string]any{"type": "apiKey", "in": "header", "name": "X-Hub-Signature-256",
					"description": "sha256= and the hex HMAC-SHA256 of the body under the project's repository.webhook_secret_ref"}},
		},
	}
}

// statuses lists every status the route may answer: its success status,
// the alternatives it names, and the errors every route of its kind can
// give (a bad query or path, authentication, access, a missing resource,
// an internal error, an unavailable identity provider; writes also a
// conflict, bodies also one too slow or too large).
func (rt *Route) statuses() []int {
	status := rt.Status
	if status == 0 {
		status = http.StatusOK
	}
	out := []int{status, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusInternalServerError, http.StatusServiceUnavailable}
	if rt.Method != http.MethodGet {
		out = append(out, http.StatusConflict)
	}
	if rt.Request != nil || rt.RawBody != "" {
		out = append(out, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge)
	}
	if rt.RawBody != "" {
		out = append(out, http.StatusUnsupportedMediaType)
	}
	out = append(out, rt.Also...)
	sort.Ints(out)
	return slices.Compact(out)
}

// operationID names an operation after its method and path:
// GET /api/v1/items/{item}/flow → get_items_item_flow.
func operationID(rt *Route) string {
	p := strings.NewReplacer("/api/v1/", "", "{", "", "}", "", "/", "_").Replace(rt.Path)
	return strings.ToLower(rt.Method) + "_" + p
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

var (
	timeType  = reflect.TypeFor[time.Time]()
	rawType   = reflect.TypeFor[json.RawMessage]()
	eventType = reflect.TypeFor[event.Event]()

	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// Closed sets of values, from the constants the code uses.
var (
	roles       = []string{access.Viewer, access.Member, access.Admin}
	tokenKinds  = []string{auth.KindAPI, auth.KindRunner, auth.KindRun}
	actorKinds  = []string{event.ActorHuman, event.ActorService, event.ActorSystem}
	stageKinds  = []string{pipeline.KindAgent, pipeline.KindHuman, pipeline.KindPlatform}
	runStatuses = []string{run.StatusQueued, run.StatusRunning, run.StatusSucceeded, run.StatusFailed, run.StatusCancelled}
	errorCodes  = apijson.Codes() // every code writeErr answers
)

// enums are the closed sets of string fields: by Go type, JSON field name.
// pipeline.Stage has none: parse answers a definition as read, problems
// and all.
var enums = map[reflect.Type]map[string][]string{
	reflect.TypeFor[ErrorDetail]():                {"code": errorCodes},
	reflect.TypeFor[tracker.Item]():               {"state": tracker.States},
	reflect.TypeFor[ItemCreate]():                 {"state": {tracker.StateBacklog, tracker.StateReady}},
	reflect.TypeFor[ItemUpdate]():                 {"state": tracker.States},
	reflect.TypeFor[tracker.ItemStateChanged]():   {"from": tracker.States, "to": tracker.States},
	reflect.TypeFor[tracker.TicketStateChanged](): {"from": tracker.States, "to": tracker.States},
	reflect.TypeFor[tracker.EpicStateChanged]():   {"from": tracker.States, "to": tracker.States},
	reflect.TypeFor[tracker.TicketCreated]():      {"state": tracker.States},
	reflect.TypeFor[tracker.EpicCreated]():        {"state": tracker.States},
	reflect.TypeFor[tenancy.Member]():             {"role": roles},
	reflect.TypeFor[MemberSet]():                  {"role": roles},
	reflect.TypeFor[tenancy.MemberRoleSet]():      {"role": roles, "previous_role": roles},
	reflect.TypeFor[tenancy.MemberRemoved]():      {"previous_role": roles},
	reflect.TypeFor[tracker.ActorRef]():           {"kind": actorKinds},
	reflect.TypeFor[auth.Token]():                 {"kind": tokenKinds, "role": append([]string{auth.RolePlatformAdmin}, roles...)},
	reflect.TypeFor[TokenCreate]():                {"kind": tokenKinds},
	reflect.TypeFor[auth.TokenRevoked]():          {"kind": tokenKinds},
	reflect.TypeFor[auth.TokenCreated]():          {"kind": tokenKinds, "role": append([]string{auth.RolePlatformAdmin}, roles...)},
	reflect.TypeFor[StageView]():                  {"kind": stageKinds},
	reflect.TypeFor[run.Run]():                    {"status": runStatuses, "outcome": append([]string{""}, pipeline.Outcomes()...)},
	reflect.TypeFor[run.RunFinished]():            {"status": runStatuses, "outcome": append([]string{""}, pipeline.Outcomes()...)},
	reflect.TypeFor[run.RunCancelled]():           {"status": runStatuses},
	reflect.TypeFor[ReportIn]():                   {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[run.RunReported]():            {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[FlowView]():                   {"status": flowStatuses, "waiting": flowWaits, "outcome": pipeline.Outcomes(), "attention": flow.Attentions},
	reflect.TypeFor[needsme.Entry]():              {"kind": needsme.Kinds},
	reflect.TypeFor[flow.Summary]():               {"status": flowStatuses, "waiting": append([]string{""}, flowWaits...), "attention": append([]string{""}, flow.Attentions...)},
	reflect.TypeFor[flow.StageStarted]():          {"kind": stageKinds, "waiting": flowWaits},
	reflect.TypeFor[flow.StageFinished]():         {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowWaiting]():           {"waiting": flowWaits, "outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowStuck]():             {"waiting": flowWaits, "outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowDone]():              {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowFailed]():            {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowStopped]():           {"ticket_state": tracker.States},
	reflect.TypeFor[IntrospectOrg]():              {"role": roles},
	reflect.TypeFor[IntrospectAnswer]():           {"kind": {event.ActorHuman, event.ActorService}},
}

// schemaGen turns Go types into JSON schemas (2020-12, as OpenAPI 3.1 has
// them), registering named structs under components/schemas.
type schemaGen struct {
	schemas map[string]any
	types   map[string]reflect.Type // the Go type behind each named schema
}

func newSchemaGen() *schemaGen {
	return &schemaGen{schemas: map[string]any{}, types: map[string]reflect.Type{}}
}

// name registers t under name, or reports that it is there already. Two
// Go types with one name would make one schema lie: that panics.
func (g *schemaGen) name(name string, t reflect.Type) (exists bool) {
	if prev, ok := g.types[name]; ok {
		if prev != t {
			panic(fmt.Sprintf("openapi: schema %s is both %v and %v: rename one", name, prev, t))
		}
		return true
	}
	g.types[name] = t
	g.schemas[name] = map[string]any{} // placeholder while the type recurses
	return false
}

// schema returns the schema of t: a $ref for named structs. A type that
// encodes itself says how: SchemaType (a Nullable's value type) or
// JSONSchema.
func (g *schemaGen) schema(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		return g.schema(t.Elem())
	}
	switch v := reflect.Zero(t).Interface().(type) {
	case interface{ SchemaType() reflect.Type }:
		return nullable(g.schema(v.SchemaType()))
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
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		if !g.name(t.Name(), t) {
			g.schemas[t.Name()] = g.object(t)
		}
		return ref(t.Name())
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

// object is the schema of struct t: its JSON fields as encoding/json
// writes them, embedded structs flattened.
func (g *schemaGen) object(t reflect.Type) map[string]any {
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

// fields adds t's JSON fields to props: a field is required unless
// omitempty can omit it or it is omitzero; a pointer that is not omitted
// when nil may be null. A field of t shadows one of an embedded struct.
func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	var embedded []reflect.Type
	for field := range enums[t] {
		if f, ok := jsonField(t, field); !ok || (f.Type.Kind() != reflect.String && f.Type.Kind() != reflect.Pointer) {
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
		s := g.schema(f.Type)
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,") && omittable(f.Type)
		omitZero := strings.Contains(","+opts+",", ",omitzero,")
		if _, nullable := reflect.Zero(f.Type).Interface().(interface{ SchemaType() reflect.Type }); nullable && !omitZero {
			// omitempty never omits a struct: the document would call an
			// optional PATCH field required.
			panic(fmt.Sprintf("openapi: %v.%s is a Nullable without omitzero: tag it omitzero", t, f.Name))
		}
		if values, ok := enums[t][jname]; ok {
			s = map[string]any{"type": "string", "enum": values}
		}
		if f.Type.Kind() == reflect.Pointer && !omitEmpty && !omitZero {
			s = nullable(s)
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

// nullable lets s be null too.
func nullable(s map[string]any) map[string]any {
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

// eventSchema registers Event: one of the event types of EventPayloads,
// told apart by type. Each type has its own Event.<type> schema, whose
// payload is EventPayload.<type>.
func (g *schemaGen) eventSchema() map[string]any {
	if g.name("Event", eventType) {
		return ref("Event")
	}
	types := EventTypes()
	var variants []any
	mapping := map[string]any{}
	for _, typ := range types {
		pname := "EventPayload." + typ
		g.name(pname, nil)
		g.schemas[pname] = g.schema(reflect.TypeOf(EventPayloads[typ]))
		entity, _, _ := strings.Cut(typ, ".")
		base := g.object(eventType)
		props := base["properties"].(map[string]any)
		props["type"] = map[string]any{"type": "string", "const": typ}
		props["entity_type"] = map[string]any{"type": "string", "const": entity}
		props["actor_kind"] = map[string]any{"type": "string", "enum": actorKinds}
		props["payload"] = ref(pname)
		vname := "Event." + typ
		g.name(vname, nil)
		g.schemas[vname] = base
		variants = append(variants, ref(vname))
		mapping[typ] = "#/components/schemas/" + vname
	}
	g.schemas["Event"] = map[string]any{
		"description":   "An entry of the event log; its payload's schema depends on its type (EventPayload.<type>).",
		"oneOf":         variants,
		"discriminator": map[string]any{"propertyName": "type", "mapping": mapping},
	}
	return ref("Event")
}

// errorSchema registers Error, the one error body, with its details: field
// problems or pipeline problems.
func (g *schemaGen) errorSchema() {
	g.schemas["Error"] = g.schema(reflect.TypeFor[ErrorBody]())
	detail := g.schemas["ErrorDetail"].(map[string]any)
	detail["properties"].(map[string]any)["details"] = map[string]any{"type": "array", "items": map[string]any{
		"anyOf": []any{g.schema(reflect.TypeFor[apperr.FieldError]()), g.schema(reflect.TypeFor[pipeline.Problem]())}}}
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
