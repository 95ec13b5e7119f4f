package zarr

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/scc-dev/scc/engine"
)

// numpy's structured dtypes in Zarr v2 metadata (the list form
// [[name, dtype], [name, dtype, shape], ...], dtype a type string or a
// nested list) onto scc compounds: fields packed in order, an unnamed
// void field ["", "|V<n>"] as padding (numpy's own writing of an aligned
// dtype's gaps), a shape making the field an array type. The list is
// foreign input: its nesting, field count, names, shapes and sizes are
// bounded before anything is built, and a malformed one is ErrCorrupt, a
// well-formed one scc cannot hold ErrUnsupported, each naming the field.

// swapSpan is a part of an element whose bytes a big-endian store reverses.
type swapSpan struct{ off, size int }

// parseStructured reads a structured dtype's list form into a compound
// and the spans of its big-endian numbers.
func parseStructured(v []any, depth int) (engine.Type, []swapSpan, error) {
	if depth >= engine.MaxTypeDepth {
		return 0, nil, fmt.Errorf("%w: structured dtype nested more than %d deep", ErrUnsupported, engine.MaxTypeDepth)
	}
	if len(v) == 0 || len(v) > engine.MaxTypeMembers {
		return 0, nil, fmt.Errorf("%w: structured dtype of %d fields (1..%d)", ErrCorrupt, len(v), engine.MaxTypeMembers)
	}
	var fields []engine.Field
	var spans []swapSpan
	off := 0
	for i, e := range v {
		ent, ok := e.([]any)
		if !ok || len(ent) < 2 || len(ent) > 3 {
			return 0, nil, fmt.Errorf("%w: structured dtype field %d: %s is not [name, dtype] or [name, dtype, shape]", ErrCorrupt, i, asJSON(e))
		}
		name, ok := ent[0].(string)
		if !ok {
			// numpy's (title, name) pairs have no scc form.
			return 0, nil, fmt.Errorf("%w: structured dtype field %d: name %s is not a string", ErrUnsupported, i, asJSON(ent[0]))
		}
		if len(name) > 1024 {
			return 0, nil, fmt.Errorf("%w: structured dtype field %d: a name of %d bytes (at most 1024)", ErrUnsupported, i, len(name))
		}
		var ft engine.Type
		var fs []swapSpan
		switch d := ent[1].(type) {
		case string:
			t, be, err := parseV2Dtype(d)
			if err != nil {
				return 0, nil, fmt.Errorf("field %q: %w", name, err)
			}
			ft = t
			if be {
				fs = swapSpans(t)
			}
		case []any:
			t, sub, err := parseStructured(d, depth+1)
			if err != nil {
				return 0, nil, fmt.Errorf("field %q: %w", name, err)
			}
			ft, fs = t, sub
		default:
			return 0, nil, fmt.Errorf("%w: structured dtype field %q: dtype %s", ErrCorrupt, name, asJSON(ent[1]))
		}
		if len(ent) == 3 {
			shape, ok := ent[2].([]any)
			if !ok || len(shape) == 0 || len(shape) > engine.MaxRank {
				return 0, nil, fmt.Errorf("%w: structured dtype field %q: shape %s", ErrCorrupt, name, asJSON(ent[2]))
			}
			dims := make([]int, len(shape))
			n := uint64(ft.Size())
			for k, x := range shape {
				num, ok := x.(json.Number)
				d, err := strconv.ParseUint(string(num), 10, 32)
				if !ok || err != nil || d == 0 {
					return 0, nil, fmt.Errorf("%w: structured dtype field %q: shape %s", ErrCorrupt, name, asJSON(ent[2]))
				}
				if n *= d; n > engine.MaxTypeSize {
					return 0, nil, fmt.Errorf("%w: structured dtype field %q of shape %s exceeds %d bytes", ErrUnsupported, name, asJSON(ent[2]), engine.MaxTypeSize)
				}
				dims[k] = int(d)
			}
			es := ft.Size()
			var all []swapSpan
			for k := 0; k < int(n)/es; k++ {
				for _, s := range fs {
					all = append(all, swapSpan{k*es + s.off, s.size})
				}
			}
			ft, fs = engine.ArrayOf(ft, dims...), all
		}
		if !ft.Valid() || off+ft.Size() > engine.MaxTypeSize {
			return 0, nil, fmt.Errorf("%w: structured dtype of more than %d bytes (field %q)", ErrUnsupported, engine.MaxTypeSize, name)
		}
		if name == "" && ft.Class() == engine.ClassOpaque {
			// Padding: the bytes stay, no field names them.
			off += ft.Size()
			continue
		}
		for _, s := range fs {
			spans = append(spans, swapSpan{off + s.off, s.size})
		}
		fields = append(fields, engine.Field{Name: name, Offset: off, Type: ft})
		off += ft.Size()
	}
	t := engine.Compound(off, fields...)
	if !t.Valid() {
		return 0, nil, fmt.Errorf("%w: structured dtype %s: scc refuses the compound (no named field, repeated or empty names)", ErrUnsupported, asJSON(v))
	}
	return t, spans, nil
}

// swapSpans are the parts of a big-endian number type's element.
func swapSpans(t engine.Type) []swapSpan {
	u := swapUnit(t)
	if u <= 1 {
		return nil
	}
	var s []swapSpan
	for o := 0; o < t.Size(); o += u {
		s = append(s, swapSpan{o, u})
	}
	return s
}

// swapParts reverses the bytes of each span of every es-byte element.
func swapParts(b []byte, es int, spans []swapSpan) []byte {
	out := append([]byte(nil), b...)
	for e := 0; e+es <= len(out); e += es {
		for _, s := range spans {
			p := out[e+s.off : e+s.off+s.size]
			for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
				p[i], p[j] = p[j], p[i]
			}
		}
	}
	return out
}

// describedFill is the fill value of a compound or opaque type:
// base64 of its bytes as zarr-python 2 writes it (in the stored byte
// order: the caller swaps), or 0 for zero.
func describedFill(t engine.Type, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil || len(b) != t.Size() {
			return nil, fmt.Errorf("%w: fill value %s is not base64 of one %d-byte element", ErrCorrupt, asJSON(v), t.Size())
		}
		return b, nil
	case json.Number:
		if x == "0" {
			return make([]byte, t.Size()), nil
		}
	case []any:
		// v3's raw bits: a list of the element's bytes.
		if t.Class() == engine.ClassOpaque && len(x) == t.Size() {
			b := make([]byte, len(x))
			for i, e := range x {
				n, ok := e.(json.Number)
				u, err := strconv.ParseUint(string(n), 10, 8)
				if !ok || err != nil {
					return nil, fmt.Errorf("%w: fill value %s: byte %d is not 0..255", ErrCorrupt, asJSON(v), i)
				}
				b[i] = byte(u)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: fill value %s of a %v array", ErrCorrupt, asJSON(v), t)
}
