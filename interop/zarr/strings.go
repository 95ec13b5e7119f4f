package zarr

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// Strings cross onto scc's variable-length layout (engine.Vlen, Uint8
// elements holding each string's bytes, marked by zarrmap.VlenStringAttr):
// numcodecs' vlen-utf8 (zarr-python 2's str and object arrays, v2 dtype
// "|O"; zarr-python 3's data_type "string"), vlen-bytes (byte strings,
// unmarked), and numpy unicode ("<U<n>", v3 fixed_length_utf32: n UTF-32
// code points an element, trailing NULs not part of the value, as numpy
// reads them). An element zarr-python reads as the fill value of an
// object array (None, 0 or "") is the empty sequence, scc's only
// variable-length fill value; another fill value is refused.

// maxVlenChunk bounds the decoded bytes of one variable-length chunk:
// scc's limit on a chunk's heap.
const maxVlenChunk = 256 << 20

// elemSize is the bytes of one element as the chunk's codecs see them: a
// numpy unicode element's UTF-32 code points, 1 for variable-length
// elements (whose chunk size is not known before decoding; chunkBytes is
// then the element count), else the type's size.
func (m *arrayMeta) elemSize() int {
	switch {
	case m.ucs4 > 0:
		return 4 * m.ucs4
	case m.vlen != "":
		return 1
	}
	return m.typ.Size()
}

// parseUnicode reads numpy's unicode type string "<U<n>" (">U", "|U" and
// "=U" too).
func parseUnicode(s string) (n int, bigEndian, ok bool) {
	if len(s) < 3 || s[1] != 'U' {
		return 0, false, false
	}
	switch s[0] {
	case '<', '|', '=':
	case '>':
		bigEndian = true
	default:
		return 0, false, false
	}
	n, err := strconv.Atoi(s[2:])
	if err != nil || n < 1 || n > engine.MaxStringLen/4 || strconv.Itoa(n) != s[2:] {
		return 0, false, false
	}
	return n, bigEndian, true
}

// v3UTF32 reads zarr-python 3's fixed_length_utf32 data type.
func v3UTF32(name string, cfg map[string]any) (int, bool) {
	if name != "fixed_length_utf32" {
		return 0, false
	}
	n, err := strconv.Atoi(fmt.Sprint(cfg["length_bytes"]))
	if err != nil || n < 4 || n%4 != 0 || n > engine.MaxStringLen {
		return 0, false
	}
	return n / 4, true
}

// setStringFill admits the fill values that read as the empty string.
func (m *arrayMeta) setStringFill(v any) error {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if x == "" || m.vlen == "vlen-bytes" && x == "AAAAAA==" { // base64 of an empty VLenBytes chunk
			return nil
		}
	default:
		if fmt.Sprint(x) == "0" {
			// zarr-python 2's default for object arrays: it reads
			// unwritten elements as the integer 0, scc as "".
			m.notes = append(m.notes, "fill_value 0 of an object array: unwritten elements import as empty strings")
			return nil
		}
	}
	return fmt.Errorf("%w: fill_value %s of a string array (scc's variable-length fill value is the empty string)", ErrUnsupported, asJSON(v))
}

// decodeVLen reads a chunk of n elements in numcodecs' VLen format
// (zarrmap.EncodeVLen). The count is checked against n, and each length
// against what remains, before anything is allocated; the elements alias
// b.
func decodeVLen(b []byte, n int) ([][]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: variable-length chunk of %d bytes", ErrCorrupt, len(b))
	}
	if c := binary.LittleEndian.Uint32(b); uint64(c) != uint64(n) {
		return nil, fmt.Errorf("%w: variable-length chunk of %d elements, want %d", ErrCorrupt, c, n)
	}
	if uint64(n) > uint64(len(b)-4)/4 {
		return nil, fmt.Errorf("%w: variable-length chunk of %d bytes cannot hold %d elements", ErrCorrupt, len(b), n)
	}
	out := make([][]byte, n)
	p := 4
	for i := range out {
		if len(b)-p < 4 {
			return nil, fmt.Errorf("%w: variable-length chunk truncated at element %d", ErrCorrupt, i)
		}
		l := binary.LittleEndian.Uint32(b[p:])
		p += 4
		if uint64(l) > uint64(len(b)-p) {
			return nil, fmt.Errorf("%w: element %d of %d bytes past the chunk's end", ErrCorrupt, i, l)
		}
		if l > 0 {
			out[i] = b[p : p+int(l) : p+int(l)]
		}
		p += int(l)
	}
	if p != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after a variable-length chunk's elements", ErrCorrupt, len(b)-p)
	}
	return out, nil
}

// utf32Strings converts a chunk of numpy unicode elements (n code points
// each) to UTF-8, trailing NULs dropped as numpy drops them.
func utf32Strings(raw []byte, n int, bigEndian bool) ([][]byte, error) {
	es := 4 * n
	if len(raw)%es != 0 {
		return nil, fmt.Errorf("%w: %d bytes of %d-byte unicode elements", ErrCorrupt, len(raw), es)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if bigEndian {
		bo = binary.BigEndian
	}
	out := make([][]byte, len(raw)/es)
	for i := range out {
		e := raw[i*es : (i+1)*es]
		end := n
		for end > 0 && bo.Uint32(e[4*(end-1):]) == 0 {
			end--
		}
		if end == 0 {
			continue
		}
		var s []byte
		for j := 0; j < end; j++ {
			r := rune(bo.Uint32(e[4*j:]))
			if !utf8.ValidRune(r) {
				return nil, fmt.Errorf("%w: element %d holds %#x, not a Unicode code point", ErrCorrupt, i, uint32(r))
			}
			s = utf8.AppendRune(s, r)
		}
		out[i] = s
	}
	return out, nil
}

// boxValues picks the elements of box count (from the chunk's origin) out
// of a whole chunk's elements in C order.
func boxValues(vals [][]byte, chunk, count []uint64) [][]byte {
	r := len(chunk)
	n := uint64(1)
	for _, c := range count {
		n *= c
	}
	out := make([][]byte, 0, n)
	idx := make([]uint64, r)
	for uint64(len(out)) < n {
		off := uint64(0)
		for d := 0; d < r; d++ {
			off = off*chunk[d] + idx[d]
		}
		out = append(out, vals[off])
		for d := r - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// decodeChainMax is decodeChain for a chunk whose decoded size is not
// known: every stage is bounded by max.
func decodeChainMax(chain []codec, b []byte, max int) ([]byte, error) {
	var err error
	for i := len(chain) - 1; i >= 0; i-- {
		if b, err = chain[i].decode(b, max); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// stringChunk decodes one stored chunk of a string array into its
// elements, in C order.
func stringChunk(m *arrayMeta, b []byte, elems int) ([][]byte, error) {
	if m.ucs4 > 0 {
		raw, err := decodeChain(m.chain, b, m.chunkBytes)
		if err != nil {
			return nil, err
		}
		if m.order != nil {
			raw = untranspose(raw, m.chunk, m.order, 4*m.ucs4)
		}
		return utf32Strings(raw, m.ucs4, m.bigEndian)
	}
	raw, err := decodeChainMax(m.chain, b, maxVlenChunk)
	if err != nil {
		return nil, err
	}
	if m.vlen == "json2" || m.vlen == "msgpack2" {
		return objectChunk(m.vlen, raw, m.chunk)
	}
	vals, err := decodeVLen(raw, elems)
	if err != nil {
		return nil, err
	}
	if m.vlen == "vlen-array" {
		return vals, vlenArrayElems(vals, m.typ.Size(), swapUnit(m.typ), m.bigEndian)
	}
	if m.vlen == "vlen-utf8" {
		for i, v := range vals {
			if !utf8.Valid(v) {
				return nil, fmt.Errorf("%w: element %d is not UTF-8", ErrCorrupt, i)
			}
		}
	}
	return vals, nil
}

// importStrings copies a string array onto a variable-length dataset,
// chunk by chunk.
func importStrings(ctx context.Context, s *store, f *engine.File, name, key string, m *arrayMeta, workers int) (DatasetReport, error) {
	dr := DatasetReport{Name: name, Codecs: chainString(m.chain), Notes: m.notes}
	switch {
	case m.ucs4 > 0:
		dr.Why = fmt.Sprintf("numpy unicode of %d code points: imported as variable-length UTF-8 strings", m.ucs4)
	case m.vlen == "vlen-utf8":
		dr.Why = "variable-length UTF-8 strings: imported onto scc's variable-length layout"
	case m.vlen == "json2" || m.vlen == "msgpack2":
		dr.Why = m.vlen + " strings: imported onto scc's variable-length layout"
	case m.vlen == "vlen-array":
		dr.Why = fmt.Sprintf("variable-length sequences of %v: imported onto scc's variable-length layout", m.typ)
	default:
		dr.Why = "variable-length byte strings: imported onto scc's variable-length layout"
	}
	if m.vlen != "" && m.order != nil {
		return dr, fmt.Errorf("%w (%w: variable-length elements in Fortran or transposed order)", errSkip, ErrUnsupported)
	}
	filters, _, _, _, _ := importPlan(m)
	// A byte shuffle of variable-length data is no shuffle (and Zarr
	// readers refuse one on strings).
	filters = slices.DeleteFunc(filters, func(fl engine.Filter) bool { n, _ := fl.Stage(); return n == "shuffle" })
	typ := engine.Uint8
	if m.vlen == "vlen-array" {
		typ = m.typ
	}
	ds, err := createArray(ctx, f, name, engine.DatasetSpec{
		Type: typ, Shape: m.shape, Chunk: m.chunk, Filters: filters, Layout: engine.Vlen,
	}, m)
	if err != nil {
		return dr, err
	}
	defer ds.Close(ctx)
	if m.vlen != "vlen-bytes" && m.vlen != "vlen-array" {
		if err := ds.SetAttr(ctx, zarrmap.VlenStringAttr, engine.StringAttr("utf-8")); err != nil {
			return dr, err
		}
	}
	if m.ucs4 > 0 {
		// The numpy type, which export writes again when the strings
		// still fit it.
		if err := ds.SetAttr(ctx, zarrmap.DtypeAttr, engine.StringAttr(fmt.Sprintf("<U%d", m.ucs4))); err != nil {
			return dr, err
		}
	}
	elems := 1
	for _, c := range m.chunk {
		elems *= int(c)
	}
	bound := int64(maxVlenChunk) + 64<<10
	if m.ucs4 > 0 {
		bound = int64(m.chunkBytes) + int64(m.chunkBytes)/8 + 64<<10
	}
	coords, err := s.listChunks(ctx, key, m, m.grid)
	if err != nil {
		return dr, err
	}
	var count, total atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, c := range coords {
		g.Go(func() error {
			b, err := s.read(gctx, joinKey(key, chunkKey(m, c)), bound)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("chunk %v: %w", c, err)
			}
			vals, err := stringChunk(m, b, elems)
			if err != nil {
				return fmt.Errorf("chunk %v: %w", c, err)
			}
			start, cnt, edge := zarrmap.ChunkBox(c, m.chunk, m.shape)
			if edge {
				vals = boxValues(vals, m.chunk, cnt)
			}
			n := 0
			for _, v := range vals {
				n += len(v)
			}
			if err := ds.WriteVlen(gctx, engine.Box(start, cnt), vals); err != nil {
				return fmt.Errorf("chunk %v: %w", c, err)
			}
			count.Add(1)
			total.Add(int64(n))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return dr, err
	}
	dr.Chunks = int(count.Load())
	dr.Reencoded = dr.Chunks
	dr.Bytes = total.Load()
	return dr, nil
}

// exportStrings writes a variable-length dataset of Uint8 as Zarr
// variable-length strings: text (zarrmap.VlenStringAttr) with numcodecs'
// vlen-utf8 (v2 dtype "|O", v3 data_type "string", fill value ""), or in
// v2 as the numpy unicode "<U<n>" zarrmap.DtypeAttr names when every
// string fits it (text imported from one), bytes with vlen-bytes (v2 only: Zarr
// v3 has no core variable-length bytes type). Sequences of another
// numeric or bool type are numcodecs' vlen-array of its dtype (v2 only:
// Zarr v3 has no variable-length sequence type). The codec chain is the dataset's pipeline's (zarrmap.PlanOf)
// after the object codec.
func exportStrings(ctx context.Context, ds *engine.Dataset, dr DatasetReport, dir string, v, workers int) (DatasetReport, error) {
	seq, isSeq := zarrmap.Dtypes[ds.Type()]
	isSeq = isSeq && ds.Type() != engine.Uint8
	switch {
	case isSeq && v == 3:
		return dr, fmt.Errorf("%w: variable-length sequences of %v (Zarr v3 has no variable-length sequence data type; Zarr v2 holds them as numcodecs' vlen-array)", ErrUnsupported, ds.Type())
	case !isSeq && ds.Type() != engine.Uint8:
		return dr, fmt.Errorf("%w: variable-length dataset of %v (Zarr holds variable-length strings, bytes and sequences of numbers)", ErrUnsupported, ds.Type())
	}
	text := false
	if a, err := ds.Attr(zarrmap.VlenStringAttr); err == nil {
		cs, err := a.Str()
		text = err == nil && (cs == "utf-8" || cs == "ascii")
	}
	if !text && v == 3 {
		return dr, fmt.Errorf("%w: variable-length bytes (Zarr v3 has no variable-length bytes data type; mark text with the attribute %s)", ErrUnsupported, zarrmap.VlenStringAttr)
	}
	objCodec := "vlen-bytes"
	switch {
	case text:
		objCodec = "vlen-utf8"
	case isSeq:
		objCodec = "vlen-array"
	}
	p := zarrmap.PlanOf(ds, v)
	// Shuffle is for fixed-size elements: zarrita refuses it on strings,
	// and over 1-byte elements it changes nothing.
	p.Chain = slices.DeleteFunc(p.Chain, func(c zarrmap.Codec) bool { return c.ID == "shuffle" })
	dr.Codecs = objCodec
	if c := zarrmap.ChainString(p.Chain); c != "raw" {
		dr.Codecs += "," + c
	}
	dr.Why = "variable-length layout: values read and encoded with " + objCodec
	list, err := ds.Attrs()
	if err != nil {
		return dr, err
	}
	attrs, err := attrsJSON(list)
	if err != nil {
		return dr, err
	}
	if text {
		delete(attrs, zarrmap.VlenStringAttr) // the data type says it
	}
	shape, chunk := ds.Shape(), ds.Chunk()
	if err := ds.Evict(ctx); err != nil {
		return dr, err
	}
	exts, err := ds.ChunkExtents(ctx)
	if err != nil {
		return dr, err
	}
	// numpy unicode the strings came from (import's zarrmap.DtypeAttr):
	// written as that type again when every string still fits.
	ucs4 := 0
	if mark, ok := attrs[zarrmap.DtypeAttr].(string); ok && text {
		delete(attrs, zarrmap.DtypeAttr)
		// v2 only: v3's fixed_length_utf32 is an extension data type
		// that zarrita, for one, does not read; v3's core "string" is.
		if n, _, ok := parseUnicode(mark); ok && v == 2 {
			fits, err := stringsFit(ctx, ds, exts, chunk, shape, n)
			if err != nil {
				return dr, err
			}
			if fits {
				ucs4 = n
				dr.Codecs = strings.TrimPrefix(strings.TrimPrefix(dr.Codecs, objCodec), ",")
				dr.Why = fmt.Sprintf("variable-length layout: written as numpy unicode of %d code points, the type it was imported from", n)
			} else {
				dr.Notes = append(dr.Notes, fmt.Sprintf("a string is longer than the %s it was imported as: written as vlen-utf8", mark))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return dr, err
	}
	if ucs4 > 0 {
		if err := writeUnicodeMeta(dir, shape, chunk, ucs4, p.Chain, attrs); err != nil {
			return dr, err
		}
	} else if v == 2 {
		oc := map[string]any{"id": objCodec}
		if isSeq {
			oc["dtype"] = seq.V2
		}
		filters := []any{oc}
		var comp any
		for i, c := range p.Chain {
			if i == len(p.Chain)-1 {
				comp = c.JSON(2)
			} else {
				filters = append(filters, c.JSON(2))
			}
		}
		var fill any
		if text {
			fill = ""
		}
		meta := map[string]any{
			"zarr_format": 2, "shape": shape, "chunks": chunk, "dtype": "|O", "fill_value": fill,
			"order": "C", "filters": filters, "compressor": comp, "dimension_separator": ".",
		}
		if err := writeJSON(filepath.Join(dir, ".zarray"), meta); err != nil {
			return dr, err
		}
		if len(attrs) > 0 {
			if err := writeJSON(filepath.Join(dir, ".zattrs"), attrs); err != nil {
				return dr, err
			}
		}
	} else {
		codecs := []any{map[string]any{"name": "vlen-utf8"}}
		for _, c := range p.Chain {
			codecs = append(codecs, c.JSON(3))
		}
		meta := map[string]any{
			"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "string",
			"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": chunk}},
			"chunk_key_encoding": map[string]any{"name": "default", "configuration": map[string]any{"separator": "/"}},
			"fill_value":         "", "codecs": codecs, "attributes": attrs,
		}
		if err := writeJSON(filepath.Join(dir, "zarr.json"), meta); err != nil {
			return dr, err
		}
	}
	elems := 1
	for _, c := range chunk {
		elems *= int(c)
	}
	var count, total atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, e := range exts {
		g.Go(func() error {
			start, cnt, edge := zarrmap.ChunkBox(e.Coord, chunk, shape)
			for _, c := range cnt {
				if c == 0 {
					return nil // beyond the extent
				}
			}
			vals, err := ds.ReadVlen(gctx, engine.Box(start, cnt))
			if err != nil {
				return err
			}
			if edge {
				// Zarr stores whole chunks: the elements past the extent
				// are the fill value, "".
				full := make([][]byte, elems)
				placeBox(full, vals, chunk, cnt)
				vals = full
			}
			var raw []byte
			if ucs4 > 0 {
				raw = utf32Chunk(vals, ucs4)
			} else if raw, err = zarrmap.EncodeVLen(vals); err != nil {
				return err
			}
			out, err := zarrmap.EncodeChain(p.Chain, raw)
			if err != nil {
				return fmt.Errorf("chunk %v: %w", e.Coord, err)
			}
			path := chunkPath(dir, v, e.Coord)
			if v == 3 {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					return err
				}
			}
			count.Add(1)
			total.Add(int64(len(raw)))
			return os.WriteFile(path, out, 0o644)
		})
	}
	if err := g.Wait(); err != nil {
		return dr, err
	}
	dr.Chunks = int(count.Load())
	dr.Reencoded = dr.Chunks
	dr.Bytes = total.Load()
	return dr, nil
}

// placeBox is boxValues' inverse: it puts the elements of box count into
// a whole chunk's elements in C order.
func placeBox(full, vals [][]byte, chunk, count []uint64) {
	r := len(chunk)
	idx := make([]uint64, r)
	for _, v := range vals {
		off := uint64(0)
		for d := 0; d < r; d++ {
			off = off*chunk[d] + idx[d]
		}
		full[off] = v
		for d := r - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// stringsFit says whether every stored string holds at most n code
// points.
func stringsFit(ctx context.Context, ds *engine.Dataset, exts []engine.ChunkExtent, chunk, shape []uint64, n int) (bool, error) {
	for _, e := range exts {
		start, cnt, _ := zarrmap.ChunkBox(e.Coord, chunk, shape)
		if slices.Contains(cnt, 0) {
			continue
		}
		vals, err := ds.ReadVlen(ctx, engine.Box(start, cnt))
		if err != nil {
			return false, err
		}
		for _, v := range vals {
			if utf8.RuneCount(v) > n {
				return false, nil
			}
		}
	}
	return true, nil
}

// utf32Chunk is a whole chunk of numpy unicode of n code points: each
// string in UTF-32LE, NUL-padded.
func utf32Chunk(vals [][]byte, n int) []byte {
	out := make([]byte, len(vals)*4*n)
	for i, v := range vals {
		p := i * 4 * n
		for _, r := range string(v) {
			binary.LittleEndian.PutUint32(out[p:], uint32(r))
			p += 4
		}
	}
	return out
}

// writeUnicodeMeta writes the v2 metadata of a numpy unicode array of n
// code points an element ("<U<n>"), fill value "".
func writeUnicodeMeta(dir string, shape, chunk []uint64, n int, chain []zarrmap.Codec, attrs map[string]any) error {
	var filters, comp any
	if k := len(chain); k > 0 {
		comp = chain[k-1].JSON(2)
		if k > 1 {
			fs := make([]any, k-1)
			for i, c := range chain[:k-1] {
				fs[i] = c.JSON(2)
			}
			filters = fs
		}
	}
	meta := map[string]any{
		"zarr_format": 2, "shape": shape, "chunks": chunk, "dtype": fmt.Sprintf("<U%d", n), "fill_value": "",
		"order": "C", "filters": filters, "compressor": comp, "dimension_separator": ".",
	}
	if err := writeJSON(filepath.Join(dir, ".zarray"), meta); err != nil {
		return err
	}
	if len(attrs) > 0 {
		return writeJSON(filepath.Join(dir, ".zattrs"), attrs)
	}
	return nil
}
