// Package openapitest checks what Core sends against the OpenAPI 3.1
// document Core serves, with a real OpenAPI validator
// (github.com/pb33f/libopenapi-validator, which validates JSON Schema
// 2020-12): every response an API test sees (Handler), and every event a
// test wrote (Event), against the schema of its type.
package openapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
)

// Doc is a loaded OpenAPI document, safe for concurrent use.
type Doc struct {
	v        validator.Validator
	sv       schema_validation.SchemaValidator
	ops      *http.ServeMux          // the documented operations
	events   map[string]*base.Schema // Event.<type> by type
	payloads map[string]*base.Schema // EventPayload.<type> by type
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*Doc{}
)

// Load parses and compiles an OpenAPI document. Documents are cached by
// content: every test API of a process serves the same one, and compiling
// it is the expensive part.
func Load(doc []byte) (*Doc, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if d, ok := cache[string(doc)]; ok {
		return d, nil
	}
	d, err := load(doc)
	if err != nil {
		return nil, err
	}
	cache[string(doc)] = d
	return d, nil
}

// Served loads the document h serves at /api/v1/openapi.json.
func Served(h http.Handler) (*Doc, error) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/openapi.json: %d %s", rec.Code, rec.Body)
	}
	return Load(rec.Body.Bytes())
}

func load(doc []byte) (*Doc, error) {
	var raw struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("read the document: %w", err)
	}
	if !strings.HasPrefix(raw.OpenAPI, "3.1") {
		return nil, fmt.Errorf("openapi %q: this checker expects 3.1", raw.OpenAPI)
	}
	document, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("parse the document: %w", err)
	}
	model, err := document.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the document's model: %w", err)
	}
	v, errs := validator.NewValidator(document, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("compile the document: %w", errors.Join(errs...))
	}
	d := &Doc{
		v:        v,
		sv:       schema_validation.NewSchemaValidator(config.WithFormatAssertions()),
		ops:      http.NewServeMux(),
		events:   map[string]*base.Schema{},
		payloads: map[string]*base.Schema{},
	}
	if ok, errs := d.v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("the document is not valid OpenAPI: %w", joined(errs))
	}
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for path, ops := range raw.Paths {
		for method := range ops {
			d.ops.Handle(strings.ToUpper(method)+" "+path, nop)
		}
	}
	for s := model.Model.Components.Schemas.First(); s != nil; s = s.Next() {
		if typ, ok := strings.CutPrefix(s.Key(), "Event."); ok {
			d.events[typ] = s.Value().Schema()
		}
		if typ, ok := strings.CutPrefix(s.Key(), "EventPayload."); ok {
			d.payloads[typ] = s.Value().Schema()
		}
	}
	if len(d.events) == 0 || len(d.events) != len(d.payloads) {
		return nil, fmt.Errorf("the document has %d Event.<type> and %d EventPayload.<type> schemas", len(d.events), len(d.payloads))
	}
	return d, nil
}

// Documented reports whether the request's method and path are an
// operation of the document.
func (d *Doc) Documented(r *http.Request) bool {
	_, pattern := d.ops.Handler(r)
	return pattern != ""
}

// Response checks a response to r (a documented operation) against the
// document: its status must be documented, its body must match the
// status's schema.
func (d *Doc) Response(r *http.Request, status int, header http.Header, body []byte) error {
	resp := &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)), Request: r}
	if ok, errs := d.v.ValidateHttpResponse(r, resp); !ok {
		return fmt.Errorf("%s %s answered %d, which the OpenAPI document does not allow: %w\nbody: %s",
			r.Method, r.URL.Path, status, joined(errs), excerpt(body))
	}
	return nil
}

// Event checks one event, as the API sends it, against the schema of its
// type (Event.<type>). A type the document lacks is missing from the
// catalogue, event/catalogue.Core.
func (d *Doc) Event(raw []byte) error {
	var e struct {
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("event %s: %w", excerpt(raw), err)
	}
	s, ok := d.events[e.Type]
	if !ok {
		return fmt.Errorf("event seq %d has type %q, which is not in the catalogue (event/catalogue.Core): %s", e.Seq, e.Type, excerpt(raw))
	}
	if ok, errs := d.sv.ValidateSchemaBytes(s, raw); !ok {
		return fmt.Errorf("event seq %d (%s) does not match its schema Event.%s: %w\nevent: %s", e.Seq, e.Type, e.Type, joined(errs), excerpt(raw))
	}
	return nil
}

// Payload checks an event's payload against the schema of its type
// (EventPayload.<type>), for callers that read the log from the database.
func (d *Doc) Payload(typ string, payload []byte) error {
	s, ok := d.payloads[typ]
	if !ok {
		return fmt.Errorf("event type %q is not in the catalogue (event/catalogue.Core): payload %s", typ, excerpt(payload))
	}
	if ok, errs := d.sv.ValidateSchemaBytes(s, payload); !ok {
		return fmt.Errorf("payload of %s does not match its schema EventPayload.%s: %w\npayload: %s", typ, typ, joined(errs), excerpt(payload))
	}
	return nil
}

// Handler serves h, checking every response to a documented operation
// against the document before the client sees it; fail reports a mismatch
// (the test's Errorf). WebSocket upgrades pass through unchecked.
func (d *Doc) Handler(fail func(format string, args ...any), h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || !d.Documented(r) {
			h.ServeHTTP(w, r)
			return
		}
		rec := &recorder{ResponseWriter: w, header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == 0 && rec.body.Len() == 0 && r.Context().Err() != nil {
			return // the client left before an answer (a long poll it gave up): nothing was answered
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if err := d.Response(r, rec.status, rec.header, rec.body.Bytes()); err != nil {
			fail("%v", err)
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	})
}

// recorder holds a response until it has been checked.
type recorder struct {
	http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func joined(errs []*verrors.ValidationError) error {
	var out []error
	for _, e := range errs {
		msg := e.Message
		if e.Reason != "" && e.Reason != e.Message {
			msg += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			loc := f.FieldPath
			if loc == "" {
				loc = "/" + strings.Join(f.InstancePath, "/")
			}
			msg += fmt.Sprintf("\n    at %s: %s (schema %s)", loc, f.Reason, f.KeywordLocation)
		}
		out = append(out, errors.New(msg))
	}
	return errors.Join(out...)
}

func excerpt(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
