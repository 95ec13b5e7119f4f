package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/scc-dev/scc/engine/internal/format"
)

// The name rule: what a group, a dataset or a virtual dataset may be
// created as. A name is a path of components separated by "/"; every name
// this rule admits is one HDF5 and Zarr (v2 and v3) can hold as it is, so
// the bridges export what the engine accepts without renaming anything.
//
//   - One leading "/" means "from the root", on File and Group calls
//     alike; without it a Group call resolves the name inside the group
//     and a File call from the root. A second leading "/" is an empty
//     component.
//   - No empty component: no "//", no trailing "/".
//   - No component made only of periods: "." and ".." are not names in
//     HDF5 or Zarr, and Zarr v3 refuses "..." too.
//   - No control character (bytes below 0x20, 0x7f): NUL ends a name in
//     HDF5's C API, and newlines and escapes break listings.
//   - No backslash: zarr-python 2 reads it as "/", so the node would come
//     back under another path.
//   - No component Zarr reserves: one starting with "__" (reserved by
//     Zarr v3), or a metadata key (".zarray", ".zgroup", ".zattrs",
//     ".zmetadata", "zarr.json").
//   - Valid UTF-8, at most MaxNameComponentBytes bytes per component and
//     MaxPathBytes for the whole path (the file format's limit).
//
// Older files may hold names this rule refuses; they keep opening and
// reading, and `scctl ls` escapes them when it prints them.

const (
	// MaxNameComponentBytes bounds one component of a name in bytes (the
	// usual file-system limit, so that Zarr stores a component as one
	// directory or file name).
	MaxNameComponentBytes = 255
	// MaxPathBytes bounds a whole path in bytes, the leading "/" not
	// counted: the file format's limit on a dataset name.
	MaxPathBytes = format.MaxNameBytes
)

// ValidateName checks name against the name rule above. The error wraps
// ErrInvalid and names the rule broken. The root ("/", "") is not a name
// anything can be created as.
func ValidateName(name string) error {
	_, err := newPath(name)
	return err
}

// newPath is the canonical path ("a/b", no leading "/") a create call
// makes for name, or the rule it breaks.
func newPath(name string) (string, error) {
	bad := func(rule string, args ...any) error {
		return fmt.Errorf("%w: name %q: %s", ErrInvalid, name, fmt.Sprintf(rule, args...))
	}
	p := strings.TrimPrefix(name, "/")
	switch {
	case name == "":
		return "", bad("empty name")
	case p == "":
		return "", bad("names the root group")
	case len(p) > MaxPathBytes:
		return "", bad("%d bytes (at most %d)", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return "", bad("not valid UTF-8")
	}
	for c := range strings.SplitSeq(p, "/") {
		switch {
		case c == "":
			return "", bad("empty component (a doubled, leading \"//\" or trailing \"/\")")
		case strings.Trim(c, ".") == "":
			return "", bad("component %q: \".\", \"..\" and names only of periods are not names", c)
		case len(c) > MaxNameComponentBytes:
			return "", bad("component of %d bytes (at most %d)", len(c), MaxNameComponentBytes)
		case strings.Contains(c, "\\"):
			return "", bad("component %q: a backslash, which Zarr readers take for \"/\"", c)
		case strings.HasPrefix(c, "__"):
			return "", bad("component %q: names starting with \"__\" are reserved by Zarr", c)
		case zarrKeys[c]:
			return "", bad("component %q: a Zarr metadata key", c)
		}
		for i := 0; i < len(c); i++ {
			if b := c[i]; b < 0x20 || b == 0x7f {
				what := "control character"
				if b == 0 {
					what = "NUL"
				}
				return "", bad("%s (byte %#02x) in component %q: names hold no control characters", what, b, c)
			}
		}
	}
	return p, nil
}

// zarrKeys are the metadata keys of Zarr v2 and v3 stores: a node of that
// name would be read as metadata.
var zarrKeys = map[string]bool{".zarray": true, ".zgroup": true, ".zattrs": true, ".zmetadata": true, "zarr.json": true}

// NameCase is one case of the name rule's table: a name and whether a
// create call accepts it.
type NameCase struct {
	Name  string
	Valid bool
}

// NameRuleCases returns the table the name rule is tested against, for
// the bridges to check that what the engine accepts they can hold, and
// that they refuse the rest the same way.
func NameRuleCases() []NameCase {
	long := strings.Repeat("c", MaxNameComponentBytes)
	// A path of the greatest length, of components of 127 bytes.
	path := strings.Repeat(strings.Repeat("c", 127)+"/", MaxPathBytes/128-1)
	path += strings.Repeat("d", MaxPathBytes-len(path))
	return []NameCase{
		{"a", true},
		{"a/b/c", true},
		{"/a/b", true},
		{"a.b", true},
		{".hidden", true},
		{"a..", true},
		{"x y", true},
		{"température", true},
		{"数据", true},
		{"a%b", true},
		{"a\\b", false},
		{"__x", false},
		{"g/__x", false},
		{"_x_", true},
		{"x__", true},
		{".zarray", false},
		{"g/zarr.json", false},
		{long, true},
		{path, true},
		{"/" + path, true},
		{"", false},
		{"/", false},
		{"//", false},
		{"//a", false},
		{"a/", false},
		{"a//b", false},
		{"g/", false},
		{".", false},
		{"..", false},
		{"...", false},
		{"../x", false},
		{"g/..", false},
		{"g/./y", false},
		{"a\x00b", false},
		{"\x00", false},
		{"a\nb", false},
		{"a\tb", false},
		{"a\rb", false},
		{"a\x1bb", false},
		{"a\x7fb", false},
		{"a\xffb", false},
		{"\xc3", false},
		{long + "c", false},
		{"a/" + long + "c", false},
		{path + "d", false},
	}
}
