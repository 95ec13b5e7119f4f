package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/scc-dev/scc/engine/internal/format"
)

// Attributes: small named values kept beside a file or a dataset. A
// dataset's attributes are the Attrs part of its header, a file's the Attrs
// part of the catalog (FORMAT.md §5, §6), both in the encoding of
// encodeAttrs below. They change in memory and become durable with the next
// commit (Flush, Close), under the same crash-safe protocol as everything
// else: a crash leaves the attributes of the last committed state.
//
// Concurrency: each owner (File or dataset) keeps an immutable attrSet
// behind an atomic pointer, replaced under the owner's attrHolder.mu by a
// set that shares all but the changed path, so Get and list never lock and
// a commit reads one consistent set. Sets are not encoded as they change,
// as an encoding per Set made filling the 1 MiB bound quadratic.

// Limits on attributes. An attribute set must also encode within one v2
// part (format.MaxPartBytes, 1 MiB), which bounds the sum.
const (
	// MaxAttrNameBytes bounds an attribute name: 1..255 bytes of UTF-8,
	// no NUL.
	MaxAttrNameBytes = 255
	// MaxAttrValueBytes bounds one attribute's value (a string's bytes, a
	// byte string, or an array's elements times their size).
	MaxAttrValueBytes = 64 << 10
	// MaxAttrRank bounds the dimensions of an attribute's shape, as HDF5
	// bounds a dataspace's rank (H5S_MAX_RANK).
	MaxAttrRank = 32
)

// ErrAttrType is returned by the typed getters when an attribute holds a
// value of another kind or element type. It wraps ErrInvalid.
var ErrAttrType = fmt.Errorf("%w: attribute has another type", ErrInvalid)

// AttrKind is the kind of an attribute's value.
type AttrKind uint8

// The attribute kinds; the codes are part of the attribute encoding.
const (
	AttrScalar AttrKind = 1 // one element of an engine Type
	AttrArray  AttrKind = 2 // zero or more elements of an engine Type
	AttrString AttrKind = 3 // UTF-8 text
	AttrBytes  AttrKind = 4 // an opaque byte string
	// AttrNull is an empty value with a type but no elements and no shape
	// (HDF5's null dataspace, h5py's Empty): its Type is the element type
	// it would hold, or 0 for text (a string attribute's type).
	AttrNull AttrKind = 6
)

// attrKindShaped is the encoded kind of an array of 2 or more dimensions
// (an AttrArray with a shape); the API shows it as AttrArray.
const attrKindShaped = 5

func (k AttrKind) String() string {
	switch k {
	case AttrScalar:
		return "scalar"
	case AttrArray:
		return "array"
	case AttrString:
		return "string"
	case AttrBytes:
		return "bytes"
	case AttrNull:
		return "null"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// AttrValue is an attribute's value. Build one with StringAttr, BytesAttr,
// ScalarAttr, ArrayAttr (shaped N-D by WithShape) or NullAttr; read it
// with the methods or the generic Scalar and Array functions (an N-D
// array's elements row-major). Values are immutable.
type AttrValue struct {
	kind AttrKind
	typ  Type   // element type for AttrScalar, AttrArray and AttrNull; 0 otherwise
	data []byte // the elements little-endian, the string's or the bytes' bytes
	// dims is the shape of an AttrArray of 2 or more dimensions (row-major
	// elements); nil for every other value, so that a 1-D array has one
	// form and Equal can compare fields.
	dims []uint64
}

// StringAttr is a UTF-8 string attribute.
func StringAttr(s string) AttrValue { return AttrValue{kind: AttrString, data: []byte(s)} }

// BytesAttr is a byte-string attribute (b is copied).
func BytesAttr(b []byte) AttrValue {
	return AttrValue{kind: AttrBytes, data: append([]byte{}, b...)}
}

// ScalarAttr is a one-element attribute of T's engine type.
func ScalarAttr[T Element](v T) AttrValue {
	return AttrValue{kind: AttrScalar, typ: TypeOf[T](), data: append([]byte{}, toBytes([]T{v})...)}
}

// ArrayAttr is an array attribute of T's engine type (v is copied).
func ArrayAttr[T Element](v []T) AttrValue {
	return AttrValue{kind: AttrArray, typ: TypeOf[T](), data: append([]byte{}, toBytes(v)...)}
}

// RawAttr builds a scalar or array attribute of type t from its
// little-endian element bytes (copied), for callers that hold elements as
// bytes (importers). Check errors with Validate-like rules at Set.
func RawAttr(kind AttrKind, t Type, le []byte) AttrValue {
	return AttrValue{kind: kind, typ: t, data: append([]byte{}, le...)}
}

// NullAttr is a null attribute (no elements, no shape) of element type t,
// or of text when t is 0: HDF5's null dataspace, h5py's Empty. Set checks t.
func NullAttr(t Type) AttrValue { return AttrValue{kind: AttrNull, typ: t} }

// WithShape returns v, a scalar or an array, with the shape dims: no
// dimensions make a scalar, one an array, more an N-D array whose elements
// are v's in row-major order. The product of dims must be v.Len() and
// there are at most MaxAttrRank of them; other values and shapes are
// ErrInvalid.
func (v AttrValue) WithShape(dims ...uint64) (AttrValue, error) {
	if v.kind != AttrScalar && v.kind != AttrArray {
		return AttrValue{}, fmt.Errorf("%w: a %s has no shape", ErrInvalid, v.describe())
	}
	if len(dims) > MaxAttrRank {
		return AttrValue{}, fmt.Errorf("%w: attribute shape of %d dimensions (at most %d)", ErrInvalid, len(dims), MaxAttrRank)
	}
	if n, ok := shapeElems(dims); !ok || n != uint64(v.Len()) {
		return AttrValue{}, fmt.Errorf("%w: shape %v for %s", ErrInvalid, dims, v.describe())
	}
	w := AttrValue{kind: AttrArray, typ: v.typ, data: v.data}
	switch len(dims) {
	case 0:
		w.kind = AttrScalar
	case 1:
	default:
		w.dims = slices.Clone(dims)
	}
	return w, nil
}

// shapeElems is the product of dims, false when it exceeds
// MaxAttrValueBytes (no attribute holds more elements).
func shapeElems(dims []uint64) (uint64, bool) {
	if slices.Contains(dims, 0) {
		return 0, true
	}
	n := uint64(1)
	for _, d := range dims {
		if d > MaxAttrValueBytes/n {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// Shape is the value's dimensions: nil for a scalar (and for strings,
// byte strings and nulls, which have none), [Len] for an array, the
// dimensions of an N-D array (a copy).
func (v AttrValue) Shape() []uint64 {
	switch {
	case v.kind != AttrArray:
		return nil
	case v.dims != nil:
		return slices.Clone(v.dims)
	}
	return []uint64{uint64(v.Len())}
}

// Kind returns the value's kind.
func (v AttrValue) Kind() AttrKind { return v.kind }

// Type returns the element type of a scalar or array value (0 otherwise).
func (v AttrValue) Type() Type { return v.typ }

// Len is the number of elements of a scalar or array, or the number of
// bytes of a string or byte string; 0 for a null.
func (v AttrValue) Len() int {
	if v.kind == AttrScalar || v.kind == AttrArray {
		if s := v.typ.Size(); s > 0 {
			return len(v.data) / s
		}
	}
	return len(v.data)
}

// Bytes returns a copy of the value's bytes: a byte string's or string's
// bytes, or a scalar's or array's elements little-endian.
func (v AttrValue) Bytes() []byte { return append([]byte{}, v.data...) }

// Str returns a string attribute's text; ErrAttrType for another kind.
func (v AttrValue) Str() (string, error) {
	if v.kind != AttrString {
		return "", fmt.Errorf("%w: %s, not a string", ErrAttrType, v.describe())
	}
	return string(v.data), nil
}

// ByteString returns a copy of a byte-string attribute; ErrAttrType for
// another kind.
func (v AttrValue) ByteString() ([]byte, error) {
	if v.kind != AttrBytes {
		return nil, fmt.Errorf("%w: %s, not a byte string", ErrAttrType, v.describe())
	}
	return v.Bytes(), nil
}

// Equal reports whether two values are identical (kind, type, shape and
// bytes).
func (v AttrValue) Equal(w AttrValue) bool {
	return v.kind == w.kind && v.typ == w.typ && slices.Equal(v.dims, w.dims) && string(v.data) == string(w.data)
}

func (v AttrValue) describe() string {
	switch v.kind {
	case AttrScalar:
		return v.typ.String() + " scalar"
	case AttrArray:
		if v.dims != nil {
			return fmt.Sprintf("%s array of shape %v", v.typ, v.dims)
		}
		return fmt.Sprintf("%s array of %d", v.typ, v.Len())
	case AttrNull:
		if v.typ == 0 {
			return "null string"
		}
		return "null " + v.typ.String()
	}
	return v.kind.String()
}

// Scalar returns a scalar attribute as T, which must be its exact type.
func Scalar[T Element](v AttrValue) (T, error) {
	var z T
	if v.kind != AttrScalar || v.typ != TypeOf[T]() {
		return z, fmt.Errorf("%w: %s, want %v scalar", ErrAttrType, v.describe(), TypeOf[T]())
	}
	out := []T{z}
	fromBytes(v.data, out)
	return out[0], nil
}

// Array returns an array attribute's elements as []T, T its exact type. A
// scalar reads as an array of one.
func Array[T Element](v AttrValue) ([]T, error) {
	if v.kind != AttrArray && v.kind != AttrScalar || v.typ != TypeOf[T]() {
		return nil, fmt.Errorf("%w: %s, want %v array", ErrAttrType, v.describe(), TypeOf[T]())
	}
	out := make([]T, v.Len())
	fromBytes(v.data, out)
	return out, nil
}

// Float64s returns a scalar's or array's elements converted to float64
// (for display and for exporters; a Bool as 0 or 1); ErrAttrType for
// strings, bytes and the complex types, which have no float64 value.
func (v AttrValue) Float64s() ([]float64, error) {
	if v.kind != AttrScalar && v.kind != AttrArray || !convType(v.typ).Numeric() && v.typ != Bool {
		return nil, fmt.Errorf("%w: %s is not numeric", ErrAttrType, v.describe())
	}
	n, s := v.Len(), v.typ.Size()
	out := make([]float64, n)
	for i := range out {
		out[i] = elemFloat(convType(v.typ), v.data[i*s:])
	}
	return out, nil
}

// elemFloat converts the little-endian element at b of type t.
func elemFloat(t Type, b []byte) float64 {
	le := binary.LittleEndian
	switch t {
	case Int8:
		return float64(int8(b[0]))
	case Uint8:
		return float64(b[0])
	case Bool:
		if b[0] != 0 {
			return 1
		}
		return 0
	case Int16:
		return float64(int16(le.Uint16(b)))
	case Uint16:
		return float64(le.Uint16(b))
	case Int32:
		return float64(int32(le.Uint32(b)))
	case Uint32:
		return float64(le.Uint32(b))
	case Int64:
		return float64(int64(le.Uint64(b)))
	case Uint64:
		return float64(le.Uint64(b))
	case Float32:
		return float64(math.Float32frombits(le.Uint32(b)))
	case Float64:
		return math.Float64frombits(le.Uint64(b))
	case Float16:
		return Float16FromBits(le.Uint16(b))
	case BFloat16:
		return BFloat16FromBits(le.Uint16(b))
	}
	return 0
}

// ValidateAttrName checks name against the rule for attribute names: 1 to
// MaxAttrNameBytes bytes of UTF-8 without NUL. The error wraps ErrInvalid.
func ValidateAttrName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty attribute name", ErrInvalid)
	case len(name) > MaxAttrNameBytes:
		return fmt.Errorf("%w: attribute name of %d bytes (at most %d)", ErrInvalid, len(name), MaxAttrNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: attribute name %q is not valid UTF-8", ErrInvalid, name)
	case slices.Contains([]byte(name), 0):
		return fmt.Errorf("%w: attribute name %q contains NUL", ErrInvalid, name)
	}
	return nil
}

// validate checks a value built by the constructors or RawAttr.
func (v AttrValue) validate() error {
	if len(v.data) > MaxAttrValueBytes {
		return fmt.Errorf("%w: attribute value of %d bytes (at most %d)", ErrInvalid, len(v.data), MaxAttrValueBytes)
	}
	switch v.kind {
	case AttrScalar, AttrArray:
		s := v.typ.Size()
		if s == 0 {
			return fmt.Errorf("%w: attribute element type %v", ErrInvalid, v.typ)
		}
		if len(v.data)%s != 0 || v.kind == AttrScalar && len(v.data) != s {
			return fmt.Errorf("%w: %d bytes for a %s of %v", ErrInvalid, len(v.data), v.kind, v.typ)
		}
		if err := v.typ.checkElems(v.data); err != nil {
			return err
		}
		if v.dims != nil {
			n, ok := shapeElems(v.dims)
			if v.kind != AttrArray || len(v.dims) < 2 || len(v.dims) > MaxAttrRank || !ok || n != uint64(v.Len()) {
				return fmt.Errorf("%w: shape %v for %d elements of a %s", ErrInvalid, v.dims, v.Len(), v.kind)
			}
		}
	case AttrString:
		if v.typ != 0 || !utf8.Valid(v.data) {
			return fmt.Errorf("%w: string attribute is not valid UTF-8", ErrInvalid)
		}
	case AttrBytes:
		if v.typ != 0 {
			return fmt.Errorf("%w: byte string with an element type", ErrInvalid)
		}
	case AttrNull:
		if len(v.data) != 0 || v.typ != 0 && v.typ.Size() == 0 {
			return fmt.Errorf("%w: null attribute of %d bytes, type %v", ErrInvalid, len(v.data), v.typ)
		}
	default:
		return fmt.Errorf("%w: attribute kind %d (the zero AttrValue is not a value)", ErrInvalid, uint8(v.kind))
	}
	return nil
}

// Attr is one named attribute.
type Attr struct {
	Name  string
	Value AttrValue
}

// attrSet is an immutable set of attributes: a persistent balanced tree
// ordered by name, its count, and its encoded size kept up to date by each
// change, so a change copies only the path to its attribute (O(log n)
// nodes) and never encodes the set. The encoding is made once, when a
// commit first asks for it (encoding), and kept with the set.
type attrSet struct {
	root *attrNode
	n    int
	size int // len of the encoding: 0 when empty
	enc  struct {
		once sync.Once
		b    []byte
	}
}

var emptyAttrs = &attrSet{}

// attrNode is a node of an AVL tree; nodes are never changed once built,
// so sets share all but the path a change copied.
type attrNode struct {
	left, right *attrNode
	height      int
	a           Attr
}

func (n *attrNode) h() int {
	if n == nil {
		return 0
	}
	return n.height
}

func newAttrNode(a Attr, l, r *attrNode) *attrNode {
	return &attrNode{left: l, right: r, height: 1 + max(l.h(), r.h()), a: a}
}

// balanced joins l, a and r, whose heights differ by at most 2 (one
// insertion or deletion below a balanced node), into a balanced tree.
func balanced(a Attr, l, r *attrNode) *attrNode {
	switch hl, hr := l.h(), r.h(); {
	case hl > hr+1:
		if l.left.h() >= l.right.h() {
			return newAttrNode(l.a, l.left, newAttrNode(a, l.right, r))
		}
		lr := l.right
		return newAttrNode(lr.a, newAttrNode(l.a, l.left, lr.left), newAttrNode(a, lr.right, r))
	case hr > hl+1:
		if r.right.h() >= r.left.h() {
			return newAttrNode(r.a, newAttrNode(a, l, r.left), r.right)
		}
		rl := r.left
		return newAttrNode(rl.a, newAttrNode(a, l, rl.left), newAttrNode(r.a, rl.right, r.right))
	}
	return newAttrNode(a, l, r)
}

// put returns n with a set, and the attribute it replaced, if any.
func (n *attrNode) put(a Attr) (*attrNode, *Attr) {
	if n == nil {
		return newAttrNode(a, nil, nil), nil
	}
	switch c := strings.Compare(a.Name, n.a.Name); {
	case c < 0:
		l, old := n.left.put(a)
		return balanced(n.a, l, n.right), old
	case c > 0:
		r, old := n.right.put(a)
		return balanced(n.a, n.left, r), old
	}
	return &attrNode{left: n.left, right: n.right, height: n.height, a: a}, &n.a
}

// remove returns n without name, and the attribute removed (nil: none,
// and n is returned as it is).
func (n *attrNode) remove(name string) (*attrNode, *Attr) {
	if n == nil {
		return nil, nil
	}
	switch c := strings.Compare(name, n.a.Name); {
	case c < 0:
		l, old := n.left.remove(name)
		if old == nil {
			return n, nil
		}
		return balanced(n.a, l, n.right), old
	case c > 0:
		r, old := n.right.remove(name)
		if old == nil {
			return n, nil
		}
		return balanced(n.a, n.left, r), old
	}
	switch {
	case n.left == nil:
		return n.right, &n.a
	case n.right == nil:
		return n.left, &n.a
	}
	r, first := n.right.removeFirst()
	return balanced(first, n.left, r), &n.a
}

func (n *attrNode) removeFirst() (*attrNode, Attr) {
	if n.left == nil {
		return n.right, n.a
	}
	l, first := n.left.removeFirst()
	return balanced(n.a, l, n.right), first
}

// appendTo appends n's attributes in name order.
func (n *attrNode) appendTo(out []Attr) []Attr {
	for ; n != nil; n = n.right {
		out = n.left.appendTo(out)
		out = append(out, n.a)
	}
	return out
}

// buildAttrTree builds a balanced tree of attrs, sorted by name.
func buildAttrTree(attrs []Attr) *attrNode {
	if len(attrs) == 0 {
		return nil
	}
	m := len(attrs) / 2
	return newAttrNode(attrs[m], buildAttrTree(attrs[:m]), buildAttrTree(attrs[m+1:]))
}

// newAttrSet is the set of attrs, sorted by name, encoding to size bytes.
func newAttrSet(attrs []Attr, size int) *attrSet {
	if len(attrs) == 0 {
		return emptyAttrs
	}
	return &attrSet{root: buildAttrTree(attrs), n: len(attrs), size: size}
}

func (s *attrSet) get(name string) (AttrValue, bool) {
	for n := s.root; n != nil; {
		switch c := strings.Compare(name, n.a.Name); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n.a.Value, true
		}
	}
	return AttrValue{}, false
}

// list returns the attributes sorted by name, in a new slice.
func (s *attrSet) list() []Attr { return s.root.appendTo(make([]Attr, 0, s.n)) }

// encoding returns the set's encoding (nil when empty), made on the first
// call. Callers must not change it.
func (s *attrSet) encoding() []byte {
	s.enc.once.Do(func() {
		if s.enc.b == nil {
			s.enc.b = encodeAttrs(s.list())
		}
	})
	return s.enc.b
}

// attrEncodedSize is what a adds to the encoding of a set that holds it.
func attrEncodedSize(a Attr) int {
	n := attrEntryMin - 1 + len(a.Name) + len(attrTypeParams(a.Value.typ)) + len(a.Value.data)
	if a.Value.dims != nil {
		n += 1 + 8*len(a.Value.dims)
	}
	return n
}

// attrTypeParams is what follows an attribute's element type code: a
// string type's parameters, a described type's u32 length and
// description (format.EncodeType), nothing for the other types.
func attrTypeParams(t Type) []byte {
	switch {
	case t.IsString():
		b := binary.LittleEndian.AppendUint32(nil, uint32(t.StrLen()))
		return append(b, uint8(t.Pad()), uint8(t.Charset()))
	case t.IsDescribed():
		d := format.EncodeType(typeNode(t))
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(d))), d...)
	}
	return nil
}

// with returns s with name set to v (v nil: deleted); ErrInvalid when the
// result would not encode within format.MaxPartBytes, ErrNotFound when
// deleting a name s does not hold. It copies only the path to name.
func (s *attrSet) with(name string, v *AttrValue) (*attrSet, error) {
	var (
		root *attrNode
		old  *Attr
		size = s.size
		n    = s.n
	)
	if size == 0 {
		size = attrFixed
	}
	if v == nil {
		if root, old = s.root.remove(name); old == nil {
			return nil, fmt.Errorf("%w: attribute %q", ErrNotFound, name)
		}
		size -= attrEncodedSize(*old)
		n--
	} else {
		a := Attr{name, *v}
		root, old = s.root.put(a)
		size += attrEncodedSize(a)
		if old != nil {
			size -= attrEncodedSize(*old)
		} else {
			n++
		}
	}
	if n == 0 {
		return emptyAttrs, nil
	}
	if size > format.MaxPartBytes {
		return nil, fmt.Errorf("%w: attributes would take %d bytes (at most %d per file or dataset)", ErrInvalid, size, format.MaxPartBytes)
	}
	return &attrSet{root: root, n: n, size: size}, nil
}

// Attribute encoding (FORMAT.md §5 "Attributes"), little-endian:
//
//	u8  version (5 when some attribute has a shape of 2 or more
//	    dimensions or is null, else 4; 1 to 3 are read: 1 names only the
//	    types 1..10, 2 only 1..13, 3 only 1..14; only 5 has kinds 5, 6)
//	u32 count
//	count × { u16 name length, name, u8 kind, u8 element type (0 for
//	          string/bytes, and for a null of text), [type 14 only: u32
//	          string length, u8 padding, u8 character set], [type 17 only:
//	          u32 description length, the type description (FORMAT.md
//	          §7.1)], [kind 5 only: u8 rank (2..32), rank × u64 dims],
//	          u32 value length in bytes (0 for kind 6), value }
//
// Names strictly increase (bytewise) and the version is the lowest that
// holds the set, so the encoding is canonical; a set without shaped or
// null attributes keeps the version-4 encoding that version-6 files hold.
// An empty set encodes to nothing (the part is absent).
const (
	// attrVersion is the encoding of shaped and null attributes;
	// attrVersionV4 the one written for sets without them.
	attrVersion   = 5
	attrVersionV4 = 4
	// attrVersionV1 to attrVersionV3 are read, never written: the
	// encodings before Bool and the complex types, before the
	// fixed-length strings, and before float16, bfloat16 and the
	// described types, so an attribute of a later type in one is damage.
	attrVersionV1 = 1
	attrVersionV2 = 2
	attrVersionV3 = 3
	attrFixed     = 1 + 4
	attrEntryMin  = 2 + 1 + 1 + 1 + 4 // shortest name, empty string value
)

func encodeAttrs(attrs []Attr) []byte {
	if len(attrs) == 0 {
		return nil
	}
	n := attrFixed
	for _, a := range attrs {
		n += attrEncodedSize(a)
	}
	b := make([]byte, 0, n)
	b = append(b, attrEncodingVersion(attrs))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(attrs)))
	for _, a := range attrs {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(a.Name)))
		b = append(b, a.Name...)
		t := a.Value.typ
		b = append(b, uint8(a.Value.kind), t.Code())
		if a.Value.dims != nil {
			b[len(b)-2] = attrKindShaped
		}
		b = append(b, attrTypeParams(t)...)
		if a.Value.dims != nil {
			b = append(b, uint8(len(a.Value.dims)))
			for _, d := range a.Value.dims {
				b = binary.LittleEndian.AppendUint64(b, d)
			}
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(a.Value.data)))
		b = append(b, a.Value.data...)
	}
	return b
}

// attrEncodingVersion is the version encodeAttrs writes attrs in: the
// lowest that holds them.
func attrEncodingVersion(attrs []Attr) uint8 {
	for _, a := range attrs {
		if a.Value.dims != nil || a.Value.kind == AttrNull {
			return attrVersion
		}
	}
	return attrVersionV4
}

// decodeAttrs decodes an attribute part read from disk. Every length is
// checked against the bytes present and the limits before anything is
// allocated; errors wrap ErrCorrupt. The result does not alias b.
func decodeAttrs(b []byte) (*attrSet, error) {
	if len(b) == 0 {
		return emptyAttrs, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: attributes: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) > format.MaxPartBytes {
		return nil, bad("%d bytes (at most %d)", len(b), format.MaxPartBytes)
	}
	if len(b) < attrFixed {
		return nil, bad("%d bytes, too short", len(b))
	}
	if b[0] < attrVersionV1 || b[0] > attrVersion {
		return nil, bad("encoding version %d (this scc reads %d to %d)", b[0], attrVersionV1, attrVersion)
	}
	count := binary.LittleEndian.Uint32(b[1:])
	p := b[attrFixed:]
	if count == 0 || uint64(count) > uint64(len(p)/attrEntryMin) {
		return nil, bad("%d attributes cannot fit in %d bytes", count, len(p))
	}
	attrs := make([]Attr, 0, count)
	for i := uint32(0); i < count; i++ {
		if len(p) < 2 {
			return nil, bad("attribute %d truncated", i)
		}
		nl := int(binary.LittleEndian.Uint16(p))
		p = p[2:]
		if nl > len(p) || len(p)-nl < 6 {
			return nil, bad("attribute %d truncated", i)
		}
		name := string(p[:nl])
		kind, typ := AttrKind(p[nl]), Type(p[nl+1])
		p = p[nl+2:]
		if (kind == attrKindShaped || kind == AttrNull) && b[0] < attrVersion {
			return nil, bad("attribute %q: kind %d in a version %d encoding", name, kind, b[0])
		}
		if typ == stringCode && b[0] >= attrVersionV3 {
			if len(p) < 6+4 {
				return nil, bad("attribute %q truncated", name)
			}
			typ = stringCode | Type(p[4])<<8 | Type(p[5])<<16 | Type(binary.LittleEndian.Uint32(p))<<32
			p = p[6:]
		}
		if typ == describedCode && b[0] >= attrVersionV4 {
			if len(p) < 4 || uint64(binary.LittleEndian.Uint32(p)) > uint64(len(p)-4) {
				return nil, bad("attribute %q: type description truncated", name)
			}
			dl := binary.LittleEndian.Uint32(p)
			node, err := format.DecodeType(p[4 : 4+dl])
			if err != nil || node.Code != format.TypeDescribed {
				return nil, bad("attribute %q: type description: %v", name, err)
			}
			typ = intern(node)
			p = p[4+dl:]
		}
		var dims []uint64
		if kind == attrKindShaped {
			if len(p) < 1 || p[0] < 2 || p[0] > MaxAttrRank || int(p[0])*8 > len(p)-1 {
				return nil, bad("attribute %q: shape truncated or of a bad rank", name)
			}
			dims = make([]uint64, p[0])
			for j := range dims {
				dims[j] = binary.LittleEndian.Uint64(p[1+8*j:])
			}
			p = p[1+8*len(dims):]
			kind = AttrArray
		}
		if len(p) < 4 {
			return nil, bad("attribute %q truncated", name)
		}
		vl := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if uint64(vl) > uint64(len(p)) {
			return nil, bad("attribute %q: value of %d bytes, %d left", name, vl, len(p))
		}
		v := AttrValue{kind: kind, typ: typ, data: slices.Clone(p[:vl]), dims: dims}
		p = p[vl:]
		if err := ValidateAttrName(name); err != nil {
			return nil, bad("attribute %d: %v", i, errors.Unwrap(err))
		}
		if err := v.validate(); err != nil {
			return nil, bad("attribute %q: %v", name, err)
		}
		if b[0] == attrVersionV1 && v.typ > Float64 || b[0] == attrVersionV2 && v.typ > Complex128 ||
			b[0] == attrVersionV3 && v.typ.Code() > stringCode.Code() {
			return nil, bad("attribute %q: type %v in a version %d encoding", name, v.typ, b[0])
		}
		if i > 0 && attrs[i-1].Name >= name {
			return nil, bad("names not strictly increasing (%q then %q)", attrs[i-1].Name, name)
		}
		attrs = append(attrs, Attr{name, v})
	}
	if len(p) != 0 {
		return nil, bad("%d trailing bytes", len(p))
	}
	set := newAttrSet(attrs, len(b))
	switch {
	case b[0] == attrVersion && attrEncodingVersion(attrs) != attrVersion:
		// No writer makes it: a set without shaped or null attributes
		// is written in version 4.
		return nil, bad("version %d encoding without a shaped or null attribute", b[0])
	case b[0] == attrVersionV4 || b[0] == attrVersion:
		set.enc.b = slices.Clone(b) // canonical: what encoding would make
	}
	return set, nil
}

// attrHolder is the attribute state of a File or a dataset.
type attrHolder struct {
	// mu serializes the read-modify-write of Set and Delete; readers load
	// set without it.
	mu  sync.Mutex
	set atomic.Pointer[attrSet]
}

func (h *attrHolder) load() *attrSet {
	if s := h.set.Load(); s != nil {
		return s
	}
	return emptyAttrs
}

// change applies one Set (v non-nil) or Delete; changed runs under h.mu
// after the new set is installed (it marks the owner dirty).
func (h *attrHolder) change(name string, v *AttrValue, changed func()) error {
	if err := ValidateAttrName(name); err != nil {
		return err
	}
	if v != nil {
		if err := v.validate(); err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	next, err := h.load().with(name, v)
	if err != nil {
		return err
	}
	h.set.Store(next)
	changed()
	return nil
}

func (h *attrHolder) get(name string) (AttrValue, error) {
	if v, ok := h.load().get(name); ok {
		return v, nil
	}
	return AttrValue{}, fmt.Errorf("%w: attribute %q", ErrNotFound, name)
}

func (h *attrHolder) list() []Attr { return h.load().list() }

// ---- Group (the File's root group holds the file's attributes) ----

func (f *File) attrCheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.checkOpen(); err != nil {
		return err
	}
	if f.readOnly {
		return ErrReadOnly
	}
	return nil
}

// ---- Dataset ----

// SetAttr sets a dataset attribute, replacing any of that name. It is
// durable after the next Flush or Close of the file.
func (d *Dataset) SetAttr(ctx context.Context, name string, v AttrValue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.check(true); err != nil {
		return err
	}
	return d.s.attrs.change(name, &v, func() { d.s.dirty.Store(true) })
}

// DeleteAttr removes a dataset attribute (ErrNotFound if there is none).
func (d *Dataset) DeleteAttr(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.check(true); err != nil {
		return err
	}
	return d.s.attrs.change(name, nil, func() { d.s.dirty.Store(true) })
}

// Attr returns a dataset attribute (ErrNotFound if there is none).
func (d *Dataset) Attr(name string) (AttrValue, error) {
	if err := d.check(false); err != nil {
		return AttrValue{}, err
	}
	return d.s.attrs.get(name)
}

// Attrs lists the dataset's attributes sorted by name.
func (d *Dataset) Attrs() ([]Attr, error) {
	if err := d.check(false); err != nil {
		return nil, err
	}
	return d.s.attrs.list(), nil
}
