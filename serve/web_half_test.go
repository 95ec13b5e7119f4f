package serve

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestWebSliceHalf: float16 and bfloat16 datasets are drawn by their
// values, NaN transparent, as the other float types are.
func TestWebSliceHalf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "half.scc")
	f := testfile.Create(t, path, nil)
	for name, ty := range map[string]engine.Type{"h": engine.Float16, "bf": engine.BFloat16} {
		ds, err := f.CreateDataset(context.Background(), name, engine.DatasetSpec{Type: ty, Shape: []uint64{2, 3}, Chunk: []uint64{2, 3}})
		require.NoError(t, err)
		var b []byte
		for _, v := range []float64{0, 1, 2, 3, -1, math.NaN()} {
			bits := engine.Float16Bits(v)
			if ty == engine.BFloat16 {
				bits = engine.BFloat16Bits(v)
			}
			b = binary.LittleEndian.AppendUint16(b, bits)
		}
		require.NoError(t, ds.Write(bg, engine.All([]uint64{2, 3}), b))
	}
	require.NoError(t, f.Close(context.Background()))
	_, s, _ := open(t, path, Options{})
	for _, name := range []string{"h", "bf"} {
		img, hdr := slicePNG(t, s, "ds="+name)
		assert.Equal(t, "-1", hdr.Get("X-Scc-Min"), name)
		assert.Equal(t, "3", hdr.Get("X-Scc-Max"), name)
		assert.Equal(t, uint8(255), gray(t, img, 0, 1), name)
		assert.Equal(t, uint8(64), gray(t, img, 0, 0), name) // (0+1)/4×255
	}
}
