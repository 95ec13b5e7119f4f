package h5

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"
)

// Described types: enums, opaque types, bitfields, arrays and compounds,
// classified from the library's description of a file's type (typeOf)
// and built again for writing and for reading in little-endian order
// (makeType). A file's type description is foreign input: its walk is
// bounded in depth, members, name lengths and in the number of types it
// visits, before anything is allocated for it; a type beyond a bound is
// Other, named, never a panic.

// Bounds of a described type, those of scc's own type descriptions
// (engine.MaxTypeDepth, MaxTypeMembers, MaxTypeSize; FORMAT.md §7.1),
// so that what the binding classifies can be described in scc.
const (
	maxTypeDepth   = 16
	maxTypeMembers = 1 << 16
	maxTypeSize    = 1 << 20
	maxNameBytes   = 1024
	maxTagBytes    = 255
	maxArrayRank   = 32
	// maxTypeNodes bounds the types one classification visits in all
	// (members of members...): 65536 fields of 65536 fields each would
	// otherwise be walked.
	maxTypeNodes = 1 << 17
)

func (t Type) describedString() string {
	var b strings.Builder
	switch t.Class {
	case Enum:
		fmt.Fprintf(&b, "enum of %v {", t.Base)
		for i, n := range t.Names {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == 8 {
				fmt.Fprintf(&b, "... %d members", len(t.Names))
				break
			}
			fmt.Fprintf(&b, "%q=%d", n, t.Values[i])
		}
		b.WriteString("}")
	case Opaque:
		fmt.Fprintf(&b, "opaque of %d bytes tagged %q", t.Size, t.Tag)
	case Bitfield:
		fmt.Fprintf(&b, "bitfield of %d bytes", t.Size)
		if t.BigEndian && t.Size > 1 {
			b.WriteString(" big-endian")
		}
	case Array:
		fmt.Fprintf(&b, "array %v of %v", t.Dims, t.Base)
	case Compound:
		fmt.Fprintf(&b, "compound of %d bytes {", t.Size)
		for i, m := range t.Members {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == 8 {
				fmt.Fprintf(&b, "... %d members", len(t.Members))
				break
			}
			fmt.Fprintf(&b, "%q@%d %v", m.Name, m.Offset, m.Type)
		}
		b.WriteString("}")
	}
	return b.String()
}

// AnyBigEndian reports whether t or a part of it is stored big-endian, so
// that its bytes are not scc's (HDF5 converts them on a read in the
// little-endian type, LittleEndian).
func (t Type) AnyBigEndian() bool {
	if t.BigEndian && t.Size > 1 {
		return true
	}
	if t.Base != nil && t.Base.AnyBigEndian() {
		return true
	}
	for _, m := range t.Members {
		if m.Type.AnyBigEndian() {
			return true
		}
	}
	return false
}

// LittleEndian is t with every part little-endian: the memory type a read
// asks HDF5 to convert into (per member of a compound, by name).
func (t Type) LittleEndian() Type {
	t.BigEndian = false
	if t.Base != nil {
		b := t.Base.LittleEndian()
		t.Base = &b
	}
	if t.Members != nil {
		ms := make([]Member, len(t.Members))
		for i, m := range t.Members {
			ms[i] = Member{m.Name, m.Offset, m.Type.LittleEndian()}
		}
		t.Members = ms
	}
	return t
}

// other is an unmapped type named why.
func other(t Type, why string) Type {
	return Type{Class: Other, Size: t.Size, Name: why}
}

// describedOf classifies an enum, a compound (not h5py's complex), an
// opaque type, a bitfield or an array. Caller holds lib.
func describedOf(tid C.hid_t, t Type, depth int, budget *int) Type {
	cls := C.H5Tget_class(tid)
	name := className(cls)
	*budget--
	switch {
	case *budget < 0:
		return other(t, name+" with more than 131072 nested types")
	case depth >= maxTypeDepth:
		return other(t, fmt.Sprintf("%s nested more than %d deep", name, maxTypeDepth))
	case t.Size <= 0 || t.Size > maxTypeSize:
		return other(t, fmt.Sprintf("%s of %d bytes (scc's described types hold 1..%d)", name, t.Size, maxTypeSize))
	}
	switch cls {
	case C.H5T_OPAQUE:
		var buf [maxTagBytes + 1]C.char
		n := C.scc_tag(tid, &buf[0], C.size_t(len(buf)))
		if n == -2 {
			C.H5Eclear2(C.H5E_DEFAULT)
			return other(t, fmt.Sprintf("opaque type with a tag over %d bytes", maxTagBytes))
		}
		if n >= 0 {
			t.Tag = C.GoStringN(&buf[0], C.int(n))
		}
		C.H5Eclear2(C.H5E_DEFAULT) // an untagged type has no tag to read
		t.Class = Opaque
		return t
	case C.H5T_BITFIELD:
		if t.Size != 1 && t.Size != 2 && t.Size != 4 && t.Size != 8 {
			return other(t, fmt.Sprintf("bitfield of %d bytes", t.Size))
		}
		switch C.H5Tget_order(tid) {
		case C.H5T_ORDER_LE, C.H5T_ORDER_NONE:
		case C.H5T_ORDER_BE:
			t.BigEndian = true
		default:
			return other(t, "bitfield of mixed byte order")
		}
		t.Class = Bitfield
		return t
	case C.H5T_ARRAY:
		rank := int(C.H5Tget_array_ndims(tid))
		if rank < 1 || rank > maxArrayRank {
			C.H5Eclear2(C.H5E_DEFAULT)
			return other(t, fmt.Sprintf("array type of rank %d", rank))
		}
		dims := make([]C.hsize_t, rank)
		if C.H5Tget_array_dims2(tid, &dims[0]) < 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			return other(t, "array type whose dimensions cannot be read")
		}
		n := uint64(1)
		for _, d := range dims {
			if d == 0 || uint64(d) > maxTypeSize {
				return other(t, fmt.Sprintf("array type of dimensions %v", dims))
			}
			n *= uint64(d)
			if n > maxTypeSize {
				return other(t, fmt.Sprintf("array type of dimensions %v", dims))
			}
			t.Dims = append(t.Dims, int(d))
		}
		base, ok := superOf(tid, depth, budget)
		if !ok {
			return other(t, "array of "+base.String())
		}
		if uint64(base.Size)*n != uint64(t.Size) {
			return other(t, fmt.Sprintf("array type of %d bytes holding %d elements of %d", t.Size, n, base.Size))
		}
		t.Class, t.Base = Array, &base
		return t
	case C.H5T_ENUM:
		base, ok := superOf(tid, depth, budget)
		if !ok || base.Class != Int && base.Class != Uint || base.Size != t.Size {
			return other(t, "enum of "+base.String())
		}
		n := int(C.H5Tget_nmembers(tid))
		if n < 1 || n > maxTypeMembers {
			C.H5Eclear2(C.H5E_DEFAULT)
			return other(t, fmt.Sprintf("enum of %d members (1..%d)", n, maxTypeMembers))
		}
		*budget -= n
		if *budget < 0 {
			return other(t, "enum with more than 131072 members and nested types")
		}
		t.Names, t.Values = make([]string, 0, n), make([]int64, 0, n)
		var nb [maxNameBytes + 1]C.char
		for i := 0; i < n; i++ {
			name, why := memberName(tid, i, &nb)
			if why != "" {
				return other(t, "enum whose "+why)
			}
			var v [8]byte
			if C.H5Tget_member_value(tid, C.uint(i), unsafe.Pointer(&v[0])) < 0 {
				C.H5Eclear2(C.H5E_DEFAULT)
				return other(t, fmt.Sprintf("enum whose member %d's value cannot be read", i))
			}
			t.Names = append(t.Names, name)
			t.Values = append(t.Values, intValue(v[:base.Size], base))
		}
		t.Class, t.Base = Enum, &base
		return t
	case C.H5T_COMPOUND:
		n := int(C.H5Tget_nmembers(tid))
		if n < 1 || n > maxTypeMembers {
			C.H5Eclear2(C.H5E_DEFAULT)
			return other(t, fmt.Sprintf("compound of %d members (1..%d)", n, maxTypeMembers))
		}
		*budget -= n
		if *budget < 0 {
			return other(t, "compound with more than 131072 nested types")
		}
		t.Members = make([]Member, 0, n)
		var nb [maxNameBytes + 1]C.char
		for i := 0; i < n; i++ {
			name, why := memberName(tid, i, &nb)
			if why != "" {
				return other(t, "compound whose "+why)
			}
			off := uint64(C.H5Tget_member_offset(tid, C.uint(i)))
			mt := C.H5Tget_member_type(tid, C.uint(i))
			if mt < 0 {
				C.H5Eclear2(C.H5E_DEFAULT)
				return other(t, fmt.Sprintf("compound whose member %q's type cannot be read", name))
			}
			m := typeOfDepth(mt, depth+1, budget)
			C.H5Tclose(mt)
			if m.Class == Other || m.Class == ObjRef || m.Vlen {
				return other(t, fmt.Sprintf("compound with member %q of type %v", name, m))
			}
			if m.Size <= 0 || off > uint64(t.Size) || uint64(m.Size) > uint64(t.Size)-off {
				return other(t, fmt.Sprintf("compound of %d bytes with member %q of %d bytes at offset %d", t.Size, name, m.Size, off))
			}
			t.Members = append(t.Members, Member{name, int(off), m})
		}
		t.Class = Compound
		return t
	}
	return other(t, name)
}

// superOf classifies the base type of an enum or array. Caller holds lib.
func superOf(tid C.hid_t, depth int, budget *int) (Type, bool) {
	base := C.H5Tget_super(tid)
	if base < 0 {
		C.H5Eclear2(C.H5E_DEFAULT)
		return Type{Class: Other, Name: "unreadable base type"}, false
	}
	bt := typeOfDepth(base, depth+1, budget)
	C.H5Tclose(base)
	return bt, bt.Class != Other && bt.Class != ObjRef && !bt.Vlen
}

// memberName reads member i's name of a compound or enum, or says why
// not (unreadable, too long, not a name scc can hold). Caller holds lib.
func memberName(tid C.hid_t, i int, buf *[maxNameBytes + 1]C.char) (string, string) {
	n := C.scc_member_name(tid, C.uint(i), &buf[0], C.size_t(len(buf)))
	switch {
	case n == -2:
		C.H5Eclear2(C.H5E_DEFAULT)
		return "", fmt.Sprintf("member %d's name is over %d bytes", i, maxNameBytes)
	case n < 0:
		C.H5Eclear2(C.H5E_DEFAULT)
		return "", fmt.Sprintf("member %d's name cannot be read", i)
	case n == 0:
		return "", fmt.Sprintf("member %d's name is empty", i)
	}
	return C.GoStringN(&buf[0], C.int(n)), ""
}

// intValue is the integer of size bytes b in base's byte order,
// sign-extended when base is signed.
func intValue(b []byte, base Type) int64 {
	var le [8]byte
	for i := range b {
		if base.BigEndian {
			le[i] = b[len(b)-1-i]
		} else {
			le[i] = b[i]
		}
	}
	v := binary.LittleEndian.Uint64(le[:])
	if base.Class == Int && len(b) < 8 && le[len(b)-1]&0x80 != 0 {
		v |= ^uint64(0) << (8 * len(b))
	}
	return int64(v)
}

// makeDescribed builds a little-endian 16-bit float or described type;
// the caller closes it. Caller holds lib.
func makeDescribed(t Type, depth int) (C.hid_t, error) {
	if depth > maxTypeDepth {
		return -1, fmt.Errorf("%w: type %v nested more than %d deep", ErrHDF5, t, maxTypeDepth)
	}
	if t.BigEndian {
		return -1, fmt.Errorf("%w: no type for %v", ErrHDF5, t)
	}
	var id C.hid_t = -1
	switch t.Class {
	case Float:
		if t.Size != 2 {
			return makeType(t, false)
		}
		bf := 0
		if t.BFloat {
			bf = 1
		}
		id = C.scc_half_type(C.int(bf), 0)
	case Opaque:
		if len(t.Tag) > maxTagBytes || strings.IndexByte(t.Tag, 0) >= 0 || t.Size <= 0 {
			return -1, fmt.Errorf("%w: opaque tag %q", ErrHDF5, t.Tag)
		}
		tag := C.CString(t.Tag)
		id = C.scc_opaque_type(C.size_t(t.Size), tag)
		C.free(unsafe.Pointer(tag))
	case Bitfield:
		id = C.scc_bitfield_type(C.size_t(t.Size))
	case Array:
		if t.Base == nil || len(t.Dims) == 0 || len(t.Dims) > maxArrayRank {
			return -1, fmt.Errorf("%w: array type %v", ErrHDF5, t)
		}
		base, err := makeMember(*t.Base, depth)
		if err != nil {
			return -1, err
		}
		dims := make([]C.hsize_t, len(t.Dims))
		for i, d := range t.Dims {
			dims[i] = C.hsize_t(d)
		}
		id = C.H5Tarray_create2(base, C.uint(len(dims)), &dims[0])
		C.H5Tclose(base)
	case Enum:
		// (An enum without members is refused: libhdf5 1.10 crashes
		// inserting one into a compound.)
		if t.Base == nil || t.Base.Class != Int && t.Base.Class != Uint || len(t.Names) != len(t.Values) || len(t.Names) == 0 {
			return -1, fmt.Errorf("%w: enum type %v", ErrHDF5, t)
		}
		base, err := makeType(*t.Base, false)
		if err != nil {
			return -1, err
		}
		id = C.H5Tenum_create(base)
		C.H5Tclose(base)
		if id < 0 {
			break
		}
		for i, n := range t.Names {
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], uint64(t.Values[i]))
			cs, err := cName("enum member", n)
			if err != nil {
				C.H5Tclose(id)
				return -1, err
			}
			rc := C.H5Tenum_insert(id, cs, unsafe.Pointer(&v[0]))
			C.free(unsafe.Pointer(cs))
			if rc < 0 {
				C.H5Tclose(id)
				return -1, errorf("enum member %q", n)
			}
		}
	case Compound:
		if t.Size <= 0 || len(t.Members) == 0 {
			return -1, fmt.Errorf("%w: compound type %v", ErrHDF5, t)
		}
		id = C.H5Tcreate(C.H5T_COMPOUND, C.size_t(t.Size))
		if id < 0 {
			break
		}
		for _, m := range t.Members {
			mt, err := makeMember(m.Type, depth)
			if err != nil {
				C.H5Tclose(id)
				return -1, err
			}
			cs, err := cName("compound member", m.Name)
			if err != nil {
				C.H5Tclose(mt)
				C.H5Tclose(id)
				return -1, err
			}
			rc := C.H5Tinsert(id, cs, C.size_t(m.Offset), mt)
			C.free(unsafe.Pointer(cs))
			C.H5Tclose(mt)
			if rc < 0 {
				C.H5Tclose(id)
				return -1, errorf("compound member %q at %d", m.Name, m.Offset)
			}
		}
	default:
		return -1, fmt.Errorf("%w: no type for %v", ErrHDF5, t)
	}
	if id < 0 {
		return -1, errorf("type %v", t)
	}
	return id, nil
}

// makeMember builds the type of a compound member or array element.
func makeMember(t Type, depth int) (C.hid_t, error) {
	if t.Class >= Enum || t.Class == Float && t.Size == 2 {
		return makeDescribed(t, depth+1)
	}
	return makeType(t, false)
}

// padding lists the byte ranges of an element of t that no member of a
// compound covers (at any depth), as [from, to) pairs, or nil.
func (t Type) padding() [][2]int {
	if !t.hasCompound() {
		return nil
	}
	covered := make([]bool, t.Size)
	t.cover(covered, 0)
	var pads [][2]int
	for i := 0; i < len(covered); {
		if covered[i] {
			i++
			continue
		}
		j := i
		for j < len(covered) && !covered[j] {
			j++
		}
		pads = append(pads, [2]int{i, j})
		i = j
	}
	return pads
}

func (t Type) hasCompound() bool {
	switch t.Class {
	case Compound:
		return true
	case Array:
		return t.Base.hasCompound()
	}
	return false
}

// cover marks the bytes of an element of t at off that hold a value.
func (t Type) cover(covered []bool, off int) {
	switch t.Class {
	case Compound:
		for _, m := range t.Members {
			m.Type.cover(covered, off+m.Offset)
		}
	case Array:
		n := 1
		for _, d := range t.Dims {
			n *= d
		}
		for i := 0; i < n; i++ {
			t.Base.cover(covered, off+i*t.Base.Size)
		}
	default:
		for i := off; i < off+t.Size && i < len(covered); i++ {
			covered[i] = true
		}
	}
}

// zeroPadding zeroes the padding of every element in buf: a compound
// conversion writes the members only, leaving the library's scratch
// bytes in the gaps, which would otherwise become the elements' padding.
func zeroPadding(t Type, buf []byte) {
	pads := t.padding()
	if len(pads) == 0 || t.Size <= 0 {
		return
	}
	for e := 0; e+t.Size <= len(buf); e += t.Size {
		for _, p := range pads {
			clear(buf[e+p[0] : e+p[1]])
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// closeType closes a type built by makeType. Caller holds lib.
func closeType(id C.hid_t) { C.H5Tclose(id) }
