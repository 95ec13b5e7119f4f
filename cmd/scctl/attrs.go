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
	}
	vals := formatValues(v.Type(), v.Bytes())
	more := ""
	if len(vals) > maxShown {
		more = fmt.Sprintf(", … (%d elements)", len(vals))
		vals = vals[:maxShown]
	}
	return "[" + strings.Join(vals, ", ") + more + "]"
}

// attrType names an attribute's type as ls and dump print it.
func attrType(v engine.AttrValue) string {
	switch v.Kind() {
	case engine.AttrScalar:
		return v.Type().String()
	case engine.AttrArray:
		return fmt.Sprintf("%s[%d]", v.Type(), v.Len())
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
