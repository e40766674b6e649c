package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// matrixItem creates a task in ACME as the platform admin and returns its
// key.
func matrixItem(w *World) string {
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": fmt.Sprintf("Matrix %d", w.Unique())}).JSON(w.T, &it)
	return it.Key
}

// matrixQuestion asks a question on a new ACME task and returns its id.
func matrixQuestion(w *World) string {
	var q struct{ ID string }
	w.Admin(201, "POST", "/api/v1/items/"+matrixItem(w)+"/questions", map[string]any{"text": "Why?", "blocking": true}).JSON(w.T, &q)
	return q.ID
}

func init() {
	Register("POST /api/v1/projects/{project}/items", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": fmt.Sprintf("New %d", w.Unique())}
		},
		Want: WriteOK(201),
	})
	Register("GET /api/v1/projects/{project}/items", Case{Prepare: fixed("/api/v1/projects/ACME/items", nil), Want: ReadOK(200)})
	Register("GET /api/v1/items/{item}", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w), nil },
		Want:    ReadOK(200),
	})
	Register("PATCH /api/v1/items/{item}", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/items/" + matrixItem(w), map[string]any{"version": 1, "title": "Renamed", "state": "ready"}
		},
		Want: WriteOK(200),
	})
	Register("POST /api/v1/items/{item}/blockers/{blocker}", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/items/" + matrixItem(w) + "/blockers/" + matrixItem(w), nil
		},
		Want: WriteOK(201),
	})
	Register("DELETE /api/v1/items/{item}/blockers/{blocker}", Case{
		Prepare: func(w *World) (string, any) {
			path := "/api/v1/items/" + matrixItem(w) + "/blockers/" + matrixItem(w)
			w.Admin(201, "POST", path, nil)
			return path, nil
		},
		Want: WriteOK(204),
	})
	Register("GET /api/v1/items/{item}/questions", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w) + "/questions", nil },
		Want:    ReadOK(200),
	})
	Register("POST /api/v1/items/{item}/questions", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/items/" + matrixItem(w) + "/questions", map[string]any{"text": "Which database?", "blocking": true}
		},
		Want: WriteOK(201),
	})
	Register("POST /api/v1/questions/{id}/answer", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/questions/" + matrixQuestion(w) + "/answer", map[string]any{"answer": "SQLite"}
		},
		Want: WriteOK(200),
	})
	Register("GET /api/v1/items/{item}/events", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w) + "/events", nil },
		Want:    ReadOK(200),
	})
	Register("GET /api/v1/projects/{project}/events", Case{Prepare: fixed("/api/v1/projects/ACME/events?after=0&limit=5", nil), Want: ReadOK(200)})
}
