package fault

import (
	"os"
	"os/exec"
	"testing"
)

func TestHitKillsAtTheArmedPass(t *testing.T) {
	if os.Getenv("FAULT_CHILD") == "1" {
		for i := 1; i <= 5; i++ {
			Hit("other")
			Hit("commit:x")
			os.Stdout.WriteString("pass\n")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestHitKillsAtTheArmedPass")
	cmd.Env = append(os.Environ(), "FAULT_CHILD=1", EnvVar+"=commit:x:3")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ProcessState.String() != "signal: killed" {
		t.Fatalf("want the child killed, got %v", err)
	}
	if string(out) != "pass\npass\n" {
		t.Fatalf("child passed %q before the fault, want two passes", out)
	}
}

func TestUnarmedDoesNothing(t *testing.T) {
	if Armed() && os.Getenv(EnvVar) == "" {
		t.Fatal("armed without the variable")
	}
	Hit("anything")
}
