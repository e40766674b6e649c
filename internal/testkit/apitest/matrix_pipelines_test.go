package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// minimalPipeline is a valid one-stage definition.
var minimalPipeline = map[string]any{"stages": []any{map[string]any{"id": "work", "kind": "agent"}}}

func init() {
	Register("GET /api/v1/projects/{project}/pipelines", Case{Prepare: fixed("/api/v1/projects/ACME/pipelines", nil), Want: ReadOK(200)})
	Register("GET /api/v1/projects/{project}/pipelines/{name}", Case{Prepare: fixed("/api/v1/projects/ACME/pipelines/default", nil), Want: ReadOK(200)})
	Register("GET /api/v1/projects/{project}/pipelines/{name}/versions", Case{Prepare: fixed("/api/v1/projects/ACME/pipelines/default/versions", nil), Want: ReadOK(200)})
	Register("PUT /api/v1/projects/{project}/pipelines/{name}", Case{
		Prepare: func(w *World) (string, any) {
			var p struct{ Version int64 }
			r := w.Do(BootstrapToken, "GET", "/api/v1/projects/ACME/pipelines/bug", nil)
			if r.Status == 200 {
				r.JSON(w.T, &p)
			}
			return "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": p.Version, "definition": minimalPipeline}
		},
		Want: AdminOK(200),
	})
	Register("POST /api/v1/pipelines/parse", Case{Prepare: fixed("/api/v1/pipelines/parse", map[string]any{"yaml": "stages: []"}), Want: AnyOK(200)})
	Register("POST /api/v1/pipelines/render", Case{Prepare: fixed("/api/v1/pipelines/render", map[string]any{"definition": minimalPipeline}), Want: AnyOK(200)})
}
