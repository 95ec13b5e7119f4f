package engine

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/internal/format"
)

// TestReadsVersion5File: testdata/v5.scc was written by scc at format
// version 5 (the program in testdata/v5.scc.go.txt), before described
// types. Every dataset, fill value and attribute reads as written, the
// file checks, and a commit to it moves the superblock to the current
// version without changing what was there.
func TestReadsVersion5File(t *testing.T) {
	ctx := t.Context()
	path := oldVersionFixture(t, 5)

	verify := func(f *File) {
		t.Helper()
		d, err := f.OpenDataset(ctx, "dense", nil)
		require.NoError(t, err)
		got := make([]byte, 32*32*2)
		require.NoError(t, d.Read(ctx, All(d.Shape()), got))
		assert.Equal(t, v4Data(32*16*2, 0), got[:32*16*2])
		for i := 32 * 16 * 2; i < len(got); i += 2 {
			if got[i] != 7 || got[i+1] != 0 {
				t.Fatalf("dense: element %d is not the fill value", i/2)
			}
		}
		a, err := d.Attr("seed")
		require.NoError(t, err)
		seed, err := Scalar[int32](a)
		require.NoError(t, err)
		assert.EqualValues(t, 0, seed)
		d.Close(ctx)

		for name, seed := range map[string]byte{"zstd": 1, "contig": 3, "str": 4} {
			d, err := f.OpenDataset(ctx, name, nil)
			require.NoError(t, err)
			n := d.Type().Size()
			for _, x := range d.Shape() {
				n *= int(x)
			}
			got := make([]byte, n)
			require.NoError(t, d.Read(ctx, All(d.Shape()), got), name)
			assert.Equal(t, v4Data(n, seed), got, name)
			d.Close(ctx)
		}
		sp, err := f.OpenDataset(ctx, "sparse", nil)
		require.NoError(t, err)
		got = make([]byte, 600)
		require.NoError(t, sp.Read(ctx, Box([]uint64{3, 5}, []uint64{20, 30}), got))
		assert.Equal(t, v4Data(600, 2), got)
		sp.Close(ctx)

		title, err := f.Attr("title")
		require.NoError(t, err)
		s, err := title.Str()
		require.NoError(t, err)
		assert.Equal(t, "v5 fixture", s)
		names, err := f.Attr("names")
		require.NoError(t, err)
		ss, err := names.Strings()
		require.NoError(t, err)
		assert.Equal(t, []string{"ab", "cde"}, ss)
		w, err := f.Attr("weights")
		require.NoError(t, err)
		ws, err := Array[float64](w)
		require.NoError(t, err)
		assert.Equal(t, []float64{0.5, 1.5}, ws)
	}
	ro := tOpenPath(t, path, &Options{ReadOnly: true})
	verify(ro)
	require.NoError(t, ro.Close(ctx))

	f := tOpenPath(t, path, nil)
	require.NoError(t, f.SetAttr(ctx, "touched", ScalarAttr(true)))
	require.NoError(t, f.Close(ctx))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, format.Version, max(b[format.SlotA+4], b[format.SlotB+4]))
	ro = tOpenPath(t, path, &Options{ReadOnly: true})
	verify(ro)
}
