package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/budget"
)

// OpenAPI builds the OpenAPI 3.1 document of the route table.
func (a *API) OpenAPI() map[string]any {
	schemas := map[string]any{}
	paths := map[string]map[string]any{}
	param := regexp.MustCompile(`\{([a-z_]+)\}`)
	for _, rt := range a.routes {
		op := map[string]any{
			"summary":      rt.Summary,
			"x-permission": string(rt.Perm),
			"security":     []any{map[string]any{"bearer": []any{}}},
		}
		var params []any
		for _, m := range param.FindAllStringSubmatch(rt.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.Request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(rt.Request), schemas)}}}
		}
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		ok := map[string]any{"description": http.StatusText(status)}
		if rt.Response != nil {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(rt.Response), schemas)}}
		}
		errRef := map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
		op["responses"] = map[string]any{
			itoa(status): ok, "400": errRef, "401": errRef, "403": errRef, "404": errRef, "409": errRef, "413": errRef,
		}
		if paths[rt.Path] == nil {
			paths[rt.Path] = map[string]any{}
		}
		paths[rt.Path][strings.ToLower(rt.Method)] = op
	}
	schemas["Error"] = schemaOf(reflect.TypeOf(ErrorBody{}), schemas)
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Ballet Core API", "version": "v1"},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

var timeType = reflect.TypeOf(time.Time{})
var rawType = reflect.TypeOf(json.RawMessage{})
var dollarsType = reflect.TypeFor[budget.Dollars]()

// schemaOf returns a JSON schema for t, registering named structs.
func schemaOf(t reflect.Type, schemas map[string]any) map[string]any {
	if st, ok := reflect.Zero(t).Interface().(interface{ SchemaType() reflect.Type }); ok {
		return map[string]any{"anyOf": []any{schemaOf(st.SchemaType(), schemas), map[string]any{"type": "null"}}}
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{}
	case t == dollarsType:
		return map[string]any{"type": "number", "minimum": 0, "maximum": budget.MaxDollars, "multipleOf": 0.000001}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem(), schemas)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), schemas)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), schemas)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if name != "" {
			if _, ok := schemas[name]; ok {
				return map[string]any{"$ref": "#/components/schemas/" + name}
			}
			schemas[name] = map[string]any{} // placeholder for recursion
		}
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			jname, opts, _ := strings.Cut(tag, ",")
			if jname == "" {
				jname = f.Name
			}
			if f.Anonymous && tag == "" {
				if inner, ok := schemaOf(f.Type, schemas)["properties"].(map[string]any); ok {
					for k, v := range inner {
						props[k] = v
					}
				}
				continue
			}
			props[jname] = schemaOf(f.Type, schemas)
			if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				required = append(required, jname)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		if name == "" {
			return s
		}
		schemas[name] = s
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}
