package zarrmap

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/scc-dev/scc/engine"
)

// scc's described types in Zarr. Zarr v2's dtype is numpy's: a compound
// is numpy's list form of a structured dtype, [[name, dtype], [name,
// dtype, shape], ...], fields packed one after the other (the list has no
// offsets), so a gap in the compound is written as numpy writes the
// padding of its aligned dtypes, an unnamed void field ["", "|V<n>"]
// (which zarr-python reads as a void field numpy names "f<i>"), and an
// array-typed field as its element type and shape; an opaque type is
// numpy's void "|V<n>" (its tag is not kept); an enum is its base
// integer type, the names in the attribute EnumAttr, from which import
// makes the enum again. Zarr v3's core data types have none of these:
// V3Refusal says so.

// EnumAttr is the attribute of an exported enum dataset holding its
// members: a JSON object {"base": <v3 integer type name>, "members":
// [[name, value], ...]} in the members' order.
const EnumAttr = "scc:enum"

// BitfieldAttr marks an exported bitfield dataset, written as the
// unsigned integer of its size (BitfieldBase): its value is the size in
// bits.
const BitfieldAttr = "scc:bitfield"

// BitfieldBase is the unsigned integer type a bitfield of t's size
// crosses as.
func BitfieldBase(t engine.Type) engine.Type {
	return map[int]engine.Type{1: engine.Uint8, 2: engine.Uint16, 4: engine.Uint32, 8: engine.Uint64}[t.Size()]
}

// describedDtype is TypeOf for bfloat16 and the described types.
func describedDtype(t engine.Type) (v2 any, v3 any, err error) {
	switch t.Class() {
	case engine.ClassEnum:
		d := Dtypes[t.Base()]
		return d.V2, d.V3, nil
	case engine.ClassOpaque:
		// v3's raw bits type r<N>: N/8 bytes the reader does not
		// interpret (its tag is not kept either).
		return fmt.Sprintf("|V%d", t.Size()), fmt.Sprintf("r%d", 8*t.Size()), nil
	case engine.ClassCompound:
		l, err := structDescr(t, 0)
		if err != nil {
			return nil, nil, err
		}
		return l, nil, nil
	case engine.ClassArray:
		return nil, nil, fmt.Errorf("%w: %v dataset: numpy spreads an array type into the array's dimensions, so no Zarr dtype keeps it (an array type crosses as a field of a compound)", ErrUnsupported, t)
	case engine.ClassBitfield:
		// numpy and Zarr have no bitfield type: its unsigned integer of
		// the same size, marked by BitfieldAttr, from which import makes
		// the bitfield again.
		d := Dtypes[BitfieldBase(t)]
		return d.V2, d.V3, nil
	}
	if t == engine.BFloat16 {
		// A v3 extension data type (zarrs and zarr-python 3 with
		// ml_dtypes read it); numpy's dtype strings have none.
		return nil, "bfloat16", nil
	}
	return nil, nil, fmt.Errorf("%w: %v dataset (no Zarr data type)", ErrUnsupported, t)
}

// V3Refusal is why t, which Zarr v2 holds, has no Zarr v3 data type.
func V3Refusal(t engine.Type) error {
	return fmt.Errorf("%w: %v dataset: Zarr v3's data types have no structured type (export it as Zarr v2)", ErrUnsupported, t)
}

// V2Refusal is why t, which Zarr v3 holds, has no Zarr v2 dtype.
func V2Refusal(t engine.Type) error {
	return fmt.Errorf("%w: %v dataset: numpy (and so Zarr v2 and zarr-python 2) has no bfloat16 type (export it as Zarr v3, data type \"bfloat16\")", ErrUnsupported, t)
}

// RawBitsFill is an opaque element's fill value as Zarr v3 writes that of
// a raw bits type r<N>: a list of its N/8 bytes.
func RawBitsFill(t engine.Type, b []byte) any {
	if len(b) == 0 {
		b = make([]byte, t.Size())
	}
	out := make([]any, len(b))
	for i, x := range b {
		out[i] = json.Number(strconv.Itoa(int(x)))
	}
	return out
}

// structDescr is a compound's numpy list form.
func structDescr(t engine.Type, depth int) ([]any, error) {
	if depth > engine.MaxTypeDepth {
		return nil, fmt.Errorf("%w: %v: nested too deep", ErrUnsupported, t)
	}
	var out []any
	off := 0
	for _, f := range t.Fields() {
		if f.Offset < off {
			return nil, fmt.Errorf("%w: %v dataset: field %q at offset %d is before the end of the one before it; numpy's list form lays fields out in order", ErrUnsupported, t, f.Name, f.Offset)
		}
		if f.Offset > off {
			out = append(out, []any{"", fmt.Sprintf("|V%d", f.Offset-off)})
		}
		elem, dims := f.Type, []int(nil)
		if elem.Class() == engine.ClassArray {
			elem, dims = elem.Base(), elem.Dims()
			for elem.Class() == engine.ClassArray { // numpy folds nested subarrays into one shape
				dims = append(dims, elem.Dims()...)
				elem = elem.Base()
			}
		}
		var d any
		switch {
		case elem.Class() == engine.ClassCompound:
			sub, err := structDescr(elem, depth+1)
			if err != nil {
				return nil, err
			}
			d = sub
		case elem.Class() == engine.ClassEnum:
			return nil, fmt.Errorf("%w: %v dataset: field %q is an enum, whose names numpy's structured dtypes cannot keep", ErrUnsupported, t, f.Name)
		default:
			v2, err := DataType(elem, 2)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			d = v2
		}
		e := []any{f.Name, d}
		if dims != nil {
			shape := make([]any, len(dims))
			for i, x := range dims {
				shape[i] = x
			}
			e = append(e, shape)
		}
		out = append(out, e)
		off = f.Offset + f.Type.Size()
	}
	if off < t.Size() {
		out = append(out, []any{"", fmt.Sprintf("|V%d", t.Size()-off)})
	}
	return out, nil
}

// EnumJSON is an enum's EnumAttr value.
func EnumJSON(t engine.Type) string {
	ms := make([]any, 0, len(t.Members()))
	signed := t.Base() <= engine.Int64
	for _, m := range t.Members() {
		v := json.Number(strconv.FormatInt(m.Value, 10))
		if !signed {
			v = json.Number(strconv.FormatUint(uint64(m.Value), 10))
		}
		ms = append(ms, []any{m.Name, v})
	}
	b, _ := json.Marshal(map[string]any{"base": Dtypes[t.Base()].V3, "members": ms})
	return string(b)
}

// ParseEnum reads an EnumAttr value back into the enum over base, or
// says why it does not make one (a malformed or foreign value, names or
// values the engine refuses, another base type).
func ParseEnum(s string, base engine.Type) (engine.Type, error) {
	var v struct {
		Base    string              `json:"base"`
		Members [][]json.RawMessage `json:"members"`
	}
	if len(s) > 16<<20 {
		return 0, fmt.Errorf("%w: attribute %s of %d bytes", ErrCorrupt, EnumAttr, len(s))
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return 0, fmt.Errorf("%w: attribute %s: %v", ErrCorrupt, EnumAttr, err)
	}
	if d, ok := Dtypes[base]; !ok || base.Class() != engine.ClassInteger || d.V3 != v.Base {
		return 0, fmt.Errorf("%w: attribute %s names base %q for an array of %v", ErrCorrupt, EnumAttr, v.Base, base)
	}
	if len(v.Members) > engine.MaxTypeMembers {
		return 0, fmt.Errorf("%w: attribute %s: %d members (at most %d)", ErrCorrupt, EnumAttr, len(v.Members), engine.MaxTypeMembers)
	}
	ms := make([]engine.EnumMember, len(v.Members))
	for i, m := range v.Members {
		var name string
		var val json.Number
		if len(m) != 2 || json.Unmarshal(m[0], &name) != nil || json.Unmarshal(m[1], &val) != nil {
			return 0, fmt.Errorf("%w: attribute %s: member %d is not [name, value]", ErrCorrupt, EnumAttr, i)
		}
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			u, uerr := strconv.ParseUint(string(val), 10, 64)
			if uerr != nil {
				return 0, fmt.Errorf("%w: attribute %s: member %q value %s", ErrCorrupt, EnumAttr, name, val)
			}
			n = int64(u)
		}
		ms[i] = engine.EnumMember{Name: name, Value: n}
	}
	t := engine.Enum(base, ms...)
	if !t.Valid() {
		return 0, fmt.Errorf("%w: attribute %s: scc refuses the enum it describes (repeated or empty names, repeated values, values out of %v's range)", ErrCorrupt, EnumAttr, base)
	}
	return t, nil
}
