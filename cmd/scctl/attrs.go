package main

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// maxShown bounds how much of one attribute ls and dump print.
const maxShown = 16

// formatAttr renders an attribute's value for ls and dump: strings quoted,
// byte strings in hex, numbers as dump prints elements, arrays in brackets;
// long values are cut with their full length said.
func formatAttr(v engine.AttrValue) string {
	switch v.Kind() {
	case engine.AttrString:
		s, _ := v.Str()
		if len(s) > 256 {
			return strconv.Quote(s[:256]) + fmt.Sprintf("… (%d bytes)", len(s))
		}
		return strconv.Quote(s)
	case engine.AttrBytes:
		b := v.Bytes()
		if len(b) > 64 {
			return fmt.Sprintf("0x%s… (%d bytes)", hex.EncodeToString(b[:64]), len(b))
		}
		return "0x" + hex.EncodeToString(b)
	case engine.AttrScalar:
		return formatValues(v.Type(), v.Bytes())[0]
	case engine.AttrNull:
		// h5py's name for a value without a dataspace.
		return "Empty"
	}
	vals := formatValues(v.Type(), v.Bytes())
	if dims := v.Shape(); len(dims) > 1 {
		return formatNested(vals, dims)
	}
	more := ""
	if len(vals) > maxShown {
		more = fmt.Sprintf(", … (%d elements)", len(vals))
		vals = vals[:maxShown]
	}
	return "[" + strings.Join(vals, ", ") + more + "]"
}

// formatNested renders an N-D value as nested lists, rows in brackets;
// after maxShown elements it ends every open list with "…" and says the
// full count.
func formatNested(vals []string, dims []uint64) string {
	var b strings.Builder
	shown := 0
	var rows func(vals []string, dims []uint64) bool
	rows = func(vals []string, dims []uint64) bool {
		b.WriteByte('[')
		defer b.WriteByte(']')
		n := int(dims[0])
		step := 0
		if n > 0 {
			step = len(vals) / n
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			if len(dims) > 1 {
				if !rows(vals[i*step:(i+1)*step], dims[1:]) {
					return false
				}
				continue
			}
			if shown == maxShown {
				b.WriteString("…")
				return false
			}
			b.WriteString(vals[i])
			shown++
		}
		return true
	}
	if !rows(vals, dims) {
		fmt.Fprintf(&b, " (%d elements)", len(vals))
	}
	return b.String()
}

// attrType names an attribute's type as ls and dump print it: an array's
// shape in brackets, a null's type after "null".
func attrType(v engine.AttrValue) string {
	switch v.Kind() {
	case engine.AttrScalar:
		return v.Type().String()
	case engine.AttrArray:
		dims := make([]string, 0, 1)
		for _, d := range v.Shape() {
			dims = append(dims, strconv.FormatUint(d, 10))
		}
		return fmt.Sprintf("%s[%s]", v.Type(), strings.Join(dims, ","))
	case engine.AttrNull:
		if v.Type() == 0 {
			return "null string"
		}
		return "null " + v.Type().String()
	}
	return v.Kind().String()
}

// lsAttr is one attribute in ls --json.
type lsAttr struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

func listAttrs(attrs []engine.Attr) []lsAttr {
	out := make([]lsAttr, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, lsAttr{a.Name, attrType(a.Value), formatAttr(a.Value)})
	}
	return out
}
