package hdf5

import (
	"fmt"

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
// nil, checked before anything is written.
func attrNameErr(name string) error {
	if err := engine.ValidateAttrName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return nil
}
