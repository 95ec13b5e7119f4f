package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/scc-dev/scc/engine"
)

func init() {
	register("dump", "print the values of a selection (like h5dump)", cmdDump)
}

// dumpOutput is dump's JSON form.
type dumpOutput struct {
	Dataset string   `json:"dataset"`
	Type    string   `json:"type"`
	Shape   []uint64 `json:"shape"`
	Start   []uint64 `json:"start"`
	Count   []uint64 `json:"count"`
	// Chunk and InnerChunk are the chunk and inner chunk shapes of a
	// dataset whose chunks are sharded (engine.DatasetSpec.InnerChunk).
	Chunk      []uint64 `json:"chunk,omitempty"`
	InnerChunk []uint64 `json:"inner_chunk,omitempty"`
	// Values are the selected elements in C order, as JSON numbers.
	Values []json.RawMessage `json:"values"`
	// Attrs are the dataset's attributes.
	Attrs []lsAttr `json:"attributes"`
	// Coords, with --defined, are the coordinates of the defined
	// elements Values then holds.
	Coords [][]uint64 `json:"coords,omitempty"`
}

func cmdDump(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump", "--dataset NAME [--start i,j,...] [--count n,m,...] [--json] FILE\n\n"+fileHelp, stderr)
	name := fs.String("dataset", "", "dataset to dump (required)")
	startS := fs.String("start", "", "first element of the selection (default the origin)")
	countS := fs.String("count", "", "elements per dimension (default to the end of the extent)")
	maxN := fs.Uint64("max", 1<<20, "refuse selections of more elements than this")
	asJSON := fs.Bool("json", false, "print JSON")
	defined := fs.Bool("defined", false, "print only the defined elements, with their coordinates (sparse datasets)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	if *name == "" {
		return usageErr("--dataset is required")
	}
	f, done, err := openPath(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer done()
	ds, err := f.OpenDataset(ctx, *name, nil)
	if err != nil {
		return err
	}
	defer ds.Close(ctx)
	shape := ds.Shape()
	start := make([]uint64, len(shape))
	if *startS != "" {
		if start, err = parseList(*startS, len(shape)); err != nil {
			return usageErr("--start: %v", err)
		}
	}
	count := make([]uint64, len(shape))
	for i := range count {
		if start[i] > shape[i] {
			return usageErr("--start %v is outside the extent %v", start, shape)
		}
		count[i] = shape[i] - start[i]
	}
	if *countS != "" {
		if count, err = parseList(*countS, len(shape)); err != nil {
			return usageErr("--count: %v", err)
		}
	}
	n := uint64(1)
	for _, c := range count {
		n *= c
		if n > *maxN && !*defined {
			return usageErr("selection of more than %d elements (use --count, or raise --max)", *maxN)
		}
	}
	if ds.Space() == engine.SpaceNull {
		n = 0 // no element, not the one of an empty product
	}
	if *defined {
		return dumpDefined(ctx, stdout, ds, *name, start, count, *asJSON)
	}
	if ds.Layout() == engine.Vlen {
		return dumpVlen(ctx, stdout, ds, *name, start, count, *asJSON)
	}
	buf := make([]byte, n*uint64(ds.Type().Size()))
	if err := ds.Read(ctx, engine.Box(start, count), buf); err != nil {
		return err
	}
	vals := formatValues(ds.Type(), buf)
	attrs, err := ds.Attrs()
	if err != nil {
		return err
	}
	if *asJSON {
		out := dumpOutput{Dataset: *name, Type: ds.Type().String(), Shape: shape, Start: start, Count: count,
			Values: make([]json.RawMessage, len(vals)), Attrs: listAttrs(attrs)}
		if inner := ds.InnerChunk(); inner != nil {
			out.Chunk, out.InnerChunk = ds.Chunk(), inner
		}
		fillJSON(out.Values, ds.Type(), buf, vals)
		enc := json.NewEncoder(stdout)
		return enc.Encode(out)
	}
	maxShape := make([]string, len(shape))
	for i, m := range ds.MaxShape() {
		if m == engine.Unlimited {
			maxShape[i] = "H5S_UNLIMITED"
		} else {
			maxShape[i] = fmt.Sprint(m)
		}
	}
	w := stdout
	fmt.Fprintf(w, "DATASET %q {\n", *name)
	fmt.Fprintf(w, "   DATATYPE  %s\n", ds.Type())
	switch ds.Space() {
	case engine.SpaceScalar:
		fmt.Fprintf(w, "   DATASPACE  SCALAR\n")
	case engine.SpaceNull:
		fmt.Fprintf(w, "   DATASPACE  NULL\n")
	default:
		fmt.Fprintf(w, "   DATASPACE  SIMPLE { ( %s ) / ( %s ) }\n", dims(shape), strings.Join(maxShape, ", "))
	}
	if inner := ds.InnerChunk(); inner != nil {
		// h5dump's storage layout line, with the shard's inner chunks.
		fmt.Fprintf(w, "   STORAGE_LAYOUT { CHUNKED ( %s ) SHARDED ( %s ) }\n", dims(ds.Chunk()), dims(inner))
	}
	for _, at := range attrs {
		fmt.Fprintf(w, "   ATTRIBUTE %q { %s %s }\n", at.Name, attrType(at.Value), formatAttr(at.Value))
	}
	fmt.Fprintf(w, "   SUBSET {\n      START ( %s );\n      COUNT ( %s );\n", dims(start), dims(count))
	fmt.Fprintf(w, "      DATA {\n")
	// One line per innermost row, prefixed with its first element's
	// coordinates, as h5dump does.
	row := uint64(1)
	if len(count) > 0 {
		row = count[len(count)-1]
	}
	idx := make([]uint64, len(count))
	for i := uint64(0); row > 0 && i < n; i += row {
		coord := make([]string, len(idx))
		for d := range idx {
			coord[d] = fmt.Sprint(start[d] + idx[d])
		}
		sep := ","
		if i+row >= n {
			sep = ""
		}
		fmt.Fprintf(w, "      (%s): %s%s\n", strings.Join(coord, ","), strings.Join(vals[i:i+row], ", "), sep)
		// Advance idx by one row.
		for d := len(idx) - 2; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
	}
	fmt.Fprintf(w, "      }\n   }\n}\n")
	return nil
}

func parseList(s string, rank int) ([]uint64, error) {
	parts := strings.Split(s, ",")
	if len(parts) != rank {
		return nil, fmt.Errorf("%q has %d values, the dataset has rank %d", s, len(parts), rank)
	}
	out := make([]uint64, rank)
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		out[i] = v
	}
	return out, nil
}

// fillJSON sets out[i] to element i of b (type t) as JSON: NaN and
// infinities quoted (JSON has none), a bool as true or false, a complex
// number as [real, imaginary], a string as its text, an enum as its
// member's name, an opaque element as hex text, an array as a list and a
// compound as an object of its fields in their order.
func fillJSON(out []json.RawMessage, t engine.Type, b []byte, vals []string) {
	es := t.Size()
	for i := range vals {
		out[i] = jsonElem(t, b[i*es:(i+1)*es])
	}
}

// jsonElem is one element e of t as JSON (fillJSON's rules).
func jsonElem(t engine.Type, e []byte) json.RawMessage {
	num := func(v string) json.RawMessage {
		if v == "NaN" || strings.HasSuffix(v, "Inf") {
			v = strconv.Quote(v)
		}
		return json.RawMessage(v)
	}
	marshal := func(v any) json.RawMessage {
		b, _ := json.Marshal(v) // strings only: JSON's own escapes (a Go-quoted NUL is not JSON)
		return b
	}
	switch t.Class() {
	case engine.ClassString:
		return marshal(engine.DecodeString(t, e))
	case engine.ClassComplex:
		pt := engine.Float32
		if t == engine.Complex128 {
			pt = engine.Float64
		}
		h := t.Size() / 2
		return json.RawMessage("[" + string(jsonElem(pt, e[:h])) + "," + string(jsonElem(pt, e[h:])) + "]")
	case engine.ClassEnum:
		if name, ok := enumName(t, e); ok {
			return marshal(name)
		}
		return jsonElem(t.Base(), e)
	case engine.ClassOpaque:
		return marshal(formatElem(t, e))
	case engine.ClassArray:
		bt := t.Base()
		es := bt.Size()
		parts := make([]string, len(e)/es)
		for i := range parts {
			parts[i] = string(jsonElem(bt, e[i*es:(i+1)*es]))
		}
		return json.RawMessage("[" + strings.Join(parts, ",") + "]")
	case engine.ClassCompound:
		fs := t.Fields()
		parts := make([]string, len(fs))
		for i, f := range fs {
			parts[i] = string(marshal(f.Name)) + ":" + string(jsonElem(f.Type, e[f.Offset:f.Offset+f.Type.Size()]))
		}
		return json.RawMessage("{" + strings.Join(parts, ",") + "}")
	case engine.ClassBitfield:
		return json.RawMessage(strconv.FormatUint(leUint(e), 10))
	}
	return num(formatElem(t, e))
}

// formatValues renders little-endian elements of t as decimal strings; a
// bool as true or false (any nonzero byte is true, as the engine's typed
// reads take it), a complex number as real±imaginary "i" (1.5-2i, NaN+Infi),
// a fixed-length string as its text under the type's padding rule, quoted;
// an enum as its member's name (its integer when no member has it), a
// bitfield as hex, an opaque element as hex bytes, an array as
// [elements] in C order and a compound as {field=value, ...}.
func formatValues(t engine.Type, b []byte) []string {
	es := t.Size()
	if es == 0 {
		return nil
	}
	out := make([]string, len(b)/es)
	for i := range out {
		out[i] = formatElem(t, b[i*es:(i+1)*es])
	}
	return out
}

// leUint is the little-endian unsigned integer of e (at most 8 bytes).
func leUint(e []byte) uint64 {
	var u uint64
	for k := len(e) - 1; k >= 0; k-- {
		u = u<<8 | uint64(e[k])
	}
	return u
}

// enumName is the name of the member of enum t whose value e holds.
func enumName(t engine.Type, e []byte) (string, bool) {
	u := leUint(e)
	bits := uint(8 * len(e))
	for _, m := range t.Members() {
		v := uint64(m.Value)
		if bits < 64 {
			v &= 1<<bits - 1
		}
		if v == u {
			return m.Name, true
		}
	}
	return "", false
}

// formatElem renders one element e of t (formatValues's rules).
func formatElem(t engine.Type, e []byte) string {
	le := binary.LittleEndian
	if t.IsString() {
		return strconv.Quote(engine.DecodeString(t, e))
	}
	switch t.Class() {
	case engine.ClassEnum:
		if name, ok := enumName(t, e); ok {
			return name
		}
		return formatElem(t.Base(), e)
	case engine.ClassBitfield:
		return fmt.Sprintf("0x%0*x", 2*len(e), leUint(e))
	case engine.ClassOpaque:
		return fmt.Sprintf("0x%x", e)
	case engine.ClassArray:
		return "[" + strings.Join(formatValues(t.Base(), e), ", ") + "]"
	case engine.ClassCompound:
		fs := t.Fields()
		parts := make([]string, len(fs))
		for i, f := range fs {
			parts[i] = f.Name + "=" + formatElem(f.Type, e[f.Offset:f.Offset+f.Type.Size()])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	switch t {
	case engine.Int8:
		return strconv.FormatInt(int64(int8(e[0])), 10)
	case engine.Uint8:
		return strconv.FormatUint(uint64(e[0]), 10)
	case engine.Int16:
		return strconv.FormatInt(int64(int16(le.Uint16(e))), 10)
	case engine.Uint16:
		return strconv.FormatUint(uint64(le.Uint16(e)), 10)
	case engine.Int32:
		return strconv.FormatInt(int64(int32(le.Uint32(e))), 10)
	case engine.Uint32:
		return strconv.FormatUint(uint64(le.Uint32(e)), 10)
	case engine.Int64:
		return strconv.FormatInt(int64(le.Uint64(e)), 10)
	case engine.Uint64:
		return strconv.FormatUint(le.Uint64(e), 10)
	case engine.Float16:
		return strconv.FormatFloat(engine.Float16FromBits(le.Uint16(e)), 'g', -1, 32)
	case engine.BFloat16:
		return strconv.FormatFloat(engine.BFloat16FromBits(le.Uint16(e)), 'g', -1, 32)
	case engine.Float32:
		return strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(e))), 'g', -1, 32)
	case engine.Float64:
		return strconv.FormatFloat(math.Float64frombits(le.Uint64(e)), 'g', -1, 64)
	case engine.Bool:
		return strconv.FormatBool(e[0] != 0)
	case engine.Complex64:
		c := complex(math.Float32frombits(le.Uint32(e)), math.Float32frombits(le.Uint32(e[4:])))
		return strings.Trim(strconv.FormatComplex(complex128(c), 'g', -1, 64), "()")
	case engine.Complex128:
		c := complex(math.Float64frombits(le.Uint64(e)), math.Float64frombits(le.Uint64(e[8:])))
		return strings.Trim(strconv.FormatComplex(c, 'g', -1, 128), "()")
	}
	return ""
}

// dumpDefined prints the defined elements of a selection and their
// coordinates, one per line, or as JSON (coords and values).
func dumpDefined(ctx context.Context, w io.Writer, ds *engine.Dataset, name string, start, count []uint64, asJSON bool) error {
	sel := engine.Box(start, count)
	pos, buf, err := ds.ReadDefined(ctx, sel)
	if err != nil {
		return err
	}
	vals := formatValues(ds.Type(), buf)
	if asJSON {
		out := dumpOutput{Dataset: name, Type: ds.Type().String(), Shape: ds.Shape(), Start: start, Count: count,
			Values: make([]json.RawMessage, len(vals)), Coords: make([][]uint64, len(pos))}
		fillJSON(out.Values, ds.Type(), buf, vals)
		for i := range vals {
			out.Coords[i] = sel.Coord(pos[i])
		}
		return json.NewEncoder(w).Encode(out)
	}
	fmt.Fprintf(w, "DATASET %q {\n", name)
	fmt.Fprintf(w, "   DATATYPE  %s\n", ds.Type())
	fmt.Fprintf(w, "   DEFINED  %d of ( %s ) from ( %s ) {\n", len(pos), dims(count), dims(start))
	for i, p := range pos {
		fmt.Fprintf(w, "      (%s): %s\n", dims(sel.Coord(p)), vals[i])
	}
	fmt.Fprintf(w, "   }\n}\n")
	return nil
}

// dumpVlen prints the elements of a variable-length dataset, one per line
// with its coordinates: quoted strings for 1-byte element types, value
// lists otherwise. JSON: values as strings or arrays.
func dumpVlen(ctx context.Context, w io.Writer, ds *engine.Dataset, name string, start, count []uint64, asJSON bool) error {
	sel := engine.Box(start, count)
	vals, err := ds.ReadVlen(ctx, sel)
	if err != nil {
		return err
	}
	text := func(v []byte) string {
		if ds.Type().Size() == 1 {
			return strconv.Quote(string(v))
		}
		return "[" + strings.Join(formatValues(ds.Type(), v), ", ") + "]"
	}
	if asJSON {
		out := dumpOutput{Dataset: name, Type: "vlen " + ds.Type().String(), Shape: ds.Shape(), Start: start, Count: count,
			Values: make([]json.RawMessage, len(vals))}
		for i, v := range vals {
			t := text(v)
			if ds.Type().Size() != 1 {
				t = strings.ReplaceAll(strings.ReplaceAll(t, "NaN", `"NaN"`), "Inf", `Inf"`) // keep JSON valid
			}
			out.Values[i] = json.RawMessage(t)
		}
		return json.NewEncoder(w).Encode(out)
	}
	fmt.Fprintf(w, "DATASET %q {\n", name)
	fmt.Fprintf(w, "   DATATYPE  vlen %s\n", ds.Type())
	fmt.Fprintf(w, "   SUBSET ( %s ) from ( %s ) {\n", dims(count), dims(start))
	for i, v := range vals {
		fmt.Fprintf(w, "      (%s): %s\n", dims(sel.Coord(uint64(i))), text(v))
	}
	fmt.Fprintf(w, "   }\n}\n")
	return nil
}
