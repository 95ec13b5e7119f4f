package invariants

import (
	"strings"
	"testing"
)

func TestViolationNamesItself(t *testing.T) {
	err := Violation("block %d freed twice", 7)
	if !strings.Contains(err.Error(), "invariant violated: block 7 freed twice") {
		t.Fatalf("%v", err)
	}
}

// TestEnabledMatchesTag: the constant follows the build tag (the test is
// run both ways by make test).
func TestEnabledMatchesTag(t *testing.T) {
	if Enabled != tagged {
		t.Fatalf("Enabled = %v, built with the invariants tag: %v", Enabled, tagged)
	}
}
