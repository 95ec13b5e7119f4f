package hdf5

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/scc-dev/scc/engine"
)

// Names. A dataset or group crosses under its path, unchanged, or not at
// all: a name is never rewritten. Both directions apply the engine's name
// rule (engine.ValidateName), which every name a create call accepts
// meets and HDF5 holds as it is. What it refuses may still be met: older
// scc files may hold "." components (which HDF5 would resolve away,
// creating another path) or NUL (which ends a name in HDF5's C API), and
// an HDF5 link may be named "..", hold control characters or bytes that
// are not UTF-8. Attribute names follow the engine's rule for them (1 to
// engine.MaxAttrNameBytes bytes of UTF-8 without NUL). A name broken
// either way is left out and named with the rule (datasets and groups in
// Report.Skipped, attributes in the attribute notes), unless
// Options.Strict, which refuses instead.

// nameErr is why an object named name cannot cross (the engine's
// refusal, engine.ErrInvalid), or nil.
func nameErr(name string) error { return engine.ValidateName(name) }

// attrNameErr is why the engine refuses name as an attribute name, or
// nil: its rule for attribute names, applied before anything is set.
func attrNameErr(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: attribute name %q: %s", ErrUnsupported, name, why)
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > engine.MaxAttrNameBytes:
		return bad(fmt.Sprintf("%d bytes (at most %d)", len(name), engine.MaxAttrNameBytes))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case slices.Contains([]byte(name), 0):
		return bad("holds NUL")
	}
	return nil
}
