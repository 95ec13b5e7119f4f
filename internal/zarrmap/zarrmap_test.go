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
