package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// numcodecs' JSON ("json2") and MsgPack ("msgpack2") object codecs store a
// chunk of an object array as one document: the chunk's elements as
// nested lists (numpy's tolist of the whole chunk), then its dtype string
// ("|O") and its shape. scc reads such arrays when their elements are
// strings, onto the variable-length layout as vlen-utf8 strings are; an
// element that is null, or the number 0 (zarr-python 2's fill value of
// object arrays, which it writes into the unwritten parts of a chunk),
// reads as the empty string, scc's variable-length fill. Any other
// element (a number, a list, a map) has no scc form: the chunk is refused.
// pickle, the third object codec, is never decoded: unpickling runs
// whatever code the chunk names, and its objects have no scc type.

// maxObjectDepth bounds the nesting of an object chunk's document: the
// chunk's rank plus the lists around it.
const maxObjectDepth = 40

// objectChunk decodes a json2 or msgpack2 chunk of the chunk shape chunk
// into its elements' UTF-8 bytes, in C order.
func objectChunk(id string, raw []byte, chunk []uint64) ([][]byte, error) {
	var doc any
	switch id {
	case "json2":
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("%w: json2 chunk: %v", ErrCorrupt, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: json2 chunk: data after the document", ErrCorrupt)
		}
		if err := jsonDepth(raw); err != nil {
			return nil, err
		}
	case "msgpack2":
		v, rest, err := msgpackValue(raw, 0)
		if err != nil {
			return nil, err
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("%w: msgpack2 chunk: %d bytes after the document", ErrCorrupt, len(rest))
		}
		doc = v
	default:
		return nil, fmt.Errorf("%w: object codec %q", ErrUnsupported, id)
	}
	items, ok := doc.([]any)
	if !ok || len(items) < 2 {
		return nil, fmt.Errorf("%w: %s chunk is not a list of the elements, the dtype and the shape", ErrCorrupt, id)
	}
	if dt, _ := items[len(items)-2].(string); dt != "|O" {
		return nil, fmt.Errorf("%w: %s chunk of dtype %s, want \"|O\"", ErrCorrupt, id, asJSON(items[len(items)-2]))
	}
	shape, _ := items[len(items)-1].([]any)
	if len(shape) != len(chunk) {
		return nil, fmt.Errorf("%w: %s chunk of shape %s, want %v", ErrCorrupt, id, asJSON(items[len(items)-1]), chunk)
	}
	for d, x := range shape {
		if n, ok := x.(json.Number); !ok || string(n) != strconv.FormatUint(chunk[d], 10) {
			return nil, fmt.Errorf("%w: %s chunk of shape %s, want %v", ErrCorrupt, id, asJSON(items[len(items)-1]), chunk)
		}
	}
	n := 1
	for _, c := range chunk {
		n *= int(c)
	}
	out := make([][]byte, 0, n)
	var walk func(v []any, d int) error
	walk = func(v []any, d int) error {
		if uint64(len(v)) != chunk[d] {
			return fmt.Errorf("%w: %s chunk: %d elements along dimension %d, want %d", ErrCorrupt, id, len(v), d, chunk[d])
		}
		for _, e := range v {
			if d+1 < len(chunk) {
				sub, ok := e.([]any)
				if !ok {
					return fmt.Errorf("%w: %s chunk: %s where dimension %d's list belongs", ErrCorrupt, id, asJSON(e), d+1)
				}
				if err := walk(sub, d+1); err != nil {
					return err
				}
				continue
			}
			switch x := e.(type) {
			case string:
				if !utf8.ValidString(x) {
					return fmt.Errorf("%w: %s chunk: element %d is not UTF-8", ErrCorrupt, id, len(out))
				}
				out = append(out, []byte(x))
			case nil:
				out = append(out, nil)
			case json.Number:
				if f, err := strconv.ParseFloat(string(x), 64); err == nil && f == 0 {
					out = append(out, nil) // zarr-python 2's object fill value
					continue
				}
				return fmt.Errorf("%w: %s chunk: element %d is the number %s (scc imports object arrays of strings)", ErrUnsupported, id, len(out), x)
			default:
				return fmt.Errorf("%w: %s chunk: element %d is %s (scc imports object arrays of strings)", ErrUnsupported, id, len(out), asJSON(x))
			}
		}
		return nil
	}
	if len(chunk) == 0 {
		return nil, fmt.Errorf("%w: %s chunk of a zero-dimensional array", ErrUnsupported, id)
	}
	if err := walk(items[:len(items)-2], 0); err != nil {
		return nil, err
	}
	return out, nil
}

// jsonDepth refuses a JSON document nested deeper than maxObjectDepth
// (encoding/json itself allows 10,000 levels).
func jsonDepth(b []byte) error {
	d, in, esc := 0, false, false
	for _, c := range b {
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == '[' || c == '{':
			if d++; d > maxObjectDepth {
				return fmt.Errorf("%w: json2 chunk nested deeper than %d", ErrCorrupt, maxObjectDepth)
			}
		case c == ']' || c == '}':
			d--
		}
	}
	return nil
}

// msgpackValue decodes one MessagePack value from b: nil, bool, a number
// (as a json.Number), a string, bytes, or a list; maps and extension
// types are refused. A list's length is checked against the bytes left
// (every item takes at least one) before anything is allocated.
func msgpackValue(b []byte, depth int) (any, []byte, error) {
	bad := func(what string) (any, []byte, error) {
		return nil, nil, fmt.Errorf("%w: msgpack2 chunk: %s", ErrCorrupt, what)
	}
	if depth > maxObjectDepth {
		return bad(fmt.Sprintf("nested deeper than %d", maxObjectDepth))
	}
	if len(b) == 0 {
		return bad("truncated")
	}
	t, b := b[0], b[1:]
	// take reads an n-byte big-endian length or number.
	take := func(n int) (uint64, bool) {
		if len(b) < n {
			return 0, false
		}
		var v uint64
		for _, c := range b[:n] {
			v = v<<8 | uint64(c)
		}
		b = b[n:]
		return v, true
	}
	str := func(n uint64, text bool) (any, []byte, error) {
		if n > uint64(len(b)) {
			return bad(fmt.Sprintf("a string of %d bytes, %d left", n, len(b)))
		}
		s := b[:n]
		if text {
			return string(s), b[n:], nil
		}
		return append([]byte(nil), s...), b[n:], nil
	}
	list := func(n uint64) (any, []byte, error) {
		if n > uint64(len(b)) {
			return bad(fmt.Sprintf("a list of %d items, %d bytes left", n, len(b)))
		}
		out := make([]any, n)
		for i := range out {
			var err error
			if out[i], b, err = msgpackValue(b, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return out, b, nil
	}
	num := func(s string) (any, []byte, error) { return json.Number(s), b, nil }
	switch {
	case t <= 0x7f:
		return num(strconv.Itoa(int(t)))
	case t >= 0xe0:
		return num(strconv.Itoa(int(int8(t))))
	case t >= 0xa0 && t <= 0xbf:
		return str(uint64(t&0x1f), true)
	case t >= 0x90 && t <= 0x9f:
		return list(uint64(t & 0x0f))
	case t >= 0x80 && t <= 0x8f, t == 0xde, t == 0xdf:
		return bad("a map (scc imports object arrays of strings)")
	}
	sizes := map[byte]int{0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4, 0xdc: 2, 0xdd: 4,
		0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xca: 4, 0xcb: 8}
	switch t {
	case 0xc0:
		return nil, b, nil
	case 0xc2, 0xc3:
		return t == 0xc3, b, nil
	}
	n, ok := sizes[t]
	if !ok {
		return bad(fmt.Sprintf("type byte %#x (an extension or unused type)", t))
	}
	v, ok := take(n)
	if !ok {
		return bad("truncated")
	}
	switch t {
	case 0xc4, 0xc5, 0xc6:
		return str(v, false)
	case 0xd9, 0xda, 0xdb:
		return str(v, true)
	case 0xdc, 0xdd:
		return list(v)
	case 0xcc, 0xcd, 0xce, 0xcf:
		return num(strconv.FormatUint(v, 10))
	case 0xca:
		return num(strconv.FormatFloat(float64(math.Float32frombits(uint32(v))), 'g', -1, 32))
	case 0xcb:
		return num(strconv.FormatFloat(math.Float64frombits(v), 'g', -1, 64))
	}
	sh := 64 - 8*n // signed
	return num(strconv.FormatInt(int64(v<<sh)>>sh, 10))
}

// vlenArrayElems checks a vlen-array chunk's elements (each a whole
// number of values of size es) and, when bigEndian, reverses each unit
// bytes of them (a complex value's parts one by one) into little-endian
// order in place.
func vlenArrayElems(vals [][]byte, es, unit int, bigEndian bool) error {
	for i, v := range vals {
		if len(v)%es != 0 {
			return fmt.Errorf("%w: vlen-array element %d of %d bytes, not whole %d-byte values", ErrCorrupt, i, len(v), es)
		}
		if bigEndian && unit > 1 {
			for k := 0; k+unit <= len(v); k += unit {
				e := v[k : k+unit]
				for a, z := 0, unit-1; a < z; a, z = a+1, z-1 {
					e[a], e[z] = e[z], e[a]
				}
			}
		}
	}
	return nil
}
