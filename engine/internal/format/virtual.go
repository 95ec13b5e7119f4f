package format

import (
	"fmt"
	"unicode/utf8"
)

// LayoutVirtual is the layout code of virtual datasets (no stored
// elements; a list of mappings onto datasets of this or other files;
// FORMAT.md §8, §21). Version 2 headers only.
const LayoutVirtual uint8 = 5

// Limits of a virtual dataset's mapping list (FORMAT.md §21).
const (
	// MaxVirtualMappings bounds the number of mappings of one dataset.
	MaxVirtualMappings = 1 << 16
	// MaxVirtualFileBytes bounds a mapping's source file name.
	MaxVirtualFileBytes = 4096
	// MaxVirtualCoord bounds every start, stride, block and count of a
	// mapping's selections and every bounded selection's end (2^62), so
	// that the mapping arithmetic never overflows 64 bits.
	MaxVirtualCoord = 1 << 62
)

// virtualParamsVersion is the version byte of the mapping list.
const virtualParamsVersion = 1

// VirtualSelection is a regular hyperslab as the mapping list stores it:
// per dimension a start, stride, count and block; Count may be Unlimited
// along at most one dimension.
type VirtualSelection struct {
	Start, Stride, Count, Block []uint64
}

// VirtualMapping is one entry of a virtual dataset's mapping list: the
// virtual selection (of the dataset's rank), the source file and dataset
// names (which may carry the %b block-number pattern) and the source
// selection.
type VirtualMapping struct {
	Virtual VirtualSelection
	File    string
	Dataset string
	Source  VirtualSelection
}

// EncodeVirtualParams encodes a mapping list as a virtual dataset's
// LayoutParams (FORMAT.md §21). It does not validate; the engine does.
func EncodeVirtualParams(ms []VirtualMapping) []byte {
	b := []byte{virtualParamsVersion}
	b = le.AppendUint32(b, uint32(len(ms)))
	for _, m := range ms {
		b = appendVirtualSel(b, m.Virtual)
		b = le.AppendUint16(b, uint16(len(m.File)))
		b = append(b, m.File...)
		b = le.AppendUint16(b, uint16(len(m.Dataset)))
		b = append(b, m.Dataset...)
		b = appendVirtualSel(b, m.Source)
	}
	return b
}

func appendVirtualSel(b []byte, s VirtualSelection) []byte {
	b = append(b, uint8(len(s.Start)))
	for d := range s.Start {
		b = le.AppendUint64(b, s.Start[d])
		b = le.AppendUint64(b, s.Stride[d])
		b = le.AppendUint64(b, s.Count[d])
		b = le.AppendUint64(b, s.Block[d])
	}
	return b
}

// DecodeVirtualParams decodes a mapping list. Every structural rule of
// FORMAT.md §21 is checked (lengths, ranks, names, the selection limits,
// at most one unlimited count per selection); a violation wraps
// ErrCorrupt. What depends on the dataset (its rank, overlaps, element
// counts) is the engine's to check.
func DecodeVirtualParams(b []byte) ([]VirtualMapping, error) {
	r := reader{b: b}
	if v := r.u8(); r.err == nil && v != virtualParamsVersion {
		return nil, corrupt("virtual mappings", "version %d", v)
	}
	n := r.u32()
	if r.err != nil {
		return nil, corrupt("virtual mappings", "%v", r.err)
	}
	// The smallest mapping is 2 ranks + 2×32 bytes + 2 lengths + 1 name byte.
	if n == 0 || n > MaxVirtualMappings || uint64(n)*71 > uint64(len(r.b)) {
		return nil, corrupt("virtual mappings", "%d mappings in %d bytes", n, len(r.b))
	}
	ms := make([]VirtualMapping, n)
	for i := range ms {
		m := &ms[i]
		var err error
		if m.Virtual, err = readVirtualSel(&r); err != nil {
			return nil, corrupt("virtual mappings", "mapping %d: virtual selection: %v", i, err)
		}
		fl := int(r.u16())
		if fl > MaxVirtualFileBytes {
			return nil, corrupt("virtual mappings", "mapping %d: file name of %d bytes", i, fl)
		}
		m.File = string(r.take(fl))
		dl := int(r.u16())
		m.Dataset = string(r.take(dl))
		if r.err != nil {
			return nil, corrupt("virtual mappings", "mapping %d: %v", i, r.err)
		}
		if !utf8.ValidString(m.File) {
			return nil, corrupt("virtual mappings", "mapping %d: file name is not UTF-8", i)
		}
		if err := checkName(m.Dataset); err != nil {
			return nil, corrupt("virtual mappings", "mapping %d: dataset %v", i, err)
		}
		if m.Source, err = readVirtualSel(&r); err != nil {
			return nil, corrupt("virtual mappings", "mapping %d: source selection: %v", i, err)
		}
	}
	if len(r.b) != 0 {
		return nil, corrupt("virtual mappings", "%d trailing bytes", len(r.b))
	}
	return ms, nil
}

func readVirtualSel(r *reader) (VirtualSelection, error) {
	rank := int(r.u8())
	if r.err != nil {
		return VirtualSelection{}, r.err
	}
	if rank == 0 || rank > MaxRank {
		return VirtualSelection{}, fmt.Errorf("rank %d", rank)
	}
	if rank*32 > len(r.b) {
		return VirtualSelection{}, fmt.Errorf("rank %d in %d bytes", rank, len(r.b))
	}
	v := make([]uint64, 4*rank)
	s := VirtualSelection{Start: v[:rank:rank], Stride: v[rank : 2*rank : 2*rank], Count: v[2*rank : 3*rank : 3*rank], Block: v[3*rank:]}
	for d := 0; d < rank; d++ {
		s.Start[d], s.Stride[d], s.Count[d], s.Block[d] = r.u64(), r.u64(), r.u64(), r.u64()
	}
	return s, CheckVirtualSelection(s)
}

// CheckVirtualSelection checks one selection against the limits of
// FORMAT.md §21: stride and block at least 1, count at least 1, block at
// most stride when count > 1, every value and every bounded end at most
// MaxVirtualCoord, an Unlimited count along at most one dimension.
func CheckVirtualSelection(s VirtualSelection) error {
	r := len(s.Start)
	if r == 0 || r > MaxRank || len(s.Stride) != r || len(s.Count) != r || len(s.Block) != r {
		return fmt.Errorf("malformed selection of rank %d", r)
	}
	unlim := 0
	for d := 0; d < r; d++ {
		st, str, c, bl := s.Start[d], s.Stride[d], s.Count[d], s.Block[d]
		if str == 0 || bl == 0 || c == 0 {
			return fmt.Errorf("dimension %d: stride %d, count %d, block %d (each at least 1)", d, str, c, bl)
		}
		if st > MaxVirtualCoord || str > MaxVirtualCoord || bl > MaxVirtualCoord {
			return fmt.Errorf("dimension %d: start %d, stride %d, block %d beyond 2^62", d, st, str, bl)
		}
		if c > 1 && bl > str {
			return fmt.Errorf("dimension %d: block %d larger than stride %d", d, bl, str)
		}
		if c == Unlimited {
			unlim++
			continue
		}
		if c > MaxVirtualCoord || st+bl > MaxVirtualCoord || (c-1) > (MaxVirtualCoord-st-bl)/str {
			return fmt.Errorf("dimension %d: count %d reaches beyond 2^62", d, c)
		}
	}
	if unlim > 1 {
		return fmt.Errorf("%d unlimited dimensions (at most 1)", unlim)
	}
	return nil
}
