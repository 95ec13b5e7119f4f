// Package zarrmap is the one mapping of scc datasets onto Zarr (v2 and
// v3): data types, fill values, attributes, names, the codec chain a
// filter pipeline becomes and its encoding, the chunk grid's edge
// handling, the chunk shape of a virtual dataset, and the metadata
// documents. Package interop/zarr writes stores with it and package serve
// serves live views with it, so a served view and an exported store of
// the same file say the same thing.
//
// It lives under the module's internal/ rather than below interop/zarr
// because its two users sit in different subtrees (interop/zarr/internal
// would be out of serve's reach), and it is internal because it is no
// API of its own: the mapping's public faces are zarr.Export and
// serve.Server, and these helpers change with them. Where the two users
// differ in policy (an attribute with no Zarr form fails a strict export
// but is left out of a view; a live view reads a chunk against the extent
// it checked), the functions here take the policy as an argument.
//
// Decoding (import) is interop/zarr's alone and stays there.
package zarrmap

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/scc-dev/scc/engine"
)

// The Zarr bridge's errors, which package zarr exports under the same
// names.
var (
	// ErrUnsupported: the store or file uses something the other side
	// cannot represent (a data type, a codec, a name).
	ErrUnsupported = errors.New("zarr: unsupported")
	// ErrCorrupt: a Zarr chunk or metadata document does not decode.
	ErrCorrupt = errors.New("zarr: corrupt store")
)

// A Dtype is an engine type's Zarr names: the numpy type string (v2
// "dtype", little-endian) and the v3 data_type.
type Dtype struct{ V2, V3 string }

// Dtypes maps the engine's numeric and bool types onto their Zarr names.
var Dtypes = map[engine.Type]Dtype{
	engine.Int8: {"|i1", "int8"}, engine.Int16: {"<i2", "int16"}, engine.Int32: {"<i4", "int32"}, engine.Int64: {"<i8", "int64"},
	engine.Uint8: {"|u1", "uint8"}, engine.Uint16: {"<u2", "uint16"}, engine.Uint32: {"<u4", "uint32"}, engine.Uint64: {"<u8", "uint64"},
	engine.Float16: {"<f2", "float16"}, engine.Float32: {"<f4", "float32"}, engine.Float64: {"<f8", "float64"},
	engine.Bool: {"|b1", "bool"}, engine.Complex64: {"<c8", "complex64"}, engine.Complex128: {"<c16", "complex128"},
}

// TypeOf returns the Zarr v2 dtype and v3 data_type of t, or an
// ErrUnsupported error saying why t has none. The v2 dtype is a numpy
// type string, or for a compound numpy's list form (structured.go); v3
// is nil for a type only v2 holds (V3Refusal says why), v2 nil for one
// only v3 holds (bfloat16; V2Refusal). DataType picks one version's.
func TypeOf(t engine.Type) (v2 any, v3 any, err error) {
	if d, ok := Dtypes[t]; ok {
		return d.V2, d.V3, nil
	}
	if t.IsDescribed() || t == engine.BFloat16 {
		return describedDtype(t)
	}
	if !t.IsString() {
		return "", nil, fmt.Errorf("%w: %v dataset (no Zarr data type)", ErrUnsupported, t)
	}
	n := t.StrLen()
	switch {
	case t.Charset() == engine.UTF8:
		// numpy's "<U<n>" (v3 fixed_length_utf32) is n UTF-32 code
		// points; a UTF-8 type is a byte length, whose n bytes hold n/4
		// to n code points. Either mapping changes what fits, so none
		// is made.
		return "", nil, fmt.Errorf("%w: %v dataset: Zarr's fixed-length unicode (\"<U%d\", fixed_length_utf32) counts UTF-32 code points, not UTF-8 bytes, so no Zarr data type keeps a UTF-8 byte length", ErrUnsupported, t, n)
	case t.Pad() != engine.NullPad:
		return "", nil, fmt.Errorf("%w: %v dataset: Zarr's fixed-length bytes (\"|S%d\", null_terminated_bytes) are NUL-padded; the %v padding rule has no Zarr form", ErrUnsupported, t, n, t.Pad())
	}
	return fmt.Sprintf("|S%d", n), map[string]any{"name": "null_terminated_bytes", "configuration": map[string]any{"length_bytes": n}}, nil
}

// DataType is t's data type in Zarr version (TypeOf's v2 or v3), or an
// ErrUnsupported error saying why that version has none.
func DataType(t engine.Type, version int) (any, error) {
	v2, v3, err := TypeOf(t)
	switch {
	case err != nil:
		return nil, err
	case version == 3 && v3 == nil:
		return nil, V3Refusal(t)
	case version == 3:
		return v3, nil
	case v2 == nil:
		return nil, V2Refusal(t)
	}
	return v2, nil
}

// FillJSON is an element's fill value as Zarr metadata writes it: a JSON
// number, or "NaN", "Infinity", "-Infinity" for floats; a JSON boolean for
// bool; a [real, imaginary] pair of those float forms for the complex types
// (the v3 core data types' rule, and zarr-python 2's for "<c8"/"<c16").
func FillJSON(t engine.Type, b []byte) any {
	if t.Class() == engine.ClassEnum {
		return FillJSON(t.Base(), b)
	}
	if t.Class() == engine.ClassBitfield {
		return FillJSON(BitfieldBase(t), b)
	}
	if t.IsString() || t.IsDescribed() {
		// (zarr-python 2 writes a structured or void fill value as base64
		// of its bytes too.)
		// Base64 of the element's bytes (numpy "S" in zarr-python 2 and
		// null_terminated_bytes in zarr-python 3).
		if len(b) == 0 {
			b = make([]byte, t.Size())
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	v := engine.RawAttr(engine.AttrScalar, t, b)
	return ElemJSON(v, 0)
}

// ElemJSON is element i of a numeric, bool, complex or fixed-length
// string value as a JSON value, exact.
func ElemJSON(v engine.AttrValue, i int) any {
	t := v.Type()
	raw := v.Bytes()[i*t.Size() : (i+1)*t.Size()]
	if t.IsString() {
		return engine.DecodeString(t, raw)
	}
	switch t {
	case engine.Bool:
		return raw[0] != 0
	case engine.Complex64, engine.Complex128:
		pt, h := engine.Float32, t.Size()/2
		if t == engine.Complex128 {
			pt = engine.Float64
		}
		return []any{
			ElemJSON(engine.RawAttr(engine.AttrScalar, pt, raw[:h]), 0),
			ElemJSON(engine.RawAttr(engine.AttrScalar, pt, raw[h:]), 0),
		}
	}
	var u uint64
	for k := len(raw) - 1; k >= 0; k-- {
		u = u<<8 | uint64(raw[k])
	}
	switch t {
	case engine.Float16, engine.BFloat16, engine.Float32, engine.Float64:
		f := math.Float64frombits(u)
		bits := 64
		switch t {
		case engine.Float32:
			f = float64(math.Float32frombits(uint32(u)))
			bits = 32
		case engine.BFloat16:
			f = engine.BFloat16FromBits(uint16(u)) // exact in a float32
			bits = 32
		case engine.Float16:
			f = engine.Float16FromBits(uint16(u)) // exact in a float64
		}
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, bits))
	case engine.Int8, engine.Int16, engine.Int32, engine.Int64:
		shift := 64 - 8*t.Size()
		return json.Number(strconv.FormatInt(int64(u<<shift)>>shift, 10))
	}
	return json.Number(strconv.FormatUint(u, 10))
}

// TypesKey is the attribute under which an export records the scc type of
// each attribute whose JSON form would not say it (numbers, byte strings,
// shapes, nulls): the type's name, "T[]" for an array, "T[2,3]" for one
// of 2 or more dimensions (nested lists), "null T" or "null" (text) for a
// null (JSON null), so that import restores the attributes exactly. Import
// reads it and does not keep it as an attribute.
const TypesKey = "_scc_attr_types"

// AttrsJSON converts attributes to a Zarr attribute object. An attribute
// with no Zarr form is handed to skip with an ErrUnsupported error saying
// why: skip returns nil to leave it out and go on (a served view), or an
// error to fail the whole object with (an export).
func AttrsJSON(attrs []engine.Attr, skip func(error) error) (map[string]any, error) {
	out := map[string]any{}
	types := map[string]string{}
	for _, a := range attrs {
		if err := attrErr(a); err != nil {
			if err := skip(err); err != nil {
				return nil, err
			}
			continue
		}
		v := a.Value
		switch v.Kind() {
		case engine.AttrString:
			s, _ := v.Str()
			out[a.Name] = s
		case engine.AttrBytes:
			out[a.Name] = base64.StdEncoding.EncodeToString(v.Bytes())
			types[a.Name] = "bytes"
		case engine.AttrScalar:
			out[a.Name] = ElemJSON(v, 0)
			types[a.Name] = v.Type().String()
		case engine.AttrArray:
			list := make([]any, v.Len())
			for i := range list {
				list[i] = ElemJSON(v, i)
			}
			if dims := v.Shape(); len(dims) > 1 {
				// Nested lists, row-major, as numpy's tolist gives them;
				// the shape goes in the type so that an empty dimension
				// comes back.
				out[a.Name] = nestJSON(list, dims)
				types[a.Name] = v.Type().String() + ShapeSuffix(dims)
				break
			}
			out[a.Name] = list
			types[a.Name] = v.Type().String() + "[]"
		case engine.AttrNull:
			out[a.Name] = nil
			types[a.Name] = NullType
			if t := v.Type(); t != 0 {
				types[a.Name] += " " + t.String()
			}
		}
	}
	if len(types) > 0 {
		out[TypesKey] = types
	}
	return out, nil
}

// NullType is the recorded type of a null attribute of text; one of an
// element type records "null " and the type's name. Its value is JSON null.
const NullType = "null"

// ShapeSuffix is the suffix an N-D attribute's recorded type carries:
// its dimensions, "[2,3]".
func ShapeSuffix(dims []uint64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// nestJSON splits list (the product of dims elements) into nested lists.
func nestJSON(list []any, dims []uint64) []any {
	if len(dims) == 1 {
		return list
	}
	n := int(dims[0])
	out := make([]any, n)
	step := 0
	if n > 0 {
		step = len(list) / n
	}
	for i := range out {
		out[i] = nestJSON(list[i*step:(i+1)*step], dims[1:])
	}
	return out
}

// attrErr is why a has no Zarr form, or nil.
func attrErr(a engine.Attr) error {
	if a.Name == TypesKey {
		return fmt.Errorf("%w: attribute name %q is reserved by the export", ErrUnsupported, TypesKey)
	}
	v := a.Value
	if k := v.Kind(); (k == engine.AttrScalar || k == engine.AttrArray || k == engine.AttrNull && v.Type() != 0) && !JSONType(v.Type()) {
		return fmt.Errorf("%w: attribute %q of type %v (the export maps the numeric, bool, complex and fixed-length string types)", ErrUnsupported, a.Name, v.Type())
	}
	if err := textExact(v); err != nil {
		return fmt.Errorf("%w: attribute %q: %v", ErrUnsupported, a.Name, err)
	}
	return nil
}

// JSONType reports whether elements of t have a JSON form (ElemJSON, and
// import's reading of it): a fixed-length string's is its text.
func JSONType(t engine.Type) bool {
	_, ok := Dtypes[t]
	return ok || t.IsString() && t.Valid()
}

// textExact reports an error unless every element of a fixed-length
// string value is what EncodeString makes of its text, so that the JSON
// text brings back the same bytes (a raw write may have stored bytes after
// a NUL terminator, or bytes outside the character set, which text loses).
func textExact(v engine.AttrValue) error {
	t := v.Type()
	if !t.IsString() || v.Kind() != engine.AttrScalar && v.Kind() != engine.AttrArray {
		return nil
	}
	raw, es := v.Bytes(), t.Size()
	for i := 0; i < len(raw); i += es {
		b, err := engine.EncodeString(t, engine.DecodeString(t, raw[i:i+es]))
		if err != nil || string(b) != string(raw[i:i+es]) {
			return fmt.Errorf("element %d of %v has bytes its text does not give back", i/es, t)
		}
	}
	return nil
}

// NameErr is why name cannot cross as a Zarr node path, or nil: the
// engine's name rule (which older files or a foreign store may break),
// and components starting with ".z", which v2 keeps for its metadata
// keys.
func NameErr(name string) error {
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

// NameErrs is the refusal of each dataset name of a file Zarr cannot
// hold: NameErr's, and a dataset inside another (a Zarr array has no
// children).
func NameErrs(names []string) map[string]error {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	bad := map[string]error{}
	for _, n := range names {
		if err := NameErr(n); err != nil {
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

// ASCIIJSON escapes every non-ASCII character of a JSON text (\uXXXX,
// surrogate pairs above the BMP), which every reader decodes;
// zarr-python 2 fails on raw UTF-8 in .zattrs. Outside strings JSON holds
// only ASCII, so the escapes land inside strings.
func ASCIIJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", r1, r2)
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
	}
	return out
}

// GroupMeta is a group's metadata document: v3 zarr.json, holding attrs
// (nil is none); v2 .zgroup, whose attributes are the .zattrs document
// attrs itself, written or not as the caller's store layout has it.
func GroupMeta(version int, attrs map[string]any) map[string]any {
	if version == 3 {
		if attrs == nil {
			attrs = map[string]any{}
		}
		return map[string]any{"zarr_format": 3, "node_type": "group", "attributes": attrs}
	}
	return map[string]any{"zarr_format": 2}
}

// ArrayMeta is an array's metadata document: v2 .zarray (its attributes
// are the .zattrs document attrs itself), v3 zarr.json, holding attrs.
// Elements are little-endian in C order, chunks are keyed "i.j.k" (v2)
// or "c/i/j/k" (v3), and chain is the codec chain after the bytes codec.
func ArrayMeta(version int, typ engine.Type, shape, chunk []uint64, fill []byte, chain []Codec, attrs map[string]any) (map[string]any, error) {
	if _, err := DataType(typ, version); err != nil {
		return nil, err
	}
	dtV2, dtV3, _ := TypeOf(typ)
	switch typ.Class() {
	case engine.ClassEnum:
		// The names go in an attribute, which import reads to make the
		// enum again (structured.go).
		if attrs == nil {
			attrs = map[string]any{}
		}
		attrs[EnumAttr] = EnumJSON(typ)
	case engine.ClassBitfield:
		if attrs == nil {
			attrs = map[string]any{}
		}
		attrs[BitfieldAttr] = 8 * typ.Size()
	}
	if nt, ok := timeOf(typ, attrs); ok {
		// The mark becomes the data type (numpytime.go): it is taken out
		// of attrs, which the caller writes after.
		dtV2, dtV3 = nt.V2(), nt.V3()
		delete(attrs, DtypeAttr)
	}
	fillv := FillJSON(typ, fill)
	if version == 3 && typ.Class() == engine.ClassOpaque {
		fillv = RawBitsFill(typ, fill)
	}
	if shape == nil {
		// A rank-0 array's shape and chunks are empty lists, not null.
		shape, chunk = []uint64{}, []uint64{}
	}
	if version == 2 {
		meta := map[string]any{
			"zarr_format": 2, "shape": shape, "chunks": chunk, "dtype": dtV2,
			"fill_value": fillv, "order": "C", "filters": nil, "compressor": nil, "dimension_separator": ".",
		}
		if n := len(chain); n > 0 {
			meta["compressor"] = chain[n-1].JSON(2)
			if n > 1 {
				fs := make([]any, n-1)
				for i, c := range chain[:n-1] {
					fs[i] = c.JSON(2)
				}
				meta["filters"] = fs
			}
		}
		return meta, nil
	}
	codecs := []any{map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}}}
	for _, c := range chain {
		codecs = append(codecs, c.JSON(3))
	}
	return map[string]any{
		"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtV3,
		"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": chunk}},
		"chunk_key_encoding": map[string]any{"name": "default", "configuration": map[string]any{"separator": "/"}},
		"fill_value":         fillv, "codecs": codecs, "attributes": attrs,
	}, nil
}
