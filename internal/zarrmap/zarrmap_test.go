package zarrmap

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// TestAttrsJSONPolicy: an attribute with no Zarr form goes to skip with
// an ErrUnsupported reason; skip's nil leaves it out and keeps the rest
// (a served view), skip's error fails the whole object with it (an
// export).
func TestAttrsJSONPolicy(t *testing.T) {
	attrs := []engine.Attr{
		{Name: "n", Value: engine.ScalarAttr(int32(-3))},
		{Name: TypesKey, Value: engine.StringAttr("x")},
		{Name: "s", Value: engine.StringAttr("é")},
	}
	var reasons []error
	out, err := AttrsJSON(attrs, func(why error) error {
		reasons = append(reasons, why)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, reasons, 1)
	assert.ErrorIs(t, reasons[0], ErrUnsupported)
	assert.Equal(t, map[string]any{"n": json.Number("-3"), "s": "é", TypesKey: map[string]string{"n": "int32"}}, out)

	stop := errors.New("refused")
	out, err = AttrsJSON(attrs, func(error) error { return stop })
	assert.ErrorIs(t, err, stop)
	assert.Nil(t, out)
}

// TestAttrsJSONShapedAndNull: an N-D attribute is nested lists with its
// shape in the recorded type, a null JSON null recorded as "null" and its
// type; a null of a type without a JSON form is refused like its values.
func TestAttrsJSONShapedAndNull(t *testing.T) {
	m, err := engine.ArrayAttr([]uint8{1, 2, 3, 4}).WithShape(2, 1, 2)
	require.NoError(t, err)
	attrs := []engine.Attr{
		{Name: "m", Value: m},
		{Name: "n", Value: engine.NullAttr(engine.Int32)},
		{Name: "o", Value: engine.NullAttr(engine.Opaque(3, "x"))},
		{Name: "t", Value: engine.NullAttr(0)},
	}
	var reasons []error
	out, err := AttrsJSON(attrs, func(why error) error {
		reasons = append(reasons, why)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, reasons, 1)
	assert.ErrorIs(t, reasons[0], ErrUnsupported)
	assert.Equal(t, map[string]any{
		"m": []any{[]any{[]any{json.Number("1"), json.Number("2")}}, []any{[]any{json.Number("3"), json.Number("4")}}},
		"n": nil, "t": nil,
		TypesKey: map[string]string{"m": "uint8[2,1,2]", "n": "null int32", "t": "null"},
	}, out)
}
