package format

import (
	"errors"
	"fmt"
	"slices"
)

// Described types (FORMAT.md §7.1): element type code TypeDescribed names
// a type whose structure a type description spells out: an enum, an
// opaque type, a bitfield, a fixed-size array or a compound. A description
// is a tree of TypeNodes; its encoding is the dataset header's part 6 and
// follows the element type in the attribute encoding.

// Type classes of a described type (TypeNode.Class).
const (
	ClassEnum     uint8 = 1
	ClassOpaque   uint8 = 2
	ClassBitfield uint8 = 3
	ClassArray    uint8 = 4
	ClassCompound uint8 = 5
)

// Limits of a type description, enforced by Validate and the decoder
// before anything is allocated.
const (
	// MaxTypeSize bounds a described type's element size: its fill value
	// must fit one header part, as a string's does.
	MaxTypeSize = MaxPartBytes
	// MaxTypeDepth bounds the nesting of arrays and compounds (a type at
	// the top is depth 1).
	MaxTypeDepth = 16
	// MaxTypeMembers bounds an enum's members and a compound's fields.
	MaxTypeMembers = 1 << 16
	// MaxTagBytes bounds an opaque type's tag (HDF5's H5T_OPAQUE_TAG_MAX
	// less its NUL).
	MaxTagBytes = 255
	// MaxTypeDescBytes bounds a description's encoding (one header part).
	MaxTypeDescBytes = MaxPartBytes
)

// TypeNode is one type of a description: any element type. For a code
// other than TypeString and TypeDescribed only Code is set.
type TypeNode struct {
	Code uint8
	// StrLen, StrPad and StrCharset are a TypeString's parameters.
	StrLen             uint32
	StrPad, StrCharset uint8
	// Class is a TypeDescribed's class (ClassEnum..ClassCompound).
	Class uint8
	// Size is the element size of an opaque type, a bitfield (1, 2, 4 or
	// 8) and a compound (fields and padding).
	Size uint32
	// Base is an enum's integer type (TypeInt8..TypeUint64) or an array's
	// element type.
	Base *TypeNode
	// Names and Values are an enum's members; a value is the member's
	// integer as a uint64: sign-extended for a signed base, and within the
	// base type's range.
	Names  []string
	Values []uint64
	// Tag is an opaque type's tag (ASCII).
	Tag string
	// Dims are an array's dimensions, each at least 1.
	Dims []uint32
	// Fields are a compound's fields.
	Fields []FieldNode
}

// FieldNode is one field of a compound: its name, its byte offset in the
// element, its type.
type FieldNode struct {
	Name   string
	Offset uint32
	Type   *TypeNode
}

// ElemSize is the element size of n's type; 0 for a node that does not
// validate.
func (n *TypeNode) ElemSize() int {
	if n == nil {
		return 0
	}
	switch n.Code {
	case TypeString:
		return int(n.StrLen)
	case TypeDescribed:
		switch n.Class {
		case ClassEnum:
			if n.Base == nil {
				return 0
			}
			return ElemSize(n.Base.Code)
		case ClassArray:
			s := uint64(n.Base.ElemSize())
			for _, d := range n.Dims {
				s *= uint64(d)
				if s > MaxTypeSize {
					return 0
				}
			}
			return int(s)
		}
		return int(n.Size)
	}
	return ElemSize(n.Code)
}

// ValidateType reports whether n may be encoded; the error wraps
// ErrInvalid.
func ValidateType(n *TypeNode) error {
	if err := n.validate(1); err != nil {
		return fmt.Errorf("%w: type description: %w", ErrInvalid, err)
	}
	if l := len(appendType(nil, n)); l > MaxTypeDescBytes {
		return fmt.Errorf("%w: type description of %d bytes (at most %d)", ErrInvalid, l, MaxTypeDescBytes)
	}
	return nil
}

func (n *TypeNode) validate(depth int) error {
	if n == nil {
		return errors.New("missing type")
	}
	if depth > MaxTypeDepth {
		return fmt.Errorf("types nested more than %d deep", MaxTypeDepth)
	}
	plain := n.StrLen == 0 && n.StrPad == 0 && n.StrCharset == 0 && n.Class == 0 && n.Size == 0 && n.Base == nil &&
		n.Names == nil && n.Values == nil && n.Tag == "" && n.Dims == nil && n.Fields == nil
	switch n.Code {
	case TypeString:
		s := *n
		s.StrLen, s.StrPad, s.StrCharset = 0, 0, 0
		s.Code = TypeInt8
		switch {
		case s.validate(depth) != nil:
			return errors.New("string type with other parameters")
		case n.StrLen == 0 || n.StrLen > MaxStringLen:
			return fmt.Errorf("string length %d (want 1..%d)", n.StrLen, MaxStringLen)
		case n.StrPad > PadSpacePad:
			return fmt.Errorf("string padding code %d", n.StrPad)
		case n.StrCharset > CharsetUTF8:
			return fmt.Errorf("string character set code %d", n.StrCharset)
		}
		return nil
	case TypeDescribed:
		return n.validateDescribed(depth)
	}
	if ElemSize(n.Code) == 0 {
		return fmt.Errorf("element type code %d", n.Code)
	}
	if !plain {
		return fmt.Errorf("parameters on element type code %d", n.Code)
	}
	return nil
}

func (n *TypeNode) validateDescribed(depth int) error {
	if n.StrLen != 0 || n.StrPad != 0 || n.StrCharset != 0 {
		return errors.New("string parameters on a described type")
	}
	unused := func(what string, set bool) error {
		if set {
			return fmt.Errorf("%s on a type of class %d", what, n.Class)
		}
		return nil
	}
	switch n.Class {
	case ClassEnum:
		if err := errors.Join(unused("size", n.Size != 0), unused("tag", n.Tag != ""), unused("dims", n.Dims != nil),
			unused("fields", n.Fields != nil)); err != nil {
			return err
		}
		if n.Base == nil || n.Base.Code < TypeInt8 || n.Base.Code > TypeUint64 || n.Base.validate(depth+1) != nil {
			return errors.New("enum base is not an integer type")
		}
		if len(n.Names) != len(n.Values) || len(n.Names) > MaxTypeMembers {
			return fmt.Errorf("enum of %d names and %d values (at most %d)", len(n.Names), len(n.Values), MaxTypeMembers)
		}
		size := ElemSize(n.Base.Code)
		signed := n.Base.Code <= TypeInt64
		names := make(map[string]bool, len(n.Names))
		values := make(map[uint64]bool, len(n.Values))
		for i, name := range n.Names {
			if err := checkMemberName(name); err != nil {
				return fmt.Errorf("enum member %d: %w", i, err)
			}
			v := n.Values[i]
			if bits := uint(8 * size); bits < 64 {
				fits := v>>bits == 0 // unsigned: zero-extended
				if signed {
					i := int64(v)
					fits = i >= -1<<(bits-1) && i < 1<<(bits-1)
				}
				if !fits {
					return fmt.Errorf("enum member %q: value %#x does not fit the base type", name, v)
				}
			}
			if names[name] || values[v] {
				return fmt.Errorf("enum member %q: name or value repeated", name)
			}
			names[name], values[v] = true, true
		}
		return nil
	case ClassOpaque:
		if err := errors.Join(unused("base", n.Base != nil), unused("members", n.Names != nil || n.Values != nil),
			unused("dims", n.Dims != nil), unused("fields", n.Fields != nil)); err != nil {
			return err
		}
		if n.Size == 0 || n.Size > MaxTypeSize {
			return fmt.Errorf("opaque size %d (want 1..%d)", n.Size, MaxTypeSize)
		}
		if len(n.Tag) > MaxTagBytes {
			return fmt.Errorf("opaque tag of %d bytes (at most %d)", len(n.Tag), MaxTagBytes)
		}
		for _, c := range []byte(n.Tag) {
			if c == 0 || c >= 0x80 {
				return fmt.Errorf("opaque tag %q is not ASCII without NUL", n.Tag)
			}
		}
		return nil
	case ClassBitfield:
		if err := errors.Join(unused("base", n.Base != nil), unused("members", n.Names != nil || n.Values != nil),
			unused("tag", n.Tag != ""), unused("dims", n.Dims != nil), unused("fields", n.Fields != nil)); err != nil {
			return err
		}
		if n.Size != 1 && n.Size != 2 && n.Size != 4 && n.Size != 8 {
			return fmt.Errorf("bitfield of %d bytes (want 1, 2, 4 or 8)", n.Size)
		}
		return nil
	case ClassArray:
		if err := errors.Join(unused("size", n.Size != 0), unused("members", n.Names != nil || n.Values != nil),
			unused("tag", n.Tag != ""), unused("fields", n.Fields != nil)); err != nil {
			return err
		}
		if len(n.Dims) == 0 || len(n.Dims) > MaxRank {
			return fmt.Errorf("array of rank %d (want 1..%d)", len(n.Dims), MaxRank)
		}
		if err := n.Base.validate(depth + 1); err != nil {
			return fmt.Errorf("array element: %w", err)
		}
		s := uint64(n.Base.ElemSize())
		for _, d := range n.Dims {
			if d == 0 {
				return fmt.Errorf("array dimensions %v hold a zero", n.Dims)
			}
			if s *= uint64(d); s > MaxTypeSize {
				return fmt.Errorf("array of %v elements exceeds %d bytes", n.Dims, MaxTypeSize)
			}
		}
		return nil
	case ClassCompound:
		if err := errors.Join(unused("base", n.Base != nil), unused("members", n.Names != nil || n.Values != nil),
			unused("tag", n.Tag != ""), unused("dims", n.Dims != nil)); err != nil {
			return err
		}
		if n.Size == 0 || n.Size > MaxTypeSize {
			return fmt.Errorf("compound size %d (want 1..%d)", n.Size, MaxTypeSize)
		}
		if len(n.Fields) == 0 || len(n.Fields) > MaxTypeMembers {
			return fmt.Errorf("compound of %d fields (want 1..%d)", len(n.Fields), MaxTypeMembers)
		}
		type span struct{ lo, hi uint64 }
		spans := make([]span, 0, len(n.Fields))
		names := make(map[string]bool, len(n.Fields))
		for i, f := range n.Fields {
			if err := checkMemberName(f.Name); err != nil {
				return fmt.Errorf("field %d: %w", i, err)
			}
			if names[f.Name] {
				return fmt.Errorf("field %q repeated", f.Name)
			}
			names[f.Name] = true
			if err := f.Type.validate(depth + 1); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
			hi := uint64(f.Offset) + uint64(f.Type.ElemSize())
			if hi > uint64(n.Size) {
				return fmt.Errorf("field %q at %d..%d beyond the compound's %d bytes", f.Name, f.Offset, hi, n.Size)
			}
			spans = append(spans, span{uint64(f.Offset), hi})
		}
		slices.SortFunc(spans, func(a, b span) int { return int(a.lo) - int(b.lo) })
		for i := 1; i < len(spans); i++ {
			if spans[i].lo < spans[i-1].hi {
				return fmt.Errorf("fields overlap at byte %d", spans[i].lo)
			}
		}
		return nil
	}
	return fmt.Errorf("type class %d (want %d..%d)", n.Class, ClassEnum, ClassCompound)
}

// checkMemberName enforces the rule for enum member and field names:
// 1..MaxNameBytes bytes of UTF-8 without NUL (HDF5's names are
// NUL-terminated).
func checkMemberName(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if slices.Contains([]byte(name), 0) {
		return fmt.Errorf("name %q contains NUL", name)
	}
	return nil
}

// EncodeType returns the encoding of a type that passed ValidateType.
func EncodeType(n *TypeNode) []byte { return appendType(nil, n) }

func appendType(b []byte, n *TypeNode) []byte {
	if n == nil {
		return append(b, 0)
	}
	b = append(b, n.Code)
	switch n.Code {
	case TypeString:
		b = le.AppendUint32(b, n.StrLen)
		return append(b, n.StrPad, n.StrCharset)
	case TypeDescribed:
	default:
		return b
	}
	b = append(b, n.Class)
	switch n.Class {
	case ClassEnum:
		code := uint8(0)
		if n.Base != nil {
			code = n.Base.Code
		}
		b = append(b, code)
		b = le.AppendUint32(b, uint32(len(n.Names)))
		size := ElemSize(code)
		for i, name := range n.Names {
			b = le.AppendUint16(b, uint16(len(name)))
			b = append(b, name...)
			var v uint64
			if i < len(n.Values) {
				v = n.Values[i]
			}
			for k := range size {
				b = append(b, byte(v>>(8*k)))
			}
		}
	case ClassOpaque:
		b = le.AppendUint32(b, n.Size)
		b = append(b, uint8(len(n.Tag)))
		b = append(b, n.Tag...)
	case ClassBitfield:
		b = append(b, uint8(n.Size))
	case ClassArray:
		b = append(b, uint8(len(n.Dims)))
		for _, d := range n.Dims {
			b = le.AppendUint32(b, d)
		}
		b = appendType(b, n.Base)
	case ClassCompound:
		b = le.AppendUint32(b, n.Size)
		b = le.AppendUint32(b, uint32(len(n.Fields)))
		for _, f := range n.Fields {
			b = le.AppendUint16(b, uint16(len(f.Name)))
			b = append(b, f.Name...)
			b = le.AppendUint32(b, f.Offset)
			b = appendType(b, f.Type)
		}
	}
	return b
}

// DecodeType decodes a type encoding read from disk: it must hold exactly
// one type that validates. Counts are checked against the bytes present
// before anything is allocated; errors wrap ErrCorrupt.
func DecodeType(b []byte) (*TypeNode, error) {
	if len(b) > MaxTypeDescBytes {
		return nil, corrupt("type description", "%d bytes (at most %d)", len(b), MaxTypeDescBytes)
	}
	r := reader{b: b}
	n, err := decodeNode(&r, 1)
	if err == nil && r.err != nil {
		err = r.err
	}
	if err == nil && len(r.b) != 0 {
		err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if err == nil {
		err = n.validate(1)
	}
	if err != nil {
		return nil, corrupt("type description", "%v", err)
	}
	return n, nil
}

// Smallest encodings of an enum member and a compound field (a one-byte
// name, a one-byte value or type), which bound their counts by the bytes
// left.
const (
	minEnumMember = 2 + 1 + 1
	minField      = 2 + 1 + 4 + 1
)

func decodeNode(r *reader, depth int) (*TypeNode, error) {
	if depth > MaxTypeDepth {
		return nil, fmt.Errorf("types nested more than %d deep", MaxTypeDepth)
	}
	n := &TypeNode{Code: r.u8()}
	switch n.Code {
	case TypeString:
		n.StrLen = r.u32()
		n.StrPad, n.StrCharset = r.u8(), r.u8()
		return n, r.err
	case TypeDescribed:
	default:
		return n, r.err
	}
	n.Class = r.u8()
	switch n.Class {
	case ClassEnum:
		base := r.u8()
		count := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		size := ElemSize(base)
		if base < TypeInt8 || base > TypeUint64 {
			return nil, fmt.Errorf("enum base code %d is not an integer type", base)
		}
		if count > MaxTypeMembers || uint64(count)*uint64(minEnumMember-1+size) > uint64(len(r.b)) {
			return nil, fmt.Errorf("enum of %d members in %d bytes", count, len(r.b))
		}
		n.Base = &TypeNode{Code: base}
		n.Names = make([]string, 0, count)
		n.Values = make([]uint64, 0, count)
		for range count {
			name := string(r.take(int(r.u16())))
			var v uint64
			for k, c := range r.take(size) {
				v |= uint64(c) << (8 * k)
			}
			if size < 8 && base <= TypeInt64 && v>>(8*size-1) != 0 {
				v |= ^uint64(0) << (8 * size) // sign-extend, as the Go value holds it
			}
			if r.err != nil {
				return nil, r.err
			}
			n.Names = append(n.Names, name)
			n.Values = append(n.Values, v)
		}
	case ClassOpaque:
		n.Size = r.u32()
		n.Tag = string(r.take(int(r.u8())))
	case ClassBitfield:
		n.Size = uint32(r.u8())
	case ClassArray:
		rank := int(r.u8())
		if r.err == nil && (rank == 0 || rank > MaxRank) {
			return nil, fmt.Errorf("array of rank %d (want 1..%d)", rank, MaxRank)
		}
		if r.err == nil && 4*rank > len(r.b) {
			return nil, fmt.Errorf("array of rank %d truncated", rank)
		}
		if r.err != nil {
			return nil, r.err
		}
		n.Dims = make([]uint32, rank)
		for i := range n.Dims {
			n.Dims[i] = r.u32()
		}
		base, err := decodeNode(r, depth+1)
		if err != nil {
			return nil, err
		}
		n.Base = base
	case ClassCompound:
		n.Size = r.u32()
		count := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if count > MaxTypeMembers || uint64(count)*minField > uint64(len(r.b)) {
			return nil, fmt.Errorf("compound of %d fields in %d bytes", count, len(r.b))
		}
		n.Fields = make([]FieldNode, 0, count)
		for range count {
			f := FieldNode{Name: string(r.take(int(r.u16()))), Offset: r.u32()}
			if r.err != nil {
				return nil, r.err
			}
			t, err := decodeNode(r, depth+1)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			f.Type = t
			n.Fields = append(n.Fields, f)
		}
	default:
		return nil, fmt.Errorf("type class %d (want %d..%d)", n.Class, ClassEnum, ClassCompound)
	}
	return n, r.err
}
