package apperr

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidatorLimitsProblems: a list of many bad entries yields the first
// MaxFieldErrors problems and their total, not one problem per entry.
func TestValidatorLimitsProblems(t *testing.T) {
	var v Validator
	for i := range 100_000 {
		v.Add(fmt.Sprintf("ticket_types[%d]", i), "%q is invalid", "X")
	}
	var e *Error
	if err := v.Err(); err == nil || !strings.Contains(err.Error(), "100000 invalid fields; the first 100 are listed") {
		t.Fatalf("err %v", err)
	} else {
		e = err.(*Error)
	}
	fe := e.FieldErrors()
	if len(fe) != MaxFieldErrors || fe[0].Field != "ticket_types[0]" || fe[MaxFieldErrors-1].Field != "ticket_types[99]" {
		t.Fatalf("%d field errors: %v …", len(fe), fe[0])
	}

	v = Validator{}
	v.Add("name", "is required")
	if err := v.Err(); err.(*Error).Message != "name: is required" || len(err.(*Error).FieldErrors()) != 1 {
		t.Fatalf("one problem: %v", err)
	}
}
