package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
)

type fuzzBody struct {
	Name    string            `json:"name"`
	Version *int64            `json:"version"`
	Tags    []string          `json:"tags,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Nested  *struct {
		On bool `json:"on"`
	} `json:"nested,omitempty"`
}

// FuzzDecode: any body decodes or fails with an application error that has
// a code, a message and a status — never a panic, never a 500.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"a","version":1}`, `{"name":1}`, `{"x":1}`, `{`, ``, `[]`, `{} {}`,
		`{"tags":["a",2]}`, `{"labels":{"a":"b"}}`, `{"nested":{"on":"yes"}}`, `{"version":1e400}`} {
		f.Add([]byte(s))
	}
	api := &API{maxBody: 4096}
	f.Fuzz(func(t *testing.T, b []byte) {
		hr := httptest.NewRequest("POST", "/x", bytes.NewReader(b))
		rec := httptest.NewRecorder()
		hr.Body = http.MaxBytesReader(rec, hr.Body, api.maxBody)
		r := &Request{Request: hr, api: api}
		var v fuzzBody
		err := r.Decode(&v)
		if err == nil {
			return
		}
		code := apperr.Code(err)
		if code == apperr.Internal || statusOf[code] == 0 || statusOf[code] >= 500 || err.Error() == "" {
			t.Fatalf("body %q: %v (code %s)", b, err, code)
		}
	})
}
