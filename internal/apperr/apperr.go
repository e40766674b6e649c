// Package apperr is Ballet's one application error type: a machine code, a
// human message and optional details (for example every invalid field).
// Domain code returns these; the HTTP layer maps codes to statuses in one
// table and logs only internal errors.
package apperr

import (
	"errors"
	"fmt"
)

// Codes.
const (
	Invalid         = "invalid"         // 400: bad input
	Unauthenticated = "unauthenticated" // 401
	Forbidden       = "forbidden"       // 403
	NotFound        = "not_found"       // 404
	Conflict        = "conflict"        // 409: stale version, state does not allow it, duplicate
	Timeout         = "timeout"         // 408: the request did not arrive in time
	NotAllowed      = "not_allowed"     // 405: a protocol's endpoint does not take this method
	TooLarge        = "too_large"       // 413
	Unsupported     = "unsupported"     // 415: a body of another media type than the route takes
	Unprocessable   = "unprocessable"   // 422: well-formed but not allowed (e.g. a cycle)
	Gone            = "gone"            // 410: it was there, and was deleted for good (a run's log past [retention] run_logs)
	Unavailable     = "unavailable"     // 503
	Internal        = "internal"        // 500
)

// Error is an application error.
type Error struct {
	Code    string
	Message string
	Details any // []FieldError, or a domain's own problem list
}

// FieldError names one problem with one input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if fe, ok := e.Details.([]FieldError); ok && len(fe) > 0 {
		return fmt.Sprintf("%s (%d problems)", e.Message, len(fe))
	}
	return e.Message
}

// New returns an Error with a formatted message.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Fields returns an Invalid error listing every field problem.
func Fields(problems []FieldError) *Error {
	if len(problems) == 1 {
		return &Error{Code: Invalid, Message: problems[0].Field + ": " + problems[0].Message, Details: problems}
	}
	return &Error{Code: Invalid, Message: fmt.Sprintf("%d invalid fields", len(problems)), Details: problems}
}

// Code returns err's code, Internal for anything that is not an *Error.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MaxFieldErrors bounds the problems one error lists: a body with a list
// of a hundred thousand bad entries gets the first ones, and their count.
const MaxFieldErrors = 100

// Validator collects field problems (the first MaxFieldErrors; the rest are
// counted).
type Validator struct {
	Problems []FieldError
	more     int // problems beyond MaxFieldErrors
}

// Add records a problem.
func (v *Validator) Add(field, format string, args ...any) {
	if len(v.Problems) >= MaxFieldErrors {
		v.more++
		return
	}
	v.Problems = append(v.Problems, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Check records a problem when ok is false.
func (v *Validator) Check(ok bool, field, format string, args ...any) {
	if !ok {
		v.Add(field, format, args...)
	}
}

// CheckErr records err's message as field's problem when err is not nil
// (for checks that explain themselves, such as text.Line).
func (v *Validator) CheckErr(field string, err error) {
	if err != nil {
		v.Add(field, "%s", err.Error())
	}
}

// Err returns the collected problems as one error, or nil.
func (v *Validator) Err() error {
	if len(v.Problems) == 0 {
		return nil
	}
	e := Fields(v.Problems)
	if v.more > 0 {
		e.Message = fmt.Sprintf("%d invalid fields; the first %d are listed", len(v.Problems)+v.more, len(v.Problems))
	}
	return e
}

// FieldErrors returns the field problems of an Invalid error (nil when the
// details are something else).
func (e *Error) FieldErrors() []FieldError {
	fe, _ := e.Details.([]FieldError)
	return fe
}
