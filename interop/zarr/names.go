package zarr

import (
	"fmt"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// Names. A node crosses under its path, unchanged, or not at all: a name
// is never rewritten. Both directions apply the engine's name rule
// (engine.ValidateName), which every name a create call accepts meets
// and which refuses what older scc files or a foreign store may hold
// (".", "..", empty components, control characters, bytes that are not
// UTF-8, a backslash, Zarr's metadata keys and v3's reserved "__"
// prefix). Export adds:
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

// nameErr is why name cannot cross as a Zarr node path, or nil.
func nameErr(name string) error {
	if err := engine.ValidateName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	for s := range strings.SplitSeq(strings.TrimPrefix(name, "/"), "/") {
		switch {
		case strings.HasPrefix(s, ".z"):
			return fmt.Errorf("%w: name %q: component %q is reserved in Zarr", ErrUnsupported, name, s)
		}
	}
	return nil
}

// checkNames refuses the first of names that nameErrs refuses.
func checkNames(names []string) error {
	bad := nameErrs(names)
	for _, n := range names {
		if err := bad[n]; err != nil {
			return err
		}
	}
	return nil
}

// nameErrs is the refusal of each dataset name of a file Zarr cannot
// hold: nameErr's, and a dataset inside another.
func nameErrs(names []string) map[string]error {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	bad := map[string]error{}
	for _, n := range names {
		if err := nameErr(n); err != nil {
			bad[n] = err
			continue
		}
		segs := strings.Split(n, "/")
		for i := 1; i < len(segs); i++ {
			if p := strings.Join(segs[:i], "/"); set[p] {
				bad[n] = fmt.Errorf("%w: dataset %q would be inside dataset %q (a Zarr array has no children)", ErrUnsupported, n, p)
				break
			}
		}
	}
	return bad
}

// attrNameErr is why the engine refuses name as an attribute name, or
// nil, checked before anything is written.
func attrNameErr(name string) error {
	if err := engine.ValidateAttrName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return nil
}
