// What every door shares on the wire: the one error shape, the status of
// each application error code, the answer writer, the errors of strict
// body decoding, and the reading of numeric and boolean query parameters —
// so that every service answers a client alike.

package door

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/strictjson"
)

// ErrorBody is the APIs' one error shape.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a machine code, a message and optional details.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

var statusOf = map[string]int{
	apperr.Invalid:         http.StatusBadRequest,
	apperr.Unauthenticated: http.StatusUnauthorized,
	apperr.Forbidden:       http.StatusForbidden,
	apperr.NotFound:        http.StatusNotFound,
	apperr.Conflict:        http.StatusConflict,
	apperr.Timeout:         http.StatusRequestTimeout,
	apperr.NotAllowed:      http.StatusMethodNotAllowed,
	apperr.TooLarge:        http.StatusRequestEntityTooLarge,
	apperr.Unsupported:     http.StatusUnsupportedMediaType,
	apperr.Unprocessable:   http.StatusUnprocessableEntity,
	apperr.Gone:            http.StatusGone,
	apperr.Unavailable:     http.StatusServiceUnavailable,
	apperr.Internal:        http.StatusInternalServerError,
}

// Status is the HTTP status of an application error code, and false for a
// code without one.
func Status(code string) (int, bool) {
	s, ok := statusOf[code]
	return s, ok
}

// Write writes v as a JSON answer with status.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes the error shape.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	Write(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

// WriteApp writes an application error in the error shape, with its code's
// status (500 for a code without one).
func WriteApp(w http.ResponseWriter, ae *apperr.Error) {
	status, ok := Status(ae.Code)
	if !ok {
		status = http.StatusInternalServerError
	}
	Write(w, status, ErrorBody{Error: ErrorDetail{Code: ae.Code, Message: ae.Message, Details: ae.Details}})
}

// DecodeError turns what strict decoding of a request body returned into
// the client's error: too large (limit bytes), too slow, malformed, or the
// field at fault; nil stays nil.
func DecodeError(err error, limit int64) error {
	var (
		mbe *http.MaxBytesError
		se  *strictjson.Error
		ne  net.Error
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return apperr.New(apperr.TooLarge, "request body exceeds %d bytes", limit)
	case errors.As(err, &ne) && ne.Timeout():
		return apperr.New(apperr.Timeout, "the request body did not arrive within the server's read timeout")
	case errors.As(err, &se) && se.Field == "":
		return apperr.New(apperr.Invalid, "request body %s", se.Message)
	case errors.As(err, &se):
		return apperr.Fields([]apperr.FieldError{{Field: se.Field, Message: se.Message}})
	}
	return apperr.New(apperr.Invalid, "request body could not be read: %v", err)
}

// QueryInt reads an optional integer query parameter within [min, max]
// (def when absent).
func QueryInt(r *http.Request, name string, def, min, max int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min || n > max {
		return 0, apperr.Fields([]apperr.FieldError{{Field: name, Message: fmt.Sprintf("must be an integer from %d to %d, not %q", min, max, s)}})
	}
	return n, nil
}

// QueryBool reads an optional boolean query parameter (true or false;
// false when absent).
func QueryBool(r *http.Request, name string) (bool, error) {
	switch s := r.URL.Query().Get(name); s {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, apperr.Fields([]apperr.FieldError{{Field: name, Message: fmt.Sprintf("must be true or false, not %q", s)}})
	}
}

// CodeOf is the application error code answered with an HTTP status, and
// false for a status no code has.
func CodeOf(status int) (string, bool) {
	for c, s := range statusOf {
		if s == status {
			return c, true
		}
	}
	return "", false
}

// Codes lists every application error code the APIs answer, sorted.
func Codes() []string { return slices.Sorted(maps.Keys(statusOf)) }

// Headers wraps a service's whole handler: every answer carries
// Cache-Control: no-store (an answer may hold a token, a run token or a
// person's data: no browser or proxy cache may keep it),
// X-Content-Type-Options: nosniff (a JSON answer is never read as HTML or
// script), X-Frame-Options: DENY and a Content-Security-Policy that lets
// nothing load, run or frame it. They are set before next runs, so a
// handler that serves something else (the web UI's page and assets, with
// their own caching and policy) replaces them with Set.
func Headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range secureHeaders {
			h[k] = []string{v}
		}
		next.ServeHTTP(w, r)
	})
}

// secureHeaders are the headers Headers sets, by canonical name.
var secureHeaders = map[string]string{
	"Cache-Control":           "no-store",
	"X-Content-Type-Options":  "nosniff",
	"X-Frame-Options":         "DENY",
	"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; sandbox",
}

// DropHeaders removes what Headers sets from h, the answer of another
// service a proxy passes on (Headers sets its own; two values are
// ambiguous to a browser).
func DropHeaders(h http.Header) {
	for k := range secureHeaders {
		h.Del(k)
	}
}
