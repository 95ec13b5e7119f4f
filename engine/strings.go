package engine

import (
	"bytes"
	"context"
	"fmt"
	"unicode/utf8"
)

// Fixed-length strings (FixedString) are stored as their bytes, each
// element exactly the type's length. Their text follows HDF5's padding
// rules: NullTerm ends at the first NUL (or fills all the bytes, as a
// foreign writer may leave it), NullPad and SpacePad drop trailing NULs
// or spaces. EncodeString refuses what DecodeString could not give back,
// so WriteStrings never stores a string that reads as another; raw
// element bytes written through Write are stored as given.

// EncodeString returns s as one element of the string type t. It fails
// with ErrInvalid when t is not a string type, when s does not fit (a
// NullTerm string keeps one byte for its NUL), when the padding would
// change it (a NUL inside a NullTerm string, a trailing NUL in a NullPad
// or a trailing space in a SpacePad one), or when s is not in t's
// character set (ASCII: bytes below 0x80; UTF-8: valid UTF-8).
func EncodeString(t Type, s string) ([]byte, error) {
	out := make([]byte, t.Size())
	return out, encodeString(out, t, s)
}

func encodeString(out []byte, t Type, s string) error {
	if !t.IsString() || !t.Valid() {
		return fmt.Errorf("%w: %v is not a fixed-length string type", ErrInvalid, t)
	}
	n := t.StrLen()
	room := n
	if t.Pad() == NullTerm {
		room = n - 1
	}
	if len(s) > room {
		return fmt.Errorf("%w: string of %d bytes does not fit %v (at most %d)", ErrInvalid, len(s), t, room)
	}
	switch t.Charset() {
	case ASCII:
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return fmt.Errorf("%w: string %q is not ASCII (%v)", ErrInvalid, s, t)
			}
		}
	case UTF8:
		if !utf8.ValidString(s) {
			return fmt.Errorf("%w: string %q is not valid UTF-8 (%v)", ErrInvalid, s, t)
		}
	}
	pad := byte(0)
	switch p := t.Pad(); {
	case p == NullTerm && bytes.IndexByte([]byte(s), 0) >= 0:
		return fmt.Errorf("%w: string %q holds a NUL, which ends a %v string", ErrInvalid, s, t)
	case p == NullPad && len(s) > 0 && s[len(s)-1] == 0:
		return fmt.Errorf("%w: string %q ends with a NUL, which a %v string drops", ErrInvalid, s, t)
	case p == SpacePad && len(s) > 0 && s[len(s)-1] == ' ':
		return fmt.Errorf("%w: string %q ends with a space, which a %v string drops", ErrInvalid, s, t)
	case p == SpacePad:
		pad = ' '
	}
	copy(out, s)
	for i := len(s); i < n; i++ {
		out[i] = pad
	}
	return nil
}

// DecodeString returns the text of one element of the string type t
// (elem holds its bytes) under t's padding rule. The bytes are not checked
// against the character set: raw writes may have stored any.
func DecodeString(t Type, elem []byte) string {
	switch t.Pad() {
	case NullTerm:
		if i := bytes.IndexByte(elem, 0); i >= 0 {
			elem = elem[:i]
		}
	case NullPad:
		elem = bytes.TrimRight(elem, "\x00")
	case SpacePad:
		elem = bytes.TrimRight(elem, " ")
	}
	return string(elem)
}

// writeFixedStrings is WriteStrings for a fixed-length string dataset:
// vals are the selection's elements in C order, each encoded by
// EncodeString; nothing is written when one of them is refused.
func (d *Dataset) writeFixedStrings(ctx context.Context, sel Selection, vals []string) error {
	t := d.Type()
	if !t.IsString() {
		return fmt.Errorf("%w: writing strings to a %v dataset", ErrInvalid, t)
	}
	sel = d.s.fit(sel)
	if n := sel.NumElements(); uint64(len(vals)) != n {
		return fmt.Errorf("%w: %d strings for a selection of %d elements", ErrInvalid, len(vals), n)
	}
	es := t.Size()
	buf := make([]byte, len(vals)*es)
	for i, s := range vals {
		if err := encodeString(buf[i*es:(i+1)*es], t, s); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return d.Write(ctx, sel, buf)
}

// readFixedStrings is ReadStrings for a fixed-length string dataset: the
// selection's elements as text (DecodeString of each).
func (d *Dataset) readFixedStrings(ctx context.Context, sel Selection) ([]string, error) {
	t := d.Type()
	if !t.IsString() {
		return nil, fmt.Errorf("%w: reading strings from a %v dataset", ErrInvalid, t)
	}
	sel = d.s.fit(sel)
	n := sel.NumElements()
	es := uint64(t.Size())
	if n > uint64(maxInt)/es {
		return nil, fmt.Errorf("%w: selection of %d strings", ErrInvalid, n)
	}
	buf := make([]byte, n*es)
	if err := d.Read(ctx, sel, buf); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		out[i] = DecodeString(t, buf[uint64(i)*es:uint64(i+1)*es])
	}
	return out, nil
}

const maxInt = int(^uint(0) >> 1)

// FixedStringsAttr is an array attribute of the string type t holding
// vals, each encoded by EncodeString.
func FixedStringsAttr(t Type, vals ...string) (AttrValue, error) {
	es := t.Size()
	if !t.IsString() || es == 0 {
		return AttrValue{}, fmt.Errorf("%w: %v is not a fixed-length string type", ErrInvalid, t)
	}
	b := make([]byte, len(vals)*es)
	for i, s := range vals {
		if err := encodeString(b[i*es:(i+1)*es], t, s); err != nil {
			return AttrValue{}, err
		}
	}
	return AttrValue{kind: AttrArray, typ: t, data: b}, nil
}

// Strings returns the text of a scalar or array attribute of a
// fixed-length string type (ErrAttrType for any other).
func (v AttrValue) Strings() ([]string, error) {
	if v.kind != AttrScalar && v.kind != AttrArray || !v.typ.IsString() {
		return nil, ErrAttrType
	}
	es := v.typ.Size()
	out := make([]string, len(v.data)/es)
	for i := range out {
		out[i] = DecodeString(v.typ, v.data[i*es:(i+1)*es])
	}
	return out, nil
}
