package zarr

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// stringDtype is the one fixed-length string type Zarr holds without loss:
// numpy's "|S<n>" (v3: zarr-python's null_terminated_bytes), bytes padded
// with NULs that are not part of the value, which is scc's NullPad. It
// carries no character set; scc labels it ASCII, as h5py does.
func stringDtype(n int) engine.Type { return engine.FixedString(n, engine.NullPad, engine.ASCII) }

// swapUnit is the size of the parts whose bytes a big-endian store swaps:
// the element, or for a complex type each of its two floats.
func swapUnit(t engine.Type) int {
	if t.IsString() {
		return 1
	}
	if t == engine.Complex64 || t == engine.Complex128 {
		return t.Size() / 2
	}
	return t.Size()
}

// parseV2Dtype returns the engine type of a numpy type string and whether
// its elements are big-endian.
func parseV2Dtype(s string) (engine.Type, bool, error) {
	if len(s) >= 3 && (s[0] == '|' || s[0] == '<' || s[0] == '>') && s[1] == 'S' {
		n, err := strconv.Atoi(s[2:])
		if err == nil && n >= 1 && n <= engine.MaxStringLen && strconv.Itoa(n) == s[2:] {
			return stringDtype(n), false, nil
		}
	}
	if len(s) >= 3 && (s[0] == '|' || s[0] == '<' || s[0] == '>') && s[1] == 'V' {
		// numpy's void: bytes scc does not interpret.
		n, err := strconv.Atoi(s[2:])
		if err == nil && n >= 1 && n <= engine.MaxTypeSize && strconv.Itoa(n) == s[2:] {
			return engine.Opaque(n, ""), false, nil
		}
	}
	if len(s) >= 3 {
		for t, d := range zarrmap.Dtypes {
			if s[1:] == d.V2[1:] {
				switch s[0] {
				case '<', '|':
					return t, false, nil
				case '>':
					return t, t.Size() > 1, nil
				}
			}
		}
	}
	return 0, false, fmt.Errorf("%w: dtype %q (%s; scc holds i1..i8, u1..u8, f2, f4, f8, b1, c8, c16, S<n>, V<n> and structured dtypes of those)", ErrUnsupported, s, v2DtypeClass(s))
}

// parseV3Struct returns the engine type of a v3 data_type object: only
// null_terminated_bytes (zarr-python's numpy "|S<n>").
func parseV3Struct(m map[string]any) (engine.Type, error) {
	if name, _ := m["name"].(string); name == "null_terminated_bytes" {
		cfg, _ := m["configuration"].(map[string]any)
		if n, ok := cfg["length_bytes"].(json.Number); ok {
			if v, err := strconv.Atoi(string(n)); err == nil && v >= 1 && v <= engine.MaxStringLen {
				return stringDtype(v), nil
			}
		}
		return 0, fmt.Errorf("%w: data_type %s: length_bytes must be 1..%d", ErrCorrupt, asJSON(m), engine.MaxStringLen)
	}
	return 0, fmt.Errorf("%w: data_type %s (an extension type)", ErrUnsupported, asJSON(m))
}

// v3Aliases are the other names Zarr v3 implementations give core types
// (zarrs' complex_float32 and complex_float64 are complex64 and
// complex128).
var v3Aliases = map[string]engine.Type{
	"bfloat16": engine.BFloat16, "complex_float32": engine.Complex64, "complex_float64": engine.Complex128,
}

func parseV3Type(s string) (engine.Type, error) {
	for t, d := range zarrmap.Dtypes {
		if s == d.V3 {
			return t, nil
		}
	}
	if t, ok := v3Aliases[s]; ok {
		return t, nil
	}
	if n, ok := rawBits(s); ok {
		return engine.Opaque(n, ""), nil
	}
	return 0, fmt.Errorf("%w: data_type %q (%s; scc holds int8..int64, uint8..uint64, float16, bfloat16, float32, float64, bool, complex64, complex128, r8..r%d)", ErrUnsupported, s, v3TypeClass(s), 8*engine.MaxTypeSize)
}

// rawBits reads v3's raw bits type "r<N>" (N a positive multiple of 8)
// as its byte count.
func rawBits(s string) (int, bool) {
	if len(s) < 2 || s[0] != 'r' || s[1] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil || strconv.Itoa(n) != s[1:] || n%8 != 0 || n/8 > engine.MaxTypeSize {
		return 0, false
	}
	return n / 8, true
}

// parseElem converts a JSON number or special float string to an element
// of type t, little-endian; exact for integers, refused when out of range.
func parseElem(t engine.Type, v any) ([]byte, error) {
	if t.IsString() {
		return bytesFill(t, v)
	}
	if t.IsDescribed() {
		return describedFill(t, v)
	}
	switch t {
	case engine.Float16, engine.BFloat16:
		if x, ok := v.(string); ok && strings.HasPrefix(x, "0x") { // v3: the bit pattern
			u, err := strconv.ParseUint(x[2:], 16, 16)
			if err != nil {
				return nil, fmt.Errorf("%w: float %q", ErrCorrupt, x)
			}
			return []byte{byte(u), byte(u >> 8)}, nil
		}
		b, err := parseElem(engine.Float64, v)
		if err != nil {
			return nil, err
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(b))
		h := engine.Float16Bits(f)
		if t == engine.BFloat16 {
			h = engine.BFloat16Bits(f)
		}
		return []byte{byte(h), byte(h >> 8)}, nil
	case engine.Bool:
		// A JSON boolean (v3's rule, zarr-python's writing); a number is
		// what some v2 writers put there, true unless zero (numpy's
		// bool() of it, which zarr-python reads it as).
		switch x := v.(type) {
		case bool:
			if x {
				return []byte{1}, nil
			}
			return []byte{0}, nil
		case json.Number:
			if f, err := strconv.ParseFloat(string(x), 64); err == nil {
				if f != 0 {
					return []byte{1}, nil
				}
				return []byte{0}, nil
			}
		}
		return nil, fmt.Errorf("%w: %s is not a bool", ErrCorrupt, asJSON(v))
	case engine.Complex64, engine.Complex128:
		pt := engine.Float32
		if t == engine.Complex128 {
			pt = engine.Float64
		}
		pair, ok := v.([]any)
		switch v.(type) {
		case json.Number, string:
			// A real number alone (some v2 writers): its imaginary part
			// is zero, nothing else it could mean.
			pair, ok = []any{v, json.Number("0")}, true
		}
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("%w: %s is not a [real, imaginary] pair", ErrCorrupt, asJSON(v))
		}
		re, err := parseElem(pt, pair[0])
		if err != nil {
			return nil, err
		}
		im, err := parseElem(pt, pair[1])
		if err != nil {
			return nil, err
		}
		return append(re, im...), nil
	}
	out := make([]byte, t.Size())
	put := func(u uint64) {
		for k := range out {
			out[k] = byte(u >> (8 * k))
		}
	}
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = x
	case bool:
		s = "0"
		if x {
			s = "1"
		}
	default:
		return nil, fmt.Errorf("%w: %s is not a number", ErrCorrupt, asJSON(v))
	}
	switch t {
	case engine.Float32, engine.Float64:
		var f float64
		switch {
		case s == "NaN":
			// The canonical quiet NaN numpy and JavaScript write (Go's
			// math.NaN has another payload).
			if t == engine.Float32 {
				put(0x7fc00000)
			} else {
				put(0x7ff8000000000000)
			}
			return out, nil
		case s == "Infinity":
			f = math.Inf(1)
		case s == "-Infinity":
			f = math.Inf(-1)
		case strings.HasPrefix(s, "0x"): // v3: the bit pattern in hex
			u, err := strconv.ParseUint(s[2:], 16, t.Size()*8)
			if err != nil {
				return nil, fmt.Errorf("%w: float %q", ErrCorrupt, s)
			}
			put(u)
			return out, nil
		default:
			var err error
			if f, err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("%w: float %q", ErrCorrupt, s)
			}
		}
		if t == engine.Float32 {
			put(uint64(math.Float32bits(float32(f))))
		} else {
			put(math.Float64bits(f))
		}
		return out, nil
	case engine.Int8, engine.Int16, engine.Int32, engine.Int64:
		bits := t.Size() * 8
		i, err := strconv.ParseInt(s, 10, bits)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			// An integral float ("1.0", "1e3") stands for its integer,
			// range-checked like one.
			if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				i, err = int64(f), nil
				if lim := int64(1) << (bits - 1); bits < 64 && (i < -lim || i >= lim) {
					err = strconv.ErrRange
				}
			}
		}
		if err != nil {
			return nil, elemErr(s, t, err)
		}
		put(uint64(i))
		return out, nil
	}
	bits := t.Size() * 8
	u, err := strconv.ParseUint(s, 10, bits)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			if f < 0 || bits < 64 && f >= float64(uint64(1)<<bits) {
				err = strconv.ErrRange
			} else {
				u, err = uint64(f), nil
			}
		}
	}
	if err == nil && strings.HasPrefix(s, "-") {
		err = strconv.ErrRange // ParseUint("-0")
	}
	if err != nil {
		return nil, elemErr(s, t, err)
	}
	put(u)
	return out, nil
}

// bytesFill is the fill value of a fixed-length bytes type ("|S<n>",
// null_terminated_bytes) as zarr-python reads it: base64 of the bytes,
// which it writes; failing that (older writers put a bare 0 there), the
// value numpy makes of the JSON value itself, its text in ASCII (0 is
// "0", 1.5 is "1.5", true is "True"). Either is cut to the element's
// size, as numpy cuts it, and padded with NULs.
func bytesFill(t engine.Type, v any) ([]byte, error) {
	var b []byte
	switch x := v.(type) {
	case string:
		var err error
		if b, err = base64.StdEncoding.DecodeString(x); err != nil {
			for i := 0; i < len(x); i++ {
				if x[i] >= 0x80 {
					return nil, fmt.Errorf("%w: %s is neither base64 nor ASCII text", ErrCorrupt, asJSON(v))
				}
			}
			b = []byte(x)
		}
	case json.Number:
		b = []byte(pyNumber(x))
	case bool:
		b = []byte("False")
		if x {
			b = []byte("True")
		}
	default:
		return nil, fmt.Errorf("%w: %s is not base64 of at most %d bytes", ErrCorrupt, asJSON(v), t.Size())
	}
	out := make([]byte, t.Size())
	copy(out, b)
	return out, nil
}

// pyNumber is Python's str() of a JSON number as the json module decodes
// it: an integer's digits, or a float's shortest repr ("1.0", "1e+16",
// "1e-05").
func pyNumber(n json.Number) string {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return i.String()
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	r := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(r, ".") {
		r += ".0"
	}
	return r
}

func elemErr(s string, t engine.Type, err error) error {
	if errors.Is(err, strconv.ErrRange) || strings.HasPrefix(s, "-") {
		return fmt.Errorf("%w: %s is out of range for %v", ErrCorrupt, s, t)
	}
	return fmt.Errorf("%w: %q is not a %v", ErrCorrupt, s, t)
}

// attrsJSON converts attributes to a Zarr attribute object, refusing the
// whole object with ErrUnsupported when one attribute has no Zarr form:
// an export leaves nothing of a node out silently.
func attrsJSON(attrs []engine.Attr) (map[string]any, error) {
	return zarrmap.AttrsJSON(attrs, func(err error) error { return err })
}

// jsonAttrs converts a Zarr attribute object (decoded with UseNumber) to
// attributes; values with no scc form (objects, null, mixed lists) are
// skipped and named in skipped. A value that does not fit the type the
// export recorded for it (an integer out of its range) is an error naming
// the attribute: keeping it would change it. An attribute whose name the
// engine refuses is skipped too, named in skipped and its refusal in
// badNames.
func jsonAttrs(m map[string]any) (attrs []engine.Attr, skipped []string, badNames []error, err error) {
	types := map[string]string{}
	if raw, ok := m[zarrmap.TypesKey].(map[string]any); ok {
		for k, v := range raw {
			if s, ok := v.(string); ok {
				types[k] = s
			}
		}
	}
	for name, v := range m {
		if name == zarrmap.TypesKey {
			continue
		}
		if err := attrNameErr(name); err != nil {
			skipped = append(skipped, fmt.Sprintf("%q (%v)", name, err))
			badNames = append(badNames, err)
			continue
		}
		val, err := jsonAttr(v, types[name])
		if err != nil {
			if types[name] != "" && errors.Is(err, ErrCorrupt) {
				return nil, nil, nil, fmt.Errorf("attribute %q: %w", name, err)
			}
			skipped = append(skipped, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		attrs = append(attrs, engine.Attr{Name: name, Value: val})
	}
	slices.SortFunc(attrs, func(a, b engine.Attr) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(skipped)
	return attrs, skipped, badNames, nil
}

func typeNamed(s string) (engine.Type, bool) {
	for _, t := range engine.Types {
		if zarrmap.JSONType(t) && t.String() == s {
			return t, true
		}
	}
	// A fixed-length string type, by its String form.
	var n int
	var pad, cs string
	if _, err := fmt.Sscanf(s, "string(%d, %s %s", &n, &pad, &cs); err == nil {
		for _, p := range []engine.StrPad{engine.NullTerm, engine.NullPad, engine.SpacePad} {
			for _, c := range []engine.Charset{engine.ASCII, engine.UTF8} {
				if t := engine.FixedString(n, p, c); t.Valid() && t.String() == s {
					return t, true
				}
			}
		}
	}
	return 0, false
}

// attrElem is one element of an attribute of type t from its JSON form:
// a fixed-length string's text, else parseElem's forms.
func attrElem(t engine.Type, v any) ([]byte, error) {
	if !t.IsString() {
		return parseElem(t, v)
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a string", ErrCorrupt, asJSON(v))
	}
	b, err := engine.EncodeString(t, s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return b, nil
}

func jsonAttr(v any, typ string) (engine.AttrValue, error) {
	if typ == zarrmap.NullType || strings.HasPrefix(typ, zarrmap.NullType+" ") {
		if v != nil {
			return engine.AttrValue{}, fmt.Errorf("typed %s but not null", typ)
		}
		if typ == zarrmap.NullType {
			return engine.NullAttr(0), nil
		}
		t, ok := typeNamed(strings.TrimPrefix(typ, zarrmap.NullType+" "))
		if !ok {
			return engine.AttrValue{}, fmt.Errorf("typed %s, an unknown type", typ)
		}
		return engine.NullAttr(t), nil
	}
	if t, dims, ok := shapedType(typ); ok {
		var le []byte
		if err := nestedElems(t, v, dims, &le); err != nil {
			return engine.AttrValue{}, err
		}
		a, err := engine.RawAttr(engine.AttrArray, t, le).WithShape(dims...)
		if err != nil {
			return engine.AttrValue{}, fmt.Errorf("typed %s: %v", typ, err)
		}
		return a, nil
	}
	if typ == "bytes" {
		s, ok := v.(string)
		if b, err := base64.StdEncoding.DecodeString(s); ok && err == nil {
			return engine.BytesAttr(b), nil
		}
		return engine.AttrValue{}, fmt.Errorf("typed bytes but not base64")
	}
	if t, ok := typeNamed(strings.TrimSuffix(typ, "[]")); ok {
		if strings.HasSuffix(typ, "[]") {
			list, ok := v.([]any)
			if !ok {
				return engine.AttrValue{}, fmt.Errorf("typed %s but not a list", typ)
			}
			var le []byte
			for _, x := range list {
				b, err := attrElem(t, x)
				if err != nil {
					return engine.AttrValue{}, err
				}
				le = append(le, b...)
			}
			return engine.RawAttr(engine.AttrArray, t, le), nil
		}
		b, err := attrElem(t, v)
		if err != nil {
			return engine.AttrValue{}, err
		}
		return engine.RawAttr(engine.AttrScalar, t, b), nil
	}
	switch x := v.(type) {
	case string:
		return engine.StringAttr(x), nil
	case json.Number:
		t := numberType(x)
		b, err := parseElem(t, x)
		if err != nil {
			return engine.AttrValue{}, err
		}
		return engine.RawAttr(engine.AttrScalar, t, b), nil
	case []any:
		if len(x) == 0 {
			return engine.ArrayAttr([]float64{}), nil
		}
		t := engine.Int64
		for _, e := range x {
			n, ok := e.(json.Number)
			if !ok {
				if s, isStr := e.(string); isStr && (s == "NaN" || s == "Infinity" || s == "-Infinity") {
					t = engine.Float64
					continue
				}
				return engine.AttrValue{}, fmt.Errorf("list of non-numbers")
			}
			if nt := numberType(n); nt == engine.Float64 || nt == engine.Uint64 && t == engine.Int64 {
				if t != engine.Float64 {
					t = nt
				}
			}
		}
		var le []byte
		for _, e := range x {
			b, err := parseElem(t, e)
			if err != nil {
				return engine.AttrValue{}, err
			}
			le = append(le, b...)
		}
		return engine.RawAttr(engine.AttrArray, t, le), nil
	}
	return engine.AttrValue{}, fmt.Errorf("%T has no scc attribute type", v)
}

// shapedType reads the recorded type of an N-D attribute, the element
// type's name and its dimensions ("int32[2,3]", zarrmap.ShapeSuffix).
func shapedType(typ string) (engine.Type, []uint64, bool) {
	i := strings.LastIndexByte(typ, '[')
	if i < 0 || !strings.HasSuffix(typ, "]") || strings.HasSuffix(typ, "[]") {
		return 0, nil, false
	}
	parts := strings.Split(typ[i+1:len(typ)-1], ",")
	if len(parts) < 2 || len(parts) > engine.MaxAttrRank {
		return 0, nil, false
	}
	t, ok := typeNamed(typ[:i])
	if !ok {
		return 0, nil, false
	}
	dims := make([]uint64, len(parts))
	for j, p := range parts {
		d, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return 0, nil, false
		}
		dims[j] = d
	}
	return t, dims, true
}

// nestedElems appends to le the elements of v, nested lists of dims,
// row-major; a list of another length than its dimension is an error.
func nestedElems(t engine.Type, v any, dims []uint64, le *[]byte) error {
	if len(dims) == 0 {
		b, err := attrElem(t, v)
		*le = append(*le, b...)
		return err
	}
	list, ok := v.([]any)
	if !ok || uint64(len(list)) != dims[0] {
		return fmt.Errorf("not nested lists of the recorded shape")
	}
	for _, x := range list {
		if err := nestedElems(t, x, dims[1:], le); err != nil {
			return err
		}
	}
	return nil
}

// numberType is the type a bare JSON number imports as: int64, uint64
// above int64's range, float64 otherwise.
func numberType(n json.Number) engine.Type {
	s := string(n)
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return engine.Int64
	}
	if _, err := strconv.ParseUint(s, 10, 64); err == nil {
		return engine.Uint64
	}
	return engine.Float64
}
