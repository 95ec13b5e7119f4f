package format

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// CatalogEntry names one dataset and where its header block is.
type CatalogEntry struct {
	Name       string
	ID         uint64 // unique, non-zero
	HeaderAddr uint64 // >= DataStart
	HeaderSize uint64 // whole header block, checksum included
	// HeaderSum is the header block's CRC32C trailer, checked against the
	// block read (see Superblock.CatalogSum).
	HeaderSum uint32
}

// Catalog block layout (FORMAT.md "Catalog").
const (
	catalogFixed = 12               // magic, version, 3 reserved, u32 count
	catalogMin   = catalogFixed + 4 // empty catalog
	entryMin     = 2 + 1 + 3*8 + 4  // u16 name length, shortest name, ID, address, size, checksum
)

func checkCatalog(entries []CatalogEntry) error {
	ids := make(map[uint64]struct{}, len(entries))
	for i, e := range entries {
		if err := checkName(e.Name); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if i > 0 && entries[i-1].Name >= e.Name {
			return fmt.Errorf("entry %d: names not strictly increasing (%q then %q)", i, entries[i-1].Name, e.Name)
		}
		if e.ID == 0 {
			return fmt.Errorf("entry %q: dataset ID 0 is reserved", e.Name)
		}
		if _, dup := ids[e.ID]; dup {
			return fmt.Errorf("entry %q: duplicate dataset ID %d", e.Name, e.ID)
		}
		ids[e.ID] = struct{}{}
		if e.HeaderAddr < DataStart || e.HeaderSize < headerMin || e.HeaderSize > MaxHeaderBytes ||
			e.HeaderAddr > ^uint64(0)-e.HeaderSize {
			return fmt.Errorf("entry %q: header [%d,+%d) invalid", e.Name, e.HeaderAddr, e.HeaderSize)
		}
	}
	return nil
}

// sortedCatalog returns a copy of entries sorted by name.
func sortedCatalog(entries []CatalogEntry) []CatalogEntry {
	s := slices.Clone(entries)
	slices.SortStableFunc(s, func(a, b CatalogEntry) int { return cmp.Compare(a.Name, b.Name) })
	return s
}

// ValidateCatalog reports whether entries (in any order) may be encoded:
// names valid and unique, IDs non-zero and unique, header extents plausible.
// The error wraps ErrInvalid.
func ValidateCatalog(entries []CatalogEntry) error {
	if err := checkCatalog(sortedCatalog(entries)); err != nil {
		return fmt.Errorf("%w: catalog: %w", ErrInvalid, err)
	}
	return nil
}

// CatalogParts are the catalog's v2 parts (FORMAT.md §5 "v2 parts"):
// optional, opaque here, each at most MaxPartBytes; empty means absent.
type CatalogParts struct {
	// Attrs is the engine's encoding of the file's attributes.
	Attrs []byte
	// HasGroups says the catalog carries a Groups part (v4): the file's
	// groups are exactly Groups. Without it (older files) the parents of
	// the datasets' '/'-separated names are the groups.
	HasGroups bool
	// Groups are the file's groups other than the root, sorted by path
	// (FORMAT.md §5 "Groups").
	Groups []GroupEntry
}

// GroupEntry is one group of the Groups part: its path from the root
// ("a/b": components joined by '/', none empty) and the engine's encoding
// of its attributes (empty for none).
type GroupEntry struct {
	Path  string
	Attrs []byte
}

// Part tags of a v2 catalog.
const (
	catalogPartAttrs  = 1
	catalogPartGroups = 2 // v4
	catalogPartsV2    = 1 // the part tags a v2 or v3 catalog defines
	catalogParts      = 2 // the part tags a v4 catalog defines
)

// groupEntryMin is a group's smallest encoding: u16 path length, a
// one-byte path, u32 attributes length.
const groupEntryMin = 2 + 1 + 4

func (p CatalogParts) parts() []part {
	var ps []part
	if len(p.Attrs) > 0 {
		ps = append(ps, part{catalogPartAttrs, p.Attrs})
	}
	if p.HasGroups {
		ps = append(ps, part{catalogPartGroups, encodeGroups(p.Groups)})
	}
	return ps
}

func encodeGroups(gs []GroupEntry) []byte {
	b := le.AppendUint32(nil, uint32(len(gs)))
	for _, g := range gs {
		b = le.AppendUint16(b, uint16(len(g.Path)))
		b = append(b, g.Path...)
		b = le.AppendUint32(b, uint32(len(g.Attrs)))
		b = append(b, g.Attrs...)
	}
	return b
}

func decodeGroups(b []byte) ([]GroupEntry, error) {
	r := reader{b: b}
	count := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if uint64(count) > uint64(len(r.b)/groupEntryMin) {
		return nil, fmt.Errorf("%d groups cannot fit in %d bytes", count, len(r.b))
	}
	var gs []GroupEntry
	for i := uint32(0); i < count; i++ {
		var g GroupEntry
		g.Path = string(r.take(int(r.u16())))
		if n := r.u32(); n > 0 {
			g.Attrs = slices.Clone(r.take(int(n)))
		}
		if r.err != nil {
			return nil, fmt.Errorf("group %d: %v", i, r.err)
		}
		gs = append(gs, g)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes after the groups", len(r.b))
	}
	return gs, nil
}

// ValidPath reports whether p is a canonical group or dataset path:
// a valid name whose '/'-separated components are all non-empty.
func ValidPath(p string) error {
	if err := checkName(p); err != nil {
		return err
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == "" {
			return fmt.Errorf("path %q has an empty component", p)
		}
	}
	return nil
}

// Parent returns the path of p's parent group, "" for the root.
func Parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// checkGroups checks the groups against each other and the datasets:
// paths canonical and strictly increasing, every parent a group, no
// dataset of a group's path, every dataset inside a group.
func checkGroups(gs []GroupEntry, entries []CatalogEntry) error {
	paths := make(map[string]struct{}, len(gs))
	for i, g := range gs {
		if err := ValidPath(g.Path); err != nil {
			return fmt.Errorf("group %d: %w", i, err)
		}
		if i > 0 && gs[i-1].Path >= g.Path {
			return fmt.Errorf("group paths not strictly increasing (%q then %q)", gs[i-1].Path, g.Path)
		}
		if len(g.Attrs) > MaxPartBytes {
			return fmt.Errorf("group %q: %d bytes of attributes", g.Path, len(g.Attrs))
		}
		// Sorted order puts a parent before its children.
		if p := Parent(g.Path); p != "" {
			if _, ok := paths[p]; !ok {
				return fmt.Errorf("group %q: parent group %q missing", g.Path, p)
			}
		}
		paths[g.Path] = struct{}{}
	}
	for _, e := range entries {
		if err := ValidPath(e.Name); err != nil {
			return fmt.Errorf("dataset: %w", err)
		}
		if _, ok := paths[e.Name]; ok {
			return fmt.Errorf("%q is both a group and a dataset", e.Name)
		}
		if p := Parent(e.Name); p != "" {
			if _, ok := paths[p]; !ok {
				return fmt.Errorf("dataset %q: parent group %q missing", e.Name, p)
			}
		}
	}
	return nil
}

// ValidateCatalogParts reports whether p may be encoded; the error wraps
// ErrInvalid.
func ValidateCatalogParts(p CatalogParts) error {
	if p.HasGroups {
		if err := checkGroups(p.Groups, nil); err != nil {
			return fmt.Errorf("%w: catalog groups: %w", ErrInvalid, err)
		}
	}
	for _, x := range p.parts() {
		if len(x.data) > MaxPartBytes {
			return fmt.Errorf("%w: catalog part %d of %d bytes (at most %d)", ErrInvalid, x.tag, len(x.data), MaxPartBytes)
		}
	}
	return nil
}

// EncodeCatalog returns the catalog block for entries, sorted by name (the
// argument is not modified), with no parts. Encode only entries that pass
// ValidateCatalog: duplicates or bad names encode to a block that
// DecodeCatalog rejects.
func EncodeCatalog(entries []CatalogEntry) []byte {
	return EncodeCatalogParts(entries, CatalogParts{})
}

// EncodeCatalogParts is EncodeCatalog with v2 parts (which must pass
// ValidateCatalogParts).
func EncodeCatalogParts(entries []CatalogEntry, cp CatalogParts) []byte {
	s := sortedCatalog(entries)
	n := catalogMin
	for _, e := range s {
		n += entryMin - 1 + len(e.Name)
	}
	b := make([]byte, 0, n)
	b = append(b, magicCatalog[:]...)
	b = append(b, Version, 0, 0, 0)
	b = le.AppendUint32(b, uint32(len(s)))
	for _, e := range s {
		b = le.AppendUint16(b, uint16(len(e.Name)))
		b = append(b, e.Name...)
		b = le.AppendUint64(b, e.ID)
		b = le.AppendUint64(b, e.HeaderAddr)
		b = le.AppendUint64(b, e.HeaderSize)
		b = le.AppendUint32(b, e.HeaderSum)
	}
	b = appendParts(b, cp.parts())
	return sealFrame(b)
}

// DecodeCatalog decodes a catalog block. The entries come back sorted by
// name; parts are checked and dropped (DecodeCatalogParts returns them).
func DecodeCatalog(b []byte) ([]CatalogEntry, error) {
	entries, _, err := DecodeCatalogParts(b)
	return entries, err
}

// DecodeCatalogParts decodes a catalog block and its v2 parts. The parts
// do not alias b.
func DecodeCatalogParts(b []byte) ([]CatalogEntry, CatalogParts, error) {
	var cp CatalogParts
	if len(b) > MaxCatalogBytes {
		return nil, cp, corrupt("catalog", "%d bytes exceeds %d", len(b), MaxCatalogBytes)
	}
	p, version, err := openFrame("catalog", b, magicCatalog, catalogMin)
	if err != nil {
		return nil, cp, err
	}
	r := reader{b: p}
	if res := r.take(3); res[0]|res[1]|res[2] != 0 {
		return nil, cp, corrupt("catalog", "reserved bytes %x not zero", res)
	}
	count := r.u32()
	// Bound the allocation by what the remaining bytes can hold.
	if uint64(count) > uint64(len(r.b)/entryMin) {
		return nil, cp, corrupt("catalog", "%d entries cannot fit in %d bytes", count, len(r.b))
	}
	entries := make([]CatalogEntry, 0, count)
	for i := uint32(0); i < count; i++ {
		var e CatalogEntry
		e.Name = string(r.take(int(r.u16())))
		e.ID = r.u64()
		e.HeaderAddr = r.u64()
		e.HeaderSize = r.u64()
		e.HeaderSum = r.u32()
		if r.err != nil {
			return nil, cp, corrupt("catalog", "entry %d: %v", i, r.err)
		}
		entries = append(entries, e)
	}
	if version == 1 && len(r.b) != 0 {
		return nil, cp, corrupt("catalog", "%d trailing bytes", len(r.b))
	}
	maxTag := uint16(catalogParts)
	if version < 4 {
		maxTag = catalogPartsV2
	}
	ps, err := readParts(r.b, maxTag)
	if err != nil {
		return nil, cp, corrupt("catalog", "%v", err)
	}
	for _, x := range ps {
		switch x.tag {
		case catalogPartAttrs:
			cp.Attrs = x.data
		case catalogPartGroups:
			if cp.Groups, err = decodeGroups(x.data); err != nil {
				return nil, cp, corrupt("catalog", "groups: %v", err)
			}
			cp.HasGroups = true
		}
	}
	if err := checkCatalog(entries); err != nil {
		return nil, cp, corrupt("catalog", "%v", err)
	}
	if cp.HasGroups {
		if err := checkGroups(cp.Groups, entries); err != nil {
			return nil, cp, corrupt("catalog", "%v", err)
		}
	}
	return entries, cp, nil
}
