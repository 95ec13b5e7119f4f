package zarr

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/scc-dev/scc/engine"
)

// Names. A node crosses under its path, unchanged, or not at all: a name
// is never rewritten. Both directions apply the engine's name rule
// (engine.ValidateName), which every name a create call accepts meets
// and which refuses what older scc files or a foreign store may hold
// (".", "..", empty components, control characters, bytes that are not
// UTF-8). Export adds what Zarr reserves or its readers misread:
//
//   - components starting with ".z" (v2 metadata keys) or named
//     "zarr.json" (v3's);
//   - components starting with "__", which v3 reserves (refused in v2
//     stores too, so that a store converts to v3 as it is);
//   - a backslash, which zarr-python 2 reads as "/" (it normalizes
//     every key), so the array would come back under another path;
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
		case strings.HasPrefix(s, ".z") || s == "zarr.json" || strings.HasPrefix(s, "__"):
			return fmt.Errorf("%w: name %q: component %q is reserved in Zarr", ErrUnsupported, name, s)
		case strings.Contains(s, "\\"):
			return fmt.Errorf("%w: name %q: a backslash, which zarr-python reads as \"/\"", ErrUnsupported, name)
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
// nil: the engine's rule for attribute names, which it checks only when
// an attribute is set, applied before anything is written.
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
