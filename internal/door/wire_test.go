package door

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
)

// TestEachStatusHasOneCode: CodeOf names the code of a status written
// without one (a plain-text error turned into the error shape), so no two
// codes may share a status, and every code round-trips.
func TestEachStatusHasOneCode(t *testing.T) {
	seen := map[int]string{}
	for _, c := range Codes() {
		s, ok := Status(c)
		if !ok || s < 400 {
			t.Fatalf("code %q: status %d, %v", c, s, ok)
		}
		if other, dup := seen[s]; dup {
			t.Fatalf("codes %q and %q share status %d", other, c, s)
		}
		seen[s] = c
		if back, ok := CodeOf(s); !ok || back != c {
			t.Fatalf("CodeOf(%d) = %q, %v; want %q", s, back, ok, c)
		}
	}
	if _, ok := CodeOf(http.StatusTeapot); ok {
		t.Fatal("a status no code has was given one")
	}
}

func TestWriteAppUnknownCodeIs500(t *testing.T) {
	w := httptest.NewRecorder()
	WriteApp(w, &apperr.Error{Code: "no_such_code", Message: "m"})
	if w.Code != http.StatusInternalServerError || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
}
