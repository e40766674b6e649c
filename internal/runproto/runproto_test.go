package runproto

import (
	"fmt"
	"strings"
	"testing"
)

// A credential's %v never shows its secret.
func TestCredentialHidden(t *testing.T) {
	c := Credential{Username: "ballet", Secret: "s3cr3t"}
	for _, got := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %s", c, c, c), fmt.Sprint(&Session{Credential: &c})} {
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("%q shows the secret", got)
		}
	}
	if got := c.String(); got != "credential for ballet (hidden)" {
		t.Errorf("String() = %q", got)
	}
}
