package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// The metadata decoders check each document against the Zarr v2 and v3
// specifications before any of it is trusted: a key of the wrong JSON
// type, a separator other than "." and "/", a fill value outside the data
// type's range are ErrCorrupt naming the key; things the specifications
// allow but scc cannot hold are ErrUnsupported naming the thing.

// maxChunkBytes bounds an imported chunk's decoded size, as the engine
// bounds its own chunks.
const maxChunkBytes = 1 << 30

// asJSON prints a decoded JSON value as JSON (errors show what the store
// says, not a Go map).
func asJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// decodeObject decodes one JSON object (numbers kept exact), refusing
// anything after it.
func decodeObject(b []byte, what string) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: data after the JSON object", ErrCorrupt, what)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is %s, not a JSON object", ErrCorrupt, what, asJSON(v))
	}
	return m, nil
}

func badKey(what, key string, v any, want string) error {
	return fmt.Errorf("%w: %s: %q is %s, want %s", ErrCorrupt, what, key, asJSON(v), want)
}

// intKey reads an integer key.
func intKey(m map[string]any, what, key string) (int64, error) {
	n, ok := m[key].(json.Number)
	if !ok {
		return 0, badKey(what, key, m[key], "an integer")
	}
	i, err := n.Int64()
	if err != nil {
		return 0, badKey(what, key, m[key], "an integer")
	}
	return i, nil
}

// dimsKey reads a list of non-negative integers (positive if positive).
func dimsKey(m map[string]any, what, key string, positive bool) ([]uint64, error) {
	list, ok := m[key].([]any)
	if !ok {
		return nil, badKey(what, key, m[key], "a list of integers")
	}
	out := make([]uint64, len(list))
	for i, x := range list {
		n, ok := x.(json.Number)
		var err error
		if ok {
			var b []byte
			if b, err = parseElem(engine.Uint64, n); err == nil {
				for k := 7; k >= 0; k-- {
					out[i] = out[i]<<8 | uint64(b[k])
				}
			}
		}
		if !ok || err != nil || strings.ContainsAny(string(n), ".eE") || positive && out[i] == 0 {
			w := "non-negative"
			if positive {
				w = "positive"
			}
			return nil, badKey(what, key, m[key], "a list of "+w+" integers")
		}
	}
	return out, nil
}

// zarrFormat checks a document's zarr_format.
func zarrFormat(m map[string]any, what string, want int64) error {
	v, ok := m["zarr_format"]
	if s, isStr := v.(string); isStr && want == 3 {
		return fmt.Errorf("%w: %s: \"zarr_format\" is %q, a draft of Zarr v3 that readers no longer read (scc reads Zarr v2 and the final v3)", ErrUnsupported, what, s)
	}
	n, err := intKey(m, what, "zarr_format")
	if !ok || err != nil {
		return badKey(what, "zarr_format", v, fmt.Sprint(want))
	}
	if n != want {
		return fmt.Errorf("%w: %s: \"zarr_format\" is %d (scc reads 2 and 3)", ErrUnsupported, what, n)
	}
	return nil
}

// checkShape refuses a chunk shape whose decoded chunk exceeds the bound
// and computes the chunk grid (ceil(shape/chunk), without overflow).
func checkShape(m *arrayMeta, what string) ([]uint64, error) {
	if len(m.chunk) != len(m.shape) {
		return nil, fmt.Errorf("%w: %s: chunks %v do not match shape %v", ErrCorrupt, what, m.chunk, m.shape)
	}
	if len(m.shape) == 0 {
		// A zero-dimensional array: one element in one chunk, imported
		// as a scalar dataset (its storage is shape and chunk [1]).
		if m.vlen != "" || m.ucs4 > 0 || m.shard != nil {
			return nil, fmt.Errorf("%w: zero-dimensional array of strings or shards (scc imports scalar arrays of fixed-size types)", ErrUnsupported)
		}
		m.scalar, m.shape, m.chunk = true, []uint64{1}, []uint64{1}
	}
	if len(m.shape) > engine.MaxRank {
		return nil, fmt.Errorf("%w: rank %d (scc datasets have rank 1..%d)", ErrUnsupported, len(m.shape), engine.MaxRank)
	}
	n := uint64(m.elemSize())
	grid := make([]uint64, len(m.shape))
	for i, c := range m.chunk {
		hi, lo := bits.Mul64(n, c)
		if hi != 0 || lo > maxChunkBytes {
			return nil, fmt.Errorf("%w: %s: a chunk of %v elements exceeds %d bytes", ErrUnsupported, what, m.chunk, maxChunkBytes)
		}
		n = lo
		grid[i] = m.shape[i] / c
		if m.shape[i]%c != 0 {
			grid[i]++
		}
	}
	m.chunkBytes = int(n)
	return grid, nil
}

// decodeV2Array decodes and checks a .zarray document.
func decodeV2Array(b []byte) (*arrayMeta, error) {
	const what = ".zarray"
	z, err := decodeObject(b, what)
	if err != nil {
		return nil, err
	}
	if err := zarrFormat(z, what, 2); err != nil {
		return nil, err
	}
	m := &arrayMeta{}
	if m.shape, err = dimsKey(z, what, "shape", false); err != nil {
		return nil, err
	}
	if m.chunk, err = dimsKey(z, what, "chunks", true); err != nil {
		return nil, err
	}
	var order string
	switch o := z["order"]; o {
	case "C", "F":
		order = o.(string)
	default:
		return nil, badKey(what, "order", o, `"C" or "F"`)
	}
	m.sep = "."
	if s, ok := z["dimension_separator"]; ok && s != nil {
		if s != "." && s != "/" {
			return nil, badKey(what, "dimension_separator", s, `"." or "/"`)
		}
		m.sep = s.(string)
	}
	var filters []any
	switch f := z["filters"].(type) {
	case nil:
	case []any:
		filters = f
	default:
		return nil, badKey(what, "filters", f, "null or a list of codec objects")
	}
	comp, ok := z["compressor"]
	if !ok {
		return nil, badKey(what, "compressor", nil, "null or a codec object")
	}
	if _, ok := z["fill_value"]; !ok {
		return nil, badKey(what, "fill_value", nil, "a value or null")
	}
	switch dt := z["dtype"].(type) {
	case string:
		if nt, be, ok := zarrmap.ParseV2Time(dt); ok {
			m.typ, m.bigEndian, m.time = engine.Int64, be, &nt
		} else if n, be, ok := parseUnicode(dt); ok {
			m.typ, m.bigEndian, m.ucs4 = engine.Uint8, be, n
		} else if dt == "|O" {
			m.typ, m.vlen = engine.Uint8, "object"
		} else if m.typ, m.bigEndian, err = parseV2Dtype(dt); err != nil {
			return nil, err
		}
	case []any:
		if m.typ, m.swaps, err = parseStructured(dt, 0); err != nil {
			return nil, err
		}
		m.bigEndian = len(m.swaps) > 0
	default:
		return nil, badKey(what, "dtype", dt, "a numpy type string")
	}
	for i, fc := range append(filters, comp) {
		if fc == nil && i == len(filters) {
			continue
		}
		obj, ok := fc.(map[string]any)
		if !ok {
			return nil, badKey(what, "filters", fc, "a codec object")
		}
		id, ok := obj["id"].(string)
		if !ok {
			return nil, badKey(what, "id", obj["id"], "a codec name")
		}
		if i == 0 && m.vlen == "object" {
			// An object array's first filter is its object codec, which
			// turns the elements into bytes.
			switch id {
			case "vlen-utf8", "vlen-bytes", "json2", "msgpack2":
			case "vlen-array":
				// Sequences of a numeric type: scc's variable-length
				// layout of that type.
				dt, _ := obj["dtype"].(string)
				t, be, err := parseV2Dtype(dt)
				if _, ok := zarrmap.Dtypes[t]; err != nil || !ok {
					return nil, fmt.Errorf("%w: vlen-array of dtype %s (scc holds sequences of the numeric and bool types)", ErrUnsupported, asJSON(obj["dtype"]))
				}
				m.typ, m.bigEndian = t, be
			case "pickle":
				return nil, fmt.Errorf("%w: object array with object codec \"pickle\": unpickling runs whatever code the chunk names (so no reader should on data it did not write), and Python objects have no scc type", ErrUnsupported)
			default:
				return nil, fmt.Errorf("%w: object array with object codec %q (scc reads vlen-utf8, vlen-bytes, vlen-array, json2 and msgpack2)", ErrUnsupported, id)
			}
			m.vlen = id
			continue
		}
		c, err := codecFrom(id, obj, m.elemSize())
		if err != nil {
			return nil, err
		}
		m.chain = append(m.chain, c)
	}
	if m.vlen == "object" {
		return nil, fmt.Errorf("%w: object array without an object codec", ErrUnsupported)
	}
	if err := m.setFill(z["fill_value"], what); err != nil {
		return nil, err
	}
	if order == "F" && len(m.shape) > 1 {
		// Fortran order is the C order of the reversed axes.
		m.order = make([]int, len(m.shape))
		for i := range m.order {
			m.order[i] = len(m.shape) - 1 - i
		}
	}
	return m, nil
}

// decodeAttrs decodes a .zattrs document (v2) into attributes.
func decodeAttrs(b []byte, what string) (map[string]any, error) {
	return decodeObject(b, what)
}

// v3 keys of an array's zarr.json; others are extensions.
var v3ArrayKeys = map[string]bool{
	"zarr_format": true, "node_type": true, "shape": true, "data_type": true, "chunk_grid": true,
	"chunk_key_encoding": true, "fill_value": true, "codecs": true, "attributes": true,
	"storage_transformers": true, "dimension_names": true,
}

// decodeV3 decodes and checks a zarr.json document: node is "array" or
// "group"; m is nil for a group.
func decodeV3(b []byte) (node string, m *arrayMeta, attrs map[string]any, err error) {
	const what = "zarr.json"
	z, err := decodeObject(b, what)
	if err != nil {
		return "", nil, nil, err
	}
	if err := zarrFormat(z, what, 3); err != nil {
		return "", nil, nil, err
	}
	switch a := z["attributes"].(type) {
	case nil:
		if _, ok := z["attributes"]; ok {
			return "", nil, nil, badKey(what, "attributes", nil, "an object")
		}
	case map[string]any:
		attrs = a
	default:
		return "", nil, nil, badKey(what, "attributes", a, "an object")
	}
	switch z["node_type"] {
	case "group":
		return "group", nil, attrs, nil
	case "array":
	default:
		return "", nil, nil, badKey(what, "node_type", z["node_type"], `"array" or "group"`)
	}
	for k, v := range z {
		if v3ArrayKeys[k] {
			continue
		}
		// An extension a reader may ignore says so.
		if ext, ok := v.(map[string]any); ok && ext["must_understand"] == false {
			continue
		}
		return "", nil, nil, fmt.Errorf("%w: %s: extension %q (%s)", ErrUnsupported, what, k, asJSON(v))
	}
	m = &arrayMeta{}
	if m.shape, err = dimsKey(z, what, "shape", false); err != nil {
		return "", nil, nil, err
	}
	switch dt := z["data_type"].(type) {
	case string:
		if dt == "string" {
			// zarr-python 3's variable-length UTF-8 strings (codec
			// vlen-utf8).
			m.typ, m.vlen = engine.Uint8, "vlen-utf8"
		} else if m.typ, err = parseV3Type(dt); err != nil {
			return "", nil, nil, err
		}
	case map[string]any:
		name, _ := dt["name"].(string)
		cfg, _ := dt["configuration"].(map[string]any)
		if nt, ok := zarrmap.ParseV3Time(name, cfg); ok {
			m.typ, m.time = engine.Int64, &nt
		} else if n, ok := v3UTF32(name, cfg); ok {
			m.typ, m.ucs4 = engine.Uint8, n
		} else if m.typ, err = parseV3Struct(dt); err != nil {
			return "", nil, nil, err
		}
	default:
		return "", nil, nil, badKey(what, "data_type", dt, "a data type name")
	}
	grid, ok := z["chunk_grid"].(map[string]any)
	if !ok {
		return "", nil, nil, badKey(what, "chunk_grid", z["chunk_grid"], "an object")
	}
	if grid["name"] != "regular" {
		return "", nil, nil, fmt.Errorf("%w: chunk_grid %s (scc reads the regular grid)", ErrUnsupported, asJSON(grid["name"]))
	}
	gcfg, ok := grid["configuration"].(map[string]any)
	if !ok {
		return "", nil, nil, badKey(what, "chunk_grid.configuration", grid["configuration"], "an object")
	}
	if m.chunk, err = dimsKey(gcfg, what, "chunk_shape", true); err != nil {
		return "", nil, nil, err
	}
	enc, ok := z["chunk_key_encoding"].(map[string]any)
	if !ok {
		return "", nil, nil, badKey(what, "chunk_key_encoding", z["chunk_key_encoding"], "an object")
	}
	var sep any
	if c, ok := enc["configuration"]; ok && c != nil {
		cfg, ok := c.(map[string]any)
		if !ok {
			return "", nil, nil, badKey(what, "chunk_key_encoding.configuration", c, "an object")
		}
		sep = cfg["separator"]
	}
	switch enc["name"] {
	case "default":
		m.prefix, m.sep = "c", "/"
	case "v2":
		m.sep = "."
	default:
		return "", nil, nil, fmt.Errorf("%w: chunk_key_encoding %s", ErrUnsupported, asJSON(enc["name"]))
	}
	if sep != nil {
		if sep != "." && sep != "/" {
			return "", nil, nil, badKey(what, "chunk_key_encoding.configuration.separator", sep, `"." or "/"`)
		}
		m.sep = sep.(string)
	}
	if st, ok := z["storage_transformers"]; ok {
		if l, isList := st.([]any); !isList || len(l) > 0 {
			return "", nil, nil, fmt.Errorf("%w: storage_transformers %s", ErrUnsupported, asJSON(st))
		}
	}
	codecs, ok := z["codecs"].([]any)
	if !ok || len(codecs) == 0 {
		return "", nil, nil, badKey(what, "codecs", z["codecs"], "a non-empty list of codecs")
	}
	if err := m.v3Codecs(codecs); err != nil {
		return "", nil, nil, err
	}
	if _, ok := z["fill_value"]; !ok {
		return "", nil, nil, badKey(what, "fill_value", nil, "a value")
	}
	if err := m.setFill(z["fill_value"], what); err != nil {
		return "", nil, nil, err
	}
	return "array", m, attrs, nil
}

// v3Codecs reads the codec list: array-to-array codecs (transpose), one
// array-to-bytes codec (bytes), then bytes-to-bytes codecs.
func (m *arrayMeta) v3Codecs(codecs []any) error {
	const what = "zarr.json"
	sawBytes := false
	for _, c := range codecs {
		var name string
		var cfg map[string]any
		switch x := c.(type) {
		case string:
			name = x
		case map[string]any:
			n, ok := x["name"].(string)
			if !ok {
				return badKey(what, "codecs[].name", x["name"], "a codec name")
			}
			name = n
			if raw, ok := x["configuration"]; ok && raw != nil {
				if cfg, ok = raw.(map[string]any); !ok {
					return badKey(what, name+".configuration", raw, "an object")
				}
			}
		default:
			return badKey(what, "codecs", c, "a list of codec objects")
		}
		switch name {
		case "transpose":
			if sawBytes {
				return fmt.Errorf("%w: %s: transpose after the bytes codec", ErrCorrupt, what)
			}
			if m.order != nil {
				return fmt.Errorf("%w: two transpose codecs", ErrUnsupported)
			}
			order, err := permutation(cfg["order"], len(m.shape))
			if err != nil {
				return err
			}
			m.order = order
			continue
		case "bytes":
			if sawBytes {
				return fmt.Errorf("%w: %s: two array-to-bytes codecs", ErrCorrupt, what)
			}
			sawBytes = true
			if m.vlen != "" {
				return fmt.Errorf("%w: %s: the bytes codec for variable-length strings", ErrCorrupt, what)
			}
			switch e := cfg["endian"]; e {
			case "big":
				m.bigEndian = swapUnit(m.typ) > 1
			case "little", nil:
			default:
				return badKey(what, "bytes.configuration.endian", e, `"little" or "big"`)
			}
			continue
		case "sharding_indexed":
			if sawBytes || m.order != nil {
				return fmt.Errorf("%w: %s: sharding_indexed after another codec", ErrUnsupported, what)
			}
			sh, err := m.sharding(cfg)
			if err != nil {
				return err
			}
			m.shard, sawBytes = sh, true
			continue
		case "vlen-utf8", "vlen-bytes":
			if m.vlen != name || sawBytes {
				return fmt.Errorf("%w: codec %q for data type %v", ErrUnsupported, name, m.typ)
			}
			sawBytes = true
			continue
		}
		if !sawBytes && name == "numcodecs.delta" && len(m.chain) == 0 && m.vlen == "" {
			// numcodecs' Delta as an array-to-array codec: the bytes
			// codec serializes its output, so it is undone last, on the
			// elements in the bytes codec's order (set below).
			cc, err := codecFrom(name, cfg, m.elemSize())
			if err != nil {
				return err
			}
			m.chain = append(m.chain, cc)
			continue
		}
		if !sawBytes {
			return fmt.Errorf("%w: codec %q before the bytes codec", ErrUnsupported, name)
		}
		if m.shard != nil {
			return fmt.Errorf("%w: codec %q after sharding_indexed (scc stores the shard's bytes as they are)", ErrUnsupported, name)
		}
		cc, err := codecFrom(name, cfg, m.elemSize())
		if err != nil {
			return err
		}
		m.chain = append(m.chain, cc)
	}
	if len(m.chain) > 0 && m.chain[0].id == "delta" {
		d := &m.chain[0].delta
		d.bigEndian = m.bigEndian && d.size > 1
		d.as.bigEndian = m.bigEndian && d.as.size > 1
	}
	if !sawBytes {
		return fmt.Errorf("%w: %s: no \"bytes\" codec (the only array-to-bytes codec scc reads, with vlen-utf8 for strings)", ErrUnsupported, what)
	}
	return nil
}

// permutation reads a transpose codec's order: a permutation of the axes
// (or "C"/"F", which early writers used).
func permutation(v any, rank int) ([]int, error) {
	out := make([]int, rank)
	switch x := v.(type) {
	case string:
		for i := range out {
			out[i] = i
			if x == "F" {
				out[i] = rank - 1 - i
			}
		}
		if x == "C" || x == "F" {
			return out, nil
		}
	case []any:
		seen := make([]bool, rank)
		if len(x) != rank {
			break
		}
		ok := true
		for i, e := range x {
			n, isNum := e.(json.Number)
			k, err := n.Int64()
			if !isNum || err != nil || k < 0 || k >= int64(rank) || seen[k] {
				ok = false
				break
			}
			seen[k], out[i] = true, int(k)
		}
		if ok {
			return out, nil
		}
	}
	return nil, badKey("zarr.json", "transpose.configuration.order", v, fmt.Sprintf("a permutation of 0..%d", rank-1))
}

// v2DtypeClass names the kind of a numpy type string for errors.
func v2DtypeClass(s string) string {
	k := s
	if len(k) > 0 && strings.ContainsRune("<>|=", rune(k[0])) {
		k = k[1:]
	}
	if k == "" {
		return "unknown"
	}
	switch k[0] {
	case 'b', '?':
		return "bool"
	case 'i', 'u':
		return "integer"
	case 'f':
		switch k[1:] {
		case "2":
			return "float16"
		case "16", "12":
			return "long double"
		}
		return "float"
	case 'c':
		return "complex"
	case 'S', 'a':
		return "string (fixed-length bytes)"
	case 'U':
		return "string (fixed-length unicode)"
	case 'O':
		return "object (variable-length)"
	case 'V':
		return "void (raw bytes)"
	case 'M':
		return "datetime"
	case 'm':
		return "timedelta"
	}
	return "unknown"
}

func v3TypeClass(s string) string {
	switch {
	case s == "bool":
		return "bool"
	case s == "float16":
		return "float16"
	case strings.HasPrefix(s, "complex"):
		return "complex"
	case s == "string":
		return "string"
	case s == "bytes":
		return "bytes"
	case strings.HasPrefix(s, "r") && len(s) > 1 && strings.Trim(s[1:], "0123456789") == "":
		return "raw bits"
	case strings.Contains(s, "datetime"), strings.Contains(s, "timedelta"):
		return "datetime"
	}
	return "unknown"
}
