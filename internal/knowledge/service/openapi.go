package service

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
)

// eventPayloads is the catalogue of the service's event types, from the
// list the knowledge package owns.
var eventPayloads = event.NewCatalogue(knowledge.Events)

// statuses every route may answer besides its success.
func (rt *Route) statuses() []int {
	out := []int{rt.Status, 401, 403, 404, 500, 503}
	if out[0] == 0 {
		out[0] = 200
	}
	if rt.Request != nil || len(rt.Query) > 0 {
		out = append(out, 400)
	}
	if rt.Request != nil {
		out = append(out, 408, 413)
	}
	if rt.Method != "GET" {
		out = append(out, 409)
	}
	return out
}

// OpenAPI is the OpenAPI 3.1 document of the route table, served at
// /api/v1/knowledge/openapi.json.
func (a *API) OpenAPI() map[string]any {
	g := &schemas{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	param := regexp.MustCompile(`\{([a-z_]+)\}`)
	for _, rt := range a.routes {
		path := Prefix + rt.Path
		var params []any
		for _, m := range param.FindAllStringSubmatch(path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.Query {
			s := map[string]any{"type": q.Type}
			if q.Repeat {
				s = map[string]any{"type": "array", "items": s}
			}
			params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": s})
		}
		op := map[string]any{
			"operationId":  strings.ToLower(rt.Method) + strings.NewReplacer("/", "_", "{", "", "}", "").Replace(rt.Path),
			"summary":      rt.Summary,
			"x-permission": string(rt.Perm),
			"security":     []any{map[string]any{"bearer": []any{}}},
			"parameters":   params,
		}
		if rt.Request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": g.of(reflect.TypeOf(rt.Request))}}}
		}
		responses := map[string]any{}
		for _, st := range rt.statuses() {
			schema := map[string]any{"$ref": "#/components/schemas/Error"}
			if st < 400 {
				schema = g.of(reflect.TypeOf(rt.Response))
			}
			responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st),
				"content": map[string]any{"application/json": map[string]any{"schema": schema}}}
		}
		op["responses"] = responses
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(rt.Method)] = op
	}
	g.defs["Error"] = g.of(reflect.TypeOf(ErrorBody{}))
	for typ, p := range eventPayloads {
		ev := g.object(reflect.TypeOf(event.Event{}))
		props := ev["properties"].(map[string]any)
		props["type"] = map[string]any{"const": typ}
		props["payload"] = map[string]any{"$ref": "#/components/schemas/EventPayload." + typ}
		g.defs["EventPayload."+typ] = g.of(reflect.TypeOf(p))
		g.defs["Event."+typ] = ev
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Ballet Knowledge API", "version": "1",
			"description": "The Knowledge service: spaces, versioned entries and their search, per organization. Entry slugs hold slashes: send them escaped (%2F) in paths."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

// schemas builds JSON schemas of Go types by reflection: named structs
// become components.
type schemas struct{ defs map[string]any }

var timeType = reflect.TypeFor[time.Time]()
var rawType = reflect.TypeFor[json.RawMessage]()

func (g *schemas) of(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // a placeholder against recursion
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic("openapi: no schema for " + t.String())
}

func (g *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	req := []string{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.of(f.Type)
		if f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Slice {
			s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		props[name] = s
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			req = append(req, name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}
