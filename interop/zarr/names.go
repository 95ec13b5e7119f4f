package zarr

import (
	"fmt"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// Names. A node crosses under its path, unchanged, or not at all: a name
// is never rewritten. Both directions apply the engine's name rule
// (engine.ValidateName), which every name a create call accepts meets
// and which refuses what older scc files or a foreign store may hold
// (".", "..", empty components, control characters, bytes that are not
// UTF-8, a backslash, Zarr's metadata keys and v3's reserved "__"
// prefix). Export adds (zarrmap.NameErr, which a served view applies too):
//
//   - components starting with ".z", which v2 keeps for its metadata
//     keys;
//   - a dataset below another one ("a" and "a/b"): a Zarr array has no
//     children.
//
// Attribute names follow the engine's rule for them: 1 to
// engine.MaxAttrNameBytes bytes of UTF-8 without NUL; a Zarr attribute
// object may hold any JSON key.
//
// A name broken either way is left out and named with the rule in
// Report.Skipped (attributes: in the node's notes), unless
// Options.Strict, which refuses the whole store instead.

// checkNames refuses the first of names that zarrmap.NameErrs refuses.
func checkNames(names []string) error {
	bad := zarrmap.NameErrs(names)
	for _, n := range names {
		if err := bad[n]; err != nil {
			return err
		}
	}
	return nil
}

// attrNameErr is why the engine refuses name as an attribute name, or
// nil, checked before anything is written.
func attrNameErr(name string) error {
	if err := engine.ValidateAttrName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return nil
}
