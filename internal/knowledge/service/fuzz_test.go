package service_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// FuzzDecodeBodies sends arbitrary bodies to every route that takes one:
// the answer is never a 5xx.
func FuzzDecodeBodies(f *testing.F) {
	for _, s := range []string{`{"slug":"a","title":"t","body":"b","tags":["x"]}`, `{"version":1,"title":"t","body":"b"}`,
		`{"version":1,"based_on":1}`, `{"slug":"ops"}`, `{"slug":"a","title":"t","body":"b\u0000"}`, `{"tags":null}`, `[]`, `"`, "\xff"} {
		f.Add(s)
	}
	env := newEnv(f, storetest.OpenWith(f, "sqlite", knowledge.Migrations))
	env.must(201, "ann-token", "POST", base+"/spaces/default/entries", map[string]any{"slug": "seed", "title": "Seed", "body": "b"})
	f.Fuzz(func(t *testing.T, body string) {
		for _, target := range []string{"POST " + base + "/spaces", "POST " + base + "/spaces/default/entries",
			"PUT " + base + "/spaces/default/entries/seed", "POST " + base + "/spaces/default/entries/seed/restore"} {
			method, path, _ := strings.Cut(target, " ")
			r := httptest.NewRequest(method, path, strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer ann-token")
			rec := httptest.NewRecorder()
			env.h.ServeHTTP(rec, r)
			if rec.Code >= 500 {
				t.Fatalf("%s %q: %d %s", target, body, rec.Code, rec.Body)
			}
		}
	})
}
