package service

import (
	"reflect"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/openapi"
)

// eventPayloads is the catalogue of the service's event types, from the
// list the knowledge package owns.
var eventPayloads = event.NewCatalogue(knowledge.Events)

// OpenAPI is the OpenAPI 3.1 document of the route table (package
// openapi, as Core's), served at /api/v1/knowledge/openapi.json.
func (a *API) OpenAPI() map[string]any {
	g := openapi.NewGenerator(nil, eventPayloads)
	ops := a.kit.Operations(func(Perm) []any { return []any{map[string]any{"bearer": []any{}}} })
	paths := g.Paths(Prefix+"/", ops)
	g.Schemas["Error"] = g.Schema(reflect.TypeFor[ErrorBody]())
	g.Schema(reflect.TypeFor[event.Event]())
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Ballet Knowledge API", "version": "1",
			"description": "The Knowledge service: spaces, versioned entries and their search, per organization. Entry slugs hold slashes: send them escaped (%2F) in paths."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.Schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}
