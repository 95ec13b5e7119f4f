package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/engine/internal/format"
)

// Described types: enums, opaque types, bitfields, fixed-size arrays and
// compounds, the types HDF5 and numpy's structured dtypes hold beyond
// plain numbers and strings. Their structure does not fit the bits of a
// Type, so a described Type is a handle: the file's type code
// (describedCode) in the low byte and, above it, the id of its
// description in a process-wide table where equal descriptions have one
// id. So a described Type stays a comparable value (a map key, ==, a
// switch case) and equal types from different files or constructors are
// equal. Descriptions are immutable; the table only grows, by one entry
// per distinct description a program builds or opens.
//
// A description that breaks a rule (format.ValidateType) gives the
// invalid Type of id 0: not Valid, refused by CreateDataset and attributes
// with ErrInvalid, and invalid again inside any type built from it.

// describedCode is the type code of every described type.
const describedCode Type = Type(format.TypeDescribed)

// Class is a type's class, after HDF5's (H5T_class_t).
type Class uint8

const (
	ClassInvalid  Class = iota
	ClassInteger        // Int8..Uint64
	ClassFloat          // Float16, BFloat16, Float32, Float64
	ClassBool           // Bool
	ClassComplex        // Complex64, Complex128
	ClassString         // FixedString
	ClassEnum           // Enum
	ClassOpaque         // Opaque
	ClassBitfield       // Bitfield
	ClassArray          // ArrayOf
	ClassCompound       // Compound, PackedCompound
)

func (c Class) String() string {
	names := [...]string{"invalid", "integer", "float", "bool", "complex", "string", "enum", "opaque", "bitfield", "array", "compound"}
	if int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Limits of described types (format's, which bound what a file may say).
const (
	// MaxTypeSize bounds a described type's element size in bytes.
	MaxTypeSize = format.MaxTypeSize
	// MaxTypeDepth bounds the nesting of arrays and compounds.
	MaxTypeDepth = format.MaxTypeDepth
	// MaxTypeMembers bounds an enum's members and a compound's fields.
	MaxTypeMembers = format.MaxTypeMembers
)

// EnumMember is one name of an enum and its value. For an unsigned base
// type the value's bits are the member's (a Uint64 member above 2^63-1
// is a negative Value).
type EnumMember struct {
	Name  string
	Value int64
}

// Field is one field of a compound type: its name, its byte offset in
// the element and its type.
type Field struct {
	Name   string
	Offset int
	Type   Type
}

// typeDesc is one interned description, with its parts as engine Types.
type typeDesc struct {
	node    *format.TypeNode
	class   Class
	size    int
	base    Type // an enum's integer type, an array's element type
	members []EnumMember
	tag     string
	dims    []int
	fields  []Field
}

// typeTable interns descriptions: ids maps a description's canonical
// encoding to its id, descs[id-1] is the description. Readers load descs
// without a lock: entries below a published length never change.
var typeTable struct {
	mu    sync.Mutex
	ids   map[string]uint64
	descs atomic.Pointer[[]*typeDesc]
}

// desc returns a described type's description; nil for id 0 or an id
// this process never made.
func (t Type) desc() *typeDesc {
	if !t.IsDescribed() {
		return nil
	}
	p := typeTable.descs.Load()
	id := uint64(t >> 8)
	if p == nil || id == 0 || id > uint64(len(*p)) {
		return nil
	}
	return (*p)[id-1]
}

// typeNode is t's description node (for strings and plain types, the
// node of their code and parameters).
func typeNode(t Type) *format.TypeNode {
	switch {
	case t.IsDescribed():
		if d := t.desc(); d != nil {
			return d.node
		}
		return &format.TypeNode{Code: format.TypeDescribed} // invalid: no class
	case t.IsString():
		return &format.TypeNode{Code: format.TypeString, StrLen: uint32(t.StrLen()), StrPad: uint8(t.Pad()), StrCharset: uint8(t.Charset())}
	}
	return &format.TypeNode{Code: t.Code()}
}

// typeOfNode is the Type of a node that passed format.ValidateType (or
// came from the decoder, which validates).
func typeOfNode(n *format.TypeNode) Type {
	switch n.Code {
	case format.TypeString:
		return stringCode | Type(n.StrPad)<<8 | Type(n.StrCharset)<<16 | Type(n.StrLen)<<32
	case format.TypeDescribed:
		return intern(n)
	}
	return Type(n.Code)
}

// describe validates n and interns it: the invalid type for a node that
// breaks a rule.
func describe(n *format.TypeNode) Type {
	if format.ValidateType(n) != nil {
		return describedCode
	}
	return intern(n)
}

// intern returns the Type of a valid described node, adding it to the
// table if it is new. The parts are interned first, each under the lock
// for its own lookup, so the lock is never held across the recursion.
func intern(n *format.TypeNode) Type {
	key := string(format.EncodeType(n))
	typeTable.mu.Lock()
	id, ok := typeTable.ids[key]
	typeTable.mu.Unlock()
	if ok {
		return describedCode | Type(id)<<8
	}
	d := &typeDesc{node: n, size: n.ElemSize()}
	switch n.Class {
	case format.ClassEnum:
		d.class, d.base = ClassEnum, Type(n.Base.Code)
		for i, name := range n.Names {
			d.members = append(d.members, EnumMember{name, int64(n.Values[i])})
		}
	case format.ClassOpaque:
		d.class, d.tag = ClassOpaque, n.Tag
	case format.ClassBitfield:
		d.class = ClassBitfield
	case format.ClassArray:
		d.class, d.base = ClassArray, typeOfNode(n.Base)
		for _, x := range n.Dims {
			d.dims = append(d.dims, int(x))
		}
	case format.ClassCompound:
		d.class = ClassCompound
		for _, f := range n.Fields {
			d.fields = append(d.fields, Field{f.Name, int(f.Offset), typeOfNode(f.Type)})
		}
	}
	typeTable.mu.Lock()
	defer typeTable.mu.Unlock()
	return addLocked(key, d)
}

// addLocked adds d under key, unless a concurrent intern of the same
// description got there first; typeTable.mu is held.
func addLocked(key string, d *typeDesc) Type {
	if id, ok := typeTable.ids[key]; ok {
		return describedCode | Type(id)<<8
	}
	if typeTable.ids == nil {
		typeTable.ids = make(map[string]uint64)
	}
	var descs []*typeDesc
	if p := typeTable.descs.Load(); p != nil {
		descs = *p
	}
	// Appending may write past the length readers see into a shared
	// array; they never read there.
	descs = append(descs, d)
	typeTable.descs.Store(&descs)
	id := uint64(len(descs))
	typeTable.ids[key] = id
	return describedCode | Type(id)<<8
}

// nodeOrNil is t's node, nil for an invalid type (which makes the
// description it is part of invalid).
func nodeOrNil(t Type) *format.TypeNode {
	if !t.Valid() {
		return nil
	}
	return typeNode(t)
}

// Enum is the enum type over the integer type base (Int8..Uint64) with
// the given members: names 1..1024 bytes of UTF-8 without NUL, names and
// values each distinct, values within base's range. HDF5's enums and
// h5py's enum dtypes (h5py.enum_dtype) are such types.
func Enum(base Type, members ...EnumMember) Type {
	if base < Int8 || base > Uint64 {
		return describedCode
	}
	n := &format.TypeNode{Code: format.TypeDescribed, Class: format.ClassEnum, Base: &format.TypeNode{Code: base.Code()},
		Names: make([]string, len(members)), Values: make([]uint64, len(members))}
	for i, m := range members {
		n.Names[i], n.Values[i] = m.Name, uint64(m.Value)
		if signed, _, _, _ := intRange(base); !signed && base != Uint64 && m.Value < 0 {
			return describedCode
		}
	}
	return describe(n)
}

// Opaque is the type of size-byte elements (1..MaxTypeSize) that the
// engine never interprets, tagged with tag (up to 255 ASCII bytes, no
// NUL): HDF5's H5T_OPAQUE, numpy's void ("V<size>").
func Opaque(size int, tag string) Type {
	if size <= 0 || size > MaxTypeSize {
		return describedCode
	}
	return describe(&format.TypeNode{Code: format.TypeDescribed, Class: format.ClassOpaque, Size: uint32(size), Tag: tag})
}

// Bitfield is the type of size-byte bit sets (size 1, 2, 4 or 8), stored
// little-endian like the integers: HDF5's H5T_NATIVE_B8..B64. Bitfields
// do not convert to numbers (as in HDF5).
func Bitfield(size int) Type {
	if size != 1 && size != 2 && size != 4 && size != 8 {
		return describedCode
	}
	return describe(&format.TypeNode{Code: format.TypeDescribed, Class: format.ClassBitfield, Size: uint32(size)})
}

// ArrayOf is the type of fixed-size arrays of elem with the given
// dimensions (1..32 of them, each at least 1; at most MaxTypeSize bytes
// in all), stored in C order: HDF5's H5T_ARRAY, numpy's subarray dtypes.
func ArrayOf(elem Type, dims ...int) Type {
	n := &format.TypeNode{Code: format.TypeDescribed, Class: format.ClassArray, Base: nodeOrNil(elem), Dims: make([]uint32, len(dims))}
	for i, d := range dims {
		if d <= 0 || d > MaxTypeSize {
			return describedCode
		}
		n.Dims[i] = uint32(d)
	}
	return describe(n)
}

// Compound is the type of size-byte elements holding the given fields at
// their offsets (HDF5's H5T_COMPOUND, numpy's structured dtypes with
// their padding): at least one field, names 1..1024 bytes of UTF-8
// without NUL and distinct, fields within size and not overlapping.
// Bytes no field covers are padding, kept as written.
func Compound(size int, fields ...Field) Type {
	if size <= 0 || size > MaxTypeSize {
		return describedCode
	}
	n := &format.TypeNode{Code: format.TypeDescribed, Class: format.ClassCompound, Size: uint32(size),
		Fields: make([]format.FieldNode, len(fields))}
	for i, f := range fields {
		if f.Offset < 0 || f.Offset > MaxTypeSize {
			return describedCode
		}
		n.Fields[i] = format.FieldNode{Name: f.Name, Offset: uint32(f.Offset), Type: nodeOrNil(f.Type)}
	}
	return describe(n)
}

// PackedCompound is the compound of the given fields laid out one after
// the other in the order given, without padding (HDF5's H5Tpack, numpy's
// default structured dtype); the fields' Offsets are ignored.
func PackedCompound(fields ...Field) Type {
	off := 0
	fs := slices.Clone(fields)
	for i := range fs {
		fs[i].Offset = off
		s := fs[i].Type.Size()
		if s == 0 {
			return describedCode
		}
		if off += s; off > MaxTypeSize {
			return describedCode
		}
	}
	return Compound(off, fs...)
}

// Class reports t's class.
func (t Type) Class() Class {
	switch {
	case !t.Valid():
		return ClassInvalid
	case t.IsDescribed():
		return t.desc().class
	case t.IsString():
		return ClassString
	case t >= Int8 && t <= Uint64:
		return ClassInteger
	case t == Bool:
		return ClassBool
	case t == Complex64 || t == Complex128:
		return ClassComplex
	}
	return ClassFloat
}

// Base reports an enum's integer type or an array's element type (0 for
// other types).
func (t Type) Base() Type {
	if d := t.desc(); d != nil {
		return d.base
	}
	return 0
}

// Members reports an enum's members in their order (nil for other types).
func (t Type) Members() []EnumMember {
	if d := t.desc(); d != nil {
		return slices.Clone(d.members)
	}
	return nil
}

// Tag reports an opaque type's tag ("" for other types).
func (t Type) Tag() string {
	if d := t.desc(); d != nil {
		return d.tag
	}
	return ""
}

// Dims reports an array type's dimensions (nil for other types).
func (t Type) Dims() []int {
	if d := t.desc(); d != nil {
		return slices.Clone(d.dims)
	}
	return nil
}

// Fields reports a compound's fields in their order (nil for other types).
func (t Type) Fields() []Field {
	if d := t.desc(); d != nil {
		return slices.Clone(d.fields)
	}
	return nil
}

// FieldOf finds the field a path names in the compound t: field names
// separated by '.', for fields of nested compounds ("pos.x"). A name that
// itself holds a '.' matches whole before the path is split. It returns
// the field's type and its offset from the start of t's element.
func (t Type) FieldOf(path string) (Type, int, error) {
	off := 0
	rest := path
	for {
		d := t.desc()
		if d == nil || d.class != ClassCompound {
			return 0, 0, fmt.Errorf("%w: field %q: %v is not a compound type", ErrInvalid, path, t)
		}
		found := false
		// The longest prefix of rest that names a field, so that a field
		// named "a.b" wins over a field "a" holding "b".
		for _, f := range d.fields {
			if f.Name == rest {
				return f.Type, off + f.Offset, nil
			}
		}
		for i := len(rest) - 1; i > 0 && !found; i-- {
			if rest[i] != '.' {
				continue
			}
			for _, f := range d.fields {
				if f.Name == rest[:i] {
					t, off, rest, found = f.Type, off+f.Offset, rest[i+1:], true
					break
				}
			}
		}
		if !found {
			return 0, 0, fmt.Errorf("%w: no field %q in %v", ErrNotFound, path, t)
		}
	}
}

func (d *typeDesc) String() string {
	var b strings.Builder
	switch d.class {
	case ClassEnum:
		fmt.Fprintf(&b, "enum(%v", d.base)
		for _, m := range d.members {
			v := any(m.Value)
			if signed, _, _, _ := intRange(d.base); !signed {
				v = uint64(m.Value)
			}
			fmt.Fprintf(&b, ", %q=%v", m.Name, v)
		}
		b.WriteString(")")
	case ClassOpaque:
		fmt.Fprintf(&b, "opaque(%d, %q)", d.size, d.tag)
	case ClassBitfield:
		fmt.Fprintf(&b, "bitfield(%d)", d.size)
	case ClassArray:
		fmt.Fprintf(&b, "array(%v, %v)", d.base, d.dims)
	case ClassCompound:
		fmt.Fprintf(&b, "compound(%d", d.size)
		for _, f := range d.fields {
			fmt.Fprintf(&b, ", %q@%d %v", f.Name, f.Offset, f.Type)
		}
		b.WriteString(")")
	}
	return b.String()
}
