package serve

// The Zarr mapping of scc's types, fill values, attributes, names and
// filter pipelines. It is the mapping of package interop/zarr (export.go,
// meta.go, codec.go), whose functions are unexported; the copies here keep
// its names so that the two can become one shared package. Differences
// are marked where they exist.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/zarr"
)

// The Zarr bridge's errors: what Zarr cannot hold, bytes that do not
// decode.
var (
	errUnsupported = zarr.ErrUnsupported
	errCorrupt     = zarr.ErrCorrupt
)

// dtypes maps engine types onto numpy type strings (Zarr v2 "dtype",
// little-endian) and Zarr v3 data_type names.
var dtypes = map[engine.Type]struct{ v2, v3 string }{
	engine.Int8: {"|i1", "int8"}, engine.Int16: {"<i2", "int16"}, engine.Int32: {"<i4", "int32"}, engine.Int64: {"<i8", "int64"},
	engine.Uint8: {"|u1", "uint8"}, engine.Uint16: {"<u2", "uint16"}, engine.Uint32: {"<u4", "uint32"}, engine.Uint64: {"<u8", "uint64"},
	engine.Float32: {"<f4", "float32"}, engine.Float64: {"<f8", "float64"},
	engine.Bool: {"|b1", "bool"}, engine.Complex64: {"<c8", "complex64"}, engine.Complex128: {"<c16", "complex128"},
}

// zarrTypeOf returns the Zarr v2 dtype and v3 data_type of t, or an
// errUnsupported error saying why t has none.
func zarrTypeOf(t engine.Type) (v2 string, v3 any, err error) {
	if d, ok := dtypes[t]; ok {
		return d.v2, d.v3, nil
	}
	if !t.IsString() {
		return "", nil, fmt.Errorf("%w: %v dataset (no Zarr data type)", errUnsupported, t)
	}
	n := t.StrLen()
	switch {
	case t.Charset() == engine.UTF8:
		// numpy's "<U<n>" (v3 fixed_length_utf32) is n UTF-32 code
		// points; a UTF-8 type is a byte length, whose n bytes hold n/4
		// to n code points. Either mapping changes what fits, so none
		// is made.
		return "", nil, fmt.Errorf("%w: %v dataset: Zarr's fixed-length unicode (\"<U%d\", fixed_length_utf32) counts UTF-32 code points, not UTF-8 bytes, so no Zarr data type keeps a UTF-8 byte length", errUnsupported, t, n)
	case t.Pad() != engine.NullPad:
		return "", nil, fmt.Errorf("%w: %v dataset: Zarr's fixed-length bytes (\"|S%d\", null_terminated_bytes) are NUL-padded; the %v padding rule has no Zarr form", errUnsupported, t, n, t.Pad())
	}
	return fmt.Sprintf("|S%d", n), map[string]any{"name": "null_terminated_bytes", "configuration": map[string]any{"length_bytes": n}}, nil
}

// the element, or for a complex type each of its two floats.
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

// typesKey is the attribute under which an export records the scc type of
// each attribute whose JSON form would not say it (numbers, byte strings),
// so that import restores the attributes exactly. Import reads it and does
// not keep it as an attribute.
const typesKey = "_scc_attr_types"

// attrsJSON converts attributes to a Zarr attribute object. Unlike the
// export's, which refuses the whole object, an attribute with no Zarr form
// is left out and named in skipped with why: a served view keeps what it
// can and says what it left out.
func attrsJSON(attrs []engine.Attr) (out map[string]any, skipped []string) {
	out = map[string]any{}
	types := map[string]string{}
	for _, a := range attrs {
		if a.Name == typesKey {
			skipped = append(skipped, fmt.Sprintf("attribute %q: the name is reserved for the attributes' scc types", typesKey))
			continue
		}
		v := a.Value
		if k := v.Kind(); (k == engine.AttrScalar || k == engine.AttrArray) && !jsonType(v.Type()) {
			skipped = append(skipped, fmt.Sprintf("attribute %q of type %v (Zarr holds the numeric, bool, complex and fixed-length string types)", a.Name, v.Type()))
			continue
		}
		if err := textExact(v); err != nil {
			skipped = append(skipped, fmt.Sprintf("attribute %q: %v", a.Name, err))
			continue
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
	return out, skipped
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

// nameErrs is checkNames' refusal of each name it refuses.
func nameErrs(names []string) map[string]error {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	bad := map[string]error{}
	for _, n := range names {
		segs := strings.Split(n, "/")
		for i, s := range segs {
			var err error
			switch {
			case s == "" || s == "." || s == "..":
				err = fmt.Errorf("%w: dataset name %q: empty, \".\" or \"..\" path segment", errUnsupported, n)
			case strings.HasPrefix(s, "__") || strings.HasPrefix(s, ".z") || s == "zarr.json":
				err = fmt.Errorf("%w: dataset name %q: segment %q is reserved in Zarr", errUnsupported, n, s)
			case strings.ContainsAny(s, "\\\x00"):
				err = fmt.Errorf("%w: dataset name %q: backslash or NUL", errUnsupported, n)
			case i < len(segs)-1 && set[strings.Join(segs[:i+1], "/")]:
				err = fmt.Errorf("%w: dataset %q would be inside dataset %q (a Zarr array has no children)", errUnsupported, n, strings.Join(segs[:i+1], "/"))
			}
			if err != nil {
				bad[n] = err
				break
			}
		}
	}
	return bad
}

// asciiJSON escapes every non-ASCII character of a JSON text; outside
// strings JSON holds only ASCII, so the escapes land inside strings.
func asciiJSON(b []byte) []byte {
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

// plan is how one dataset's chunks cross: the Zarr chain and whether the
// stored bytes can go across without re-encoding.
type plan struct {
	chain []codec
	copy  bool   // chunks with mask 0 copy (rewrapping a last deflate stage)
	wrap  string // "zlib" or "gzip" when the last stage is rewrapped
	why   string // why not copy
}

// planExport maps a dataset's pipeline onto Zarr codecs.
func planExport(ds *engine.Dataset, version int) plan {
	var p plan
	p.copy = true
	filters := ds.Filters()
	for i, f := range filters {
		name, level := f.Stage()
		last := i == len(filters)-1
		switch name {
		case "shuffle":
			p.chain = append(p.chain, codec{id: "shuffle", elemSize: ds.Type().Size()})
		case "deflate":
			id := "zlib"
			if version == 3 {
				id = "gzip"
			}
			p.chain = append(p.chain, codec{id: id, level: level})
			if last {
				p.wrap = id
			} else if p.copy {
				p.copy, p.why = false, "deflate is not the pipeline's last stage, so its stream cannot be rewrapped in place"
			}
		case "zlib":
			// numcodecs' Zlib is the same zlib stream (v3: numcodecs.zlib,
			// read by zarrita and zarr-python 3): copied byte for byte,
			// no inflate.
			p.chain = append(p.chain, codec{id: "zlib", level: level})
		case "zstd":
			// scc's zstd levels are zstd's (0: the default, 3); the
			// level is metadata only, readers do not need it.
			if level == 0 {
				level = 3
			}
			p.chain = append(p.chain, codec{id: "zstd", level: level})
		case "lz4":
			p.chain = append(p.chain, codec{id: "lz4"})
		case "crc32c":
			if version == 3 {
				p.chain = append(p.chain, codec{id: "crc32c"})
			} else if p.copy {
				p.copy, p.why = false, "Zarr v2 (numcodecs) has no crc32c codec; the stage is left out"
			}
		default:
			if p.copy {
				p.copy, p.why = false, fmt.Sprintf("filter %s has no Zarr codec; left out", name)
			}
		}
	}
	return p
}

func codecJSON(c codec, v int) map[string]any {
	if v == 2 {
		switch c.id {
		case "shuffle":
			return map[string]any{"id": "shuffle", "elementsize": c.elemSize}
		case "lz4":
			return map[string]any{"id": "lz4", "acceleration": 1}
		}
		return map[string]any{"id": c.id, "level": c.level}
	}
	switch c.id {
	case "shuffle":
		return map[string]any{"name": "numcodecs.shuffle", "configuration": map[string]any{"elementsize": c.elemSize}}
	case "lz4":
		return map[string]any{"name": "numcodecs.lz4", "configuration": map[string]any{"acceleration": 1}}
	case "crc32c":
		return map[string]any{"name": "crc32c"}
	case "zlib":
		// Not a v3 core codec: numcodecs registers it for zarr-python 3
		// under this name, and zarrita reads it under both.
		return map[string]any{"name": "numcodecs.zlib", "configuration": map[string]any{"level": c.level}}
	case "zstd":
		return map[string]any{"name": "zstd", "configuration": map[string]any{"level": c.level, "checksum": false}}
	}
	return map[string]any{"name": c.id, "configuration": map[string]any{"level": c.level}}
}

// chunkBox is the part of chunk coords inside shape.
func chunkBox(coords, chunk, shape []uint64) (start, count []uint64, edge bool) {
	start, count = make([]uint64, len(coords)), make([]uint64, len(coords))
	for i, c := range coords {
		start[i] = c * chunk[i]
		count[i] = min(chunk[i], shape[i]-start[i])
		edge = edge || count[i] != chunk[i]
	}
	return start, count, edge
}

// readChunk reads a whole chunk decoded (little-endian, C order), the
// padding of an edge chunk holding the fill value. Unlike the export's,
// it takes the extent, which the caller has checked coords against (a
// live dataset's may change between two calls of Shape).
func readChunk(ctx context.Context, ds *engine.Dataset, shape, chunk, coords []uint64, chunkBytes int) ([]byte, error) {
	start, count, edge := chunkBox(coords, chunk, shape)
	es := ds.Type().Size()
	if !edge {
		buf := make([]byte, chunkBytes)
		return buf, ds.Read(ctx, engine.Box(start, count), buf)
	}
	n := es
	for _, c := range count {
		n *= int(c)
	}
	part := make([]byte, n)
	if err := ds.Read(ctx, engine.Box(start, count), part); err != nil {
		return nil, err
	}
	full := make([]byte, chunkBytes)
	fill := ds.Fill()
	for i := 0; i < len(full); i += es {
		copy(full[i:], fill)
	}
	copyBox(full, chunk, part, count, es, false)
	return full, nil
}

// copyBox copies between a whole chunk (shape chunk) and the packed box of
// its first count elements per dimension: into the chunk, or out of it.
func copyBox(full []byte, chunk []uint64, part []byte, count []uint64, es int, out bool) {
	r := len(chunk)
	row := int(count[r-1]) * es
	idx := make([]uint64, r) // over count[:r-1]
	for p := 0; p < len(part); p += row {
		off := uint64(0)
		for d := 0; d < r-1; d++ {
			off = off*chunk[d] + idx[d]
		}
		off = off * chunk[r-1] * uint64(es)
		if out {
			copy(part[p:p+row], full[off:])
		} else {
			copy(full[off:off+uint64(row)], part[p:p+row])
		}
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// allFill reports whether b holds only the element fill repeated.
func allFill(b, fill []byte) bool {
	for i := 0; i+len(fill) <= len(b); i += len(fill) {
		if string(b[i:i+len(fill)]) != string(fill) {
			return false
		}
	}
	return true
}

// virtualTargetBytes is the size of the chunks a virtual dataset exports
// with when its sources do not say one.
const virtualTargetBytes = 1 << 20

// virtualChunk is the chunk shape a virtual dataset exports with: its
// sources' chunk shape when every source that can be opened is a chunked
// dataset of the virtual rank with the same one, else about
// virtualTargetBytes per chunk, whole along the last dimensions.
func virtualChunk(ctx context.Context, f *engine.File, ds *engine.Dataset) []uint64 {
	shape := ds.Shape()
	r := len(shape)
	var common []uint64
	same := true
	spec, ok, err := f.VirtualSpec(ctx, ds.Name())
	if err != nil || !ok {
		same = false
	}
	for _, m := range spec.Mappings {
		if !same {
			break
		}
		file, _ := engine.ExpandBlock(m.File, 0)
		dset, _ := engine.ExpandBlock(m.Dataset, 0)
		c := sourceChunk(ctx, f, file, dset)
		switch {
		case c == nil || len(c) != r:
			// Missing, of another rank or layout, or out of reach (a
			// URL): says nothing.
		case common == nil:
			common = c
		case !slices.Equal(common, c):
			same = false
		}
	}
	if same && common != nil {
		out := make([]uint64, r)
		for d := range out {
			out[d] = min(common[d], max(shape[d], 1))
		}
		return out
	}
	out := make([]uint64, r)
	elems := uint64(max(virtualTargetBytes/ds.Type().Size(), 1))
	for d := r - 1; d >= 0; d-- {
		out[d] = max(min(max(shape[d], 1), elems), 1)
		elems /= out[d]
		elems = max(elems, 1)
	}
	return out
}

// sourceChunk is the chunk shape of a virtual dataset's source, nil when
// it is not a chunked dataset this export can open.
func sourceChunk(ctx context.Context, f *engine.File, file, dset string) []uint64 {
	loc, self, err := f.VirtualSource(file)
	if err != nil {
		return nil
	}
	src := f
	if !self {
		if strings.Contains(loc, "://") {
			return nil
		}
		if src, err = engine.Open(loc, &engine.Options{ReadOnly: true}); err != nil {
			return nil
		}
		defer src.Close()
	}
	sd, err := src.OpenDatasetContext(ctx, dset)
	if err != nil {
		return nil
	}
	defer sd.Close()
	if sd.Layout() != engine.Chunked && sd.Layout() != engine.Sparse {
		return nil
	}
	return sd.Chunk()
}

// A codec is one bytes-to-bytes stage of a Zarr chunk's codec chain, as
// numcodecs (v2) and the v3 codec registry define it. The chain runs in
// order on encode and in reverse on decode; its input is the chunk's
// elements in C order, little-endian (the "bytes" codec / a "<" dtype).
type codec struct {
	id       string // shuffle, zlib, gzip, zstd, lz4, crc32c
	level    int
	elemSize int // shuffle
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode applies the stage to src.
func (c codec) encode(src []byte) ([]byte, error) {
	switch c.id {
	case "shuffle":
		return shuffle(src, c.elemSize, false), nil
	case "zlib", "gzip":
		var b bytes.Buffer
		lvl := c.level
		if lvl < 1 || lvl > 9 {
			lvl = 6
		}
		fw, err := flate.NewWriter(&b, lvl)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(src); err != nil {
			return nil, err
		}
		if err := fw.Close(); err != nil {
			return nil, err
		}
		if c.id == "zlib" {
			return wrapZlib(b.Bytes(), adler32.Checksum(src)), nil
		}
		return wrapGzip(b.Bytes(), crc32.ChecksumIEEE(src), len(src)), nil
	case "zstd":
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(src, nil), nil
	case "lz4":
		dst := make([]byte, 4+lz4.CompressBlockBound(len(src)))
		binary.LittleEndian.PutUint32(dst, uint32(len(src)))
		var comp lz4.Compressor
		n, err := comp.CompressBlock(src, dst[4:])
		if err != nil {
			return nil, err
		}
		if n == 0 { // incompressible: one literal-only sequence
			return literalBlock(dst[:4], src), nil
		}
		return dst[:4+n], nil
	case "crc32c":
		return binary.LittleEndian.AppendUint32(append([]byte{}, src...), crc32.Checksum(src, castagnoli)), nil
	}
	return nil, fmt.Errorf("%w: codec %q", errUnsupported, c.id)
}

// shuffle is numcodecs' Shuffle (the HDF5 byte shuffle): byte j of element
// i goes to j*n+i. Trailing bytes that do not fill an element stay put.
func shuffle(src []byte, es int, inverse bool) []byte {
	out := make([]byte, len(src))
	n := len(src) / max(es, 1)
	if es <= 1 || n <= 1 {
		copy(out, src)
		return out
	}
	for i := 0; i < n; i++ {
		for j := 0; j < es; j++ {
			if inverse {
				out[i*es+j] = src[j*n+i]
			} else {
				out[j*n+i] = src[i*es+j]
			}
		}
	}
	copy(out[n*es:], src[n*es:])
	return out
}

// encodeChain runs the chain over a chunk's bytes.
func encodeChain(chain []codec, b []byte) ([]byte, error) {
	var err error
	for _, c := range chain {
		if b, err = c.encode(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// wrapZlib frames a raw DEFLATE stream as zlib (RFC 1950): CMF 0x78 (32 KiB
// window), FLG 0x9c (default level, no dictionary), the stream, Adler-32 of
// the decoded bytes big-endian.
func wrapZlib(deflate []byte, adler uint32) []byte {
	out := make([]byte, 0, len(deflate)+6)
	out = append(out, 0x78, 0x9c)
	out = append(out, deflate...)
	return binary.BigEndian.AppendUint32(out, adler)
}

// wrapGzip frames a raw DEFLATE stream as one gzip member (RFC 1952) with
// no name, no time and OS "unknown".
func wrapGzip(deflate []byte, crc uint32, size int) []byte {
	out := make([]byte, 0, len(deflate)+18)
	out = append(out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff)
	out = append(out, deflate...)
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(size))
}

var inflaters sync.Pool // io.ReadCloser that is also a flate.Resetter

// inflateTo decodes a raw DEFLATE stream into w, refusing more than max
// bytes or trailing garbage.
func inflateTo(body []byte, max int, w io.Writer) (int64, error) {
	br := bytes.NewReader(body)
	fr, _ := inflaters.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(br)
	} else if err := fr.(flate.Resetter).Reset(br, nil); err != nil {
		return 0, err
	}
	defer inflaters.Put(fr)
	n, err := io.Copy(w, io.LimitReader(fr, int64(max)+1))
	if err != nil {
		return n, fmt.Errorf("%w: deflate: %v", errCorrupt, err)
	}
	if n > int64(max) {
		return n, fmt.Errorf("%w: deflate stream decodes past %d bytes", errCorrupt, max)
	}
	if br.Len() != 0 {
		return n, fmt.Errorf("%w: %d bytes after the deflate stream", errCorrupt, br.Len())
	}
	return n, nil
}

// rewrap turns a raw DEFLATE stream (scc's deflate stage output) into the
// zlib or gzip framing Zarr readers expect. The compressed stream is kept
// byte for byte; only the wrapper's checksum needs the decoded bytes, so
// the stream is inflated once into the hash (never re-compressed).
func rewrap(id string, deflate []byte, max int) ([]byte, error) {
	var h hash.Hash32 = adler32.New()
	if id == "gzip" {
		h = crc32.NewIEEE()
	}
	n, err := inflateTo(deflate, max, h)
	if err != nil {
		return nil, err
	}
	if id == "gzip" {
		return wrapGzip(deflate, h.Sum32(), int(n)), nil
	}
	return wrapZlib(deflate, h.Sum32()), nil
}

var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		// Single-segment frames always record the content size, which
		// numcodecs needs to decode them (the library leaves it out of
		// frames under 256 bytes otherwise).
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithSingleSegment(true))
	})
)

// literalBlock appends an LZ4 block holding src as literals only (what
// the reference encoder emits for incompressible input).
func literalBlock(dst, src []byte) []byte {
	n := len(src)
	if n < 15 {
		dst = append(dst, byte(n)<<4)
	} else {
		dst = append(dst, 0xf0)
		for r := n - 15; ; r -= 255 {
			if r < 255 {
				dst = append(dst, byte(r))
				break
			}
			dst = append(dst, 255)
		}
	}
	return append(dst, src...)
}
