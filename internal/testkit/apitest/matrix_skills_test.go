package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// newSkill creates a skill in project ACME as the platform admin and
// returns its name.
func newSkill(w *World) string {
	name := fmt.Sprintf("skill-%d", w.Unique())
	w.Admin(201, "POST", "/api/v1/projects/"+w.KeyA+"/skills", map[string]any{"name": name, "description": "d", "content": "c"})
	return name
}

func init() {
	const base = "/api/v1/projects/ACME/skills"
	Register("GET /api/v1/projects/{project}/skills", Case{Prepare: fixed(base, nil), Want: ReadOK(200)})
	Register("POST /api/v1/projects/{project}/skills", Case{
		Prepare: func(w *World) (string, any) {
			return base, map[string]any{"name": fmt.Sprintf("new-skill-%d", w.Unique()), "content": "do it well"}
		},
		Want: AdminOK(201),
	})
	Register("GET /api/v1/projects/{project}/skills/{name}", Case{
		Prepare: func(w *World) (string, any) { return base + "/" + newSkill(w), nil },
		Want:    ReadOK(200),
	})
	Register("GET /api/v1/projects/{project}/skills/{name}/versions", Case{
		Prepare: func(w *World) (string, any) { return base + "/" + newSkill(w) + "/versions", nil },
		Want:    ReadOK(200),
	})
	Register("PUT /api/v1/projects/{project}/skills/{name}", Case{
		Prepare: func(w *World) (string, any) {
			return base + "/" + newSkill(w), map[string]any{"version": 1, "content": "better"}
		},
		Want: AdminOK(200),
	})
	Register("DELETE /api/v1/projects/{project}/skills/{name}", Case{
		Prepare: func(w *World) (string, any) { return base + "/" + newSkill(w), nil },
		Want:    AdminOK(204),
	})
}
