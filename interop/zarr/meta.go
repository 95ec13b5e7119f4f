package zarr

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// dtypes maps engine types onto numpy type strings (Zarr v2 "dtype",
// little-endian) and Zarr v3 data_type names.
var dtypes = map[engine.Type]struct{ v2, v3 string }{
	engine.Int8: {"|i1", "int8"}, engine.Int16: {"<i2", "int16"}, engine.Int32: {"<i4", "int32"}, engine.Int64: {"<i8", "int64"},
	engine.Uint8: {"|u1", "uint8"}, engine.Uint16: {"<u2", "uint16"}, engine.Uint32: {"<u4", "uint32"}, engine.Uint64: {"<u8", "uint64"},
	engine.Float32: {"<f4", "float32"}, engine.Float64: {"<f8", "float64"},
	engine.Bool: {"|b1", "bool"}, engine.Complex64: {"<c8", "complex64"}, engine.Complex128: {"<c16", "complex128"},
}

// stringDtype is the one fixed-length string type Zarr holds without loss:
// numpy's "|S<n>" (v3: zarr-python's null_terminated_bytes), bytes padded
// with NULs that are not part of the value, which is scc's NullPad. It
// carries no character set; scc labels it ASCII, as h5py does.
func stringDtype(n int) engine.Type { return engine.FixedString(n, engine.NullPad, engine.ASCII) }

// zarrTypeOf returns the Zarr v2 dtype and v3 data_type of t, or an
// ErrUnsupported error saying why t has none.
func zarrTypeOf(t engine.Type) (v2 string, v3 any, err error) {
	if d, ok := dtypes[t]; ok {
		return d.v2, d.v3, nil
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
	if len(s) >= 3 {
		for t, d := range dtypes {
			if s[1:] == d.v2[1:] {
				switch s[0] {
				case '<', '|':
					return t, false, nil
				case '>':
					return t, t.Size() > 1, nil
				}
			}
		}
	}
	return 0, false, fmt.Errorf("%w: dtype %q (%s; scc holds i1..i8, u1..u8, f4, f8, b1, c8, c16)", ErrUnsupported, s, v2DtypeClass(s))
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

func parseV3Type(s string) (engine.Type, error) {
	for t, d := range dtypes {
		if s == d.v3 {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w: data_type %q (%s; scc holds int8..int64, uint8..uint64, float32, float64, bool, complex64, complex128)", ErrUnsupported, s, v3TypeClass(s))
}

// fillJSON is an element's fill value as Zarr metadata writes it: a JSON
// number, or "NaN", "Infinity", "-Infinity" for floats; a JSON boolean for
// bool; a [real, imaginary] pair of those float forms for the complex types
// (the v3 core data types' rule, and zarr-python 2's for "<c8"/"<c16").
func fillJSON(t engine.Type, b []byte) any {
	if t.IsString() {
		// Base64 of the element's bytes (numpy "S" in zarr-python 2 and
		// null_terminated_bytes in zarr-python 3).
		if len(b) == 0 {
			b = make([]byte, t.Size())
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	v := engine.RawAttr(engine.AttrScalar, t, b)
	return elemJSON(v, 0)
}

// elemJSON is element i of a numeric, bool or complex value as a JSON
// value, exact.
func elemJSON(v engine.AttrValue, i int) any {
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
			elemJSON(engine.RawAttr(engine.AttrScalar, pt, raw[:h]), 0),
			elemJSON(engine.RawAttr(engine.AttrScalar, pt, raw[h:]), 0),
		}
	}
	var u uint64
	for k := len(raw) - 1; k >= 0; k-- {
		u = u<<8 | uint64(raw[k])
	}
	switch t {
	case engine.Float32, engine.Float64:
		f := math.Float64frombits(u)
		bits := 64
		if t == engine.Float32 {
			f = float64(math.Float32frombits(uint32(u)))
			bits = 32
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

// parseElem converts a JSON number or special float string to an element
// of type t, little-endian; exact for integers, refused when out of range.
func parseElem(t engine.Type, v any) ([]byte, error) {
	if t.IsString() {
		return bytesFill(t, v)
	}
	switch t {
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

// typesKey is the attribute under which an export records the scc type of
// each attribute whose JSON form would not say it (numbers, byte strings),
// so that import restores the attributes exactly. Import reads it and does
// not keep it as an attribute.
const typesKey = "_scc_attr_types"

// attrsJSON converts attributes to a Zarr attribute object.
func attrsJSON(attrs []engine.Attr) (map[string]any, error) {
	out := map[string]any{}
	types := map[string]string{}
	for _, a := range attrs {
		if a.Name == typesKey {
			return nil, fmt.Errorf("%w: attribute name %q is reserved by the export", ErrUnsupported, typesKey)
		}
		v := a.Value
		if k := v.Kind(); (k == engine.AttrScalar || k == engine.AttrArray) && !jsonType(v.Type()) {
			return nil, fmt.Errorf("%w: attribute %q of type %v (the export maps the numeric, bool, complex and fixed-length string types)", ErrUnsupported, a.Name, v.Type())
		}
		if err := textExact(v); err != nil {
			return nil, fmt.Errorf("%w: attribute %q: %v", ErrUnsupported, a.Name, err)
		}
		switch v.Kind() {
		case engine.AttrString:
			s, _ := v.Str()
			out[a.Name] = s
		case engine.AttrBytes:
			out[a.Name] = base64.StdEncoding.EncodeToString(v.Bytes())
			types[a.Name] = "bytes"
		case engine.AttrScalar:
			out[a.Name] = elemJSON(v, 0)
			types[a.Name] = v.Type().String()
		case engine.AttrArray:
			list := make([]any, v.Len())
			for i := range list {
				list[i] = elemJSON(v, i)
			}
			out[a.Name] = list
			types[a.Name] = v.Type().String() + "[]"
		}
	}
	if len(types) > 0 {
		out[typesKey] = types
	}
	return out, nil
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
	if raw, ok := m[typesKey].(map[string]any); ok {
		for k, v := range raw {
			if s, ok := v.(string); ok {
				types[k] = s
			}
		}
	}
	for name, v := range m {
		if name == typesKey {
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

// jsonType reports whether elements of t have a JSON form (elemJSON,
// attrElem): a fixed-length string's is its text.
func jsonType(t engine.Type) bool {
	_, ok := dtypes[t]
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

func typeNamed(s string) (engine.Type, bool) {
	for _, t := range engine.Types {
		if jsonType(t) && t.String() == s {
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
