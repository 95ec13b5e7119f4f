package zarrmap

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/scc-dev/scc/engine"
)

// numpy's datetime64 and timedelta64 are 8-byte integers counting units
// of time ("datetime64[ns]": nanoseconds since the epoch; NaT is the
// smallest int64). scc holds them as Int64 with the attribute DtypeAttr
// naming the numpy type, which a Zarr import sets and an export (and a
// served view) reads to write the Zarr data type again: v2 dtype
// "<M8[ns]" / "<m8[ns]", v3 zarr-python's extension data types
// numpy.datetime64 / numpy.timedelta64 {unit, scale_factor}. The mark is
// then the data type, not an attribute of the Zarr array.

// DtypeAttr names the numpy type of an Int64 dataset that holds
// datetime64 or timedelta64 values: "datetime64[<n><unit>]" or
// "timedelta64[<n><unit>]" (n omitted when 1); and of a variable-length
// string dataset imported from numpy unicode, "<U<n>" (interop/zarr
// writes that type again when the strings fit it).
const DtypeAttr = "scc:numpy-dtype"

// NumpyTime is a numpy datetime64 or timedelta64 type.
type NumpyTime struct {
	Delta bool   // timedelta64, else datetime64
	Unit  string // Y M W D h m s ms us ns ps fs as
	Scale int    // units of Unit per count (numpy's "10s"), at least 1
}

var timeUnits = map[string]bool{"Y": true, "M": true, "W": true, "D": true, "h": true, "m": true, "s": true,
	"ms": true, "us": true, "ns": true, "ps": true, "fs": true, "as": true}

var (
	v2TimeRe   = regexp.MustCompile(`^([<>|=])([Mm])8\[([1-9][0-9]{0,8})?([a-zA-Z]{1,2})\]$`)
	markTimeRe = regexp.MustCompile(`^(datetime64|timedelta64)\[([1-9][0-9]{0,8})?([a-zA-Z]{1,2})\]$`)
)

func newTime(delta bool, scale, unit string) (NumpyTime, bool) {
	t := NumpyTime{Delta: delta, Unit: unit, Scale: 1}
	if !timeUnits[unit] {
		return NumpyTime{}, false
	}
	if scale != "" {
		n, err := strconv.Atoi(scale)
		if err != nil || n < 1 {
			return NumpyTime{}, false
		}
		t.Scale = n
	}
	return t, true
}

// ParseV2Time reads a numpy type string "<M8[ns]", "<m8[10s]", ...; ok is
// false for anything else (the generic "<M8" without a unit included).
func ParseV2Time(s string) (t NumpyTime, bigEndian, ok bool) {
	m := v2TimeRe.FindStringSubmatch(s)
	if m == nil {
		return NumpyTime{}, false, false
	}
	t, ok = newTime(m[2] == "m", m[3], m[4])
	return t, m[1] == ">", ok
}

// ParseV3Time reads a v3 data_type object numpy.datetime64 or
// numpy.timedelta64 with its configuration {unit, scale_factor}.
func ParseV3Time(name string, cfg map[string]any) (NumpyTime, bool) {
	var delta bool
	switch name {
	case "numpy.datetime64":
	case "numpy.timedelta64":
		delta = true
	default:
		return NumpyTime{}, false
	}
	unit, _ := cfg["unit"].(string)
	scale := ""
	switch sf := cfg["scale_factor"].(type) {
	case nil:
	case fmt.Stringer: // json.Number
		scale = sf.String()
	default:
		return NumpyTime{}, false
	}
	return newTime(delta, scale, unit)
}

// ParseMark reads a DtypeAttr value.
func ParseMark(s string) (NumpyTime, bool) {
	m := markTimeRe.FindStringSubmatch(s)
	if m == nil {
		return NumpyTime{}, false
	}
	return newTime(m[1] == "timedelta64", m[2], m[3])
}

func (t NumpyTime) unit() string {
	if t.Scale == 1 {
		return t.Unit
	}
	return strconv.Itoa(t.Scale) + t.Unit
}

// Mark is the DtypeAttr value of t.
func (t NumpyTime) Mark() string {
	if t.Delta {
		return "timedelta64[" + t.unit() + "]"
	}
	return "datetime64[" + t.unit() + "]"
}

// V2 is t's little-endian numpy type string.
func (t NumpyTime) V2() string {
	if t.Delta {
		return "<m8[" + t.unit() + "]"
	}
	return "<M8[" + t.unit() + "]"
}

// V3 is t's v3 data_type object.
func (t NumpyTime) V3() map[string]any {
	name := "numpy.datetime64"
	if t.Delta {
		name = "numpy.timedelta64"
	}
	return map[string]any{"name": name, "configuration": map[string]any{"unit": t.Unit, "scale_factor": t.Scale}}
}

// timeOf returns the numpy time type an Int64 dataset's attributes mark.
func timeOf(typ engine.Type, attrs map[string]any) (NumpyTime, bool) {
	if typ != engine.Int64 {
		return NumpyTime{}, false
	}
	s, ok := attrs[DtypeAttr].(string)
	if !ok {
		return NumpyTime{}, false
	}
	return ParseMark(s)
}
