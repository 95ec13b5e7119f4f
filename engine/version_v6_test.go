package engine

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/internal/format"
)

// TestReadsVersion6File: testdata/v6.scc was written by scc at format
// version 6 (the program in testdata/v6.scc.go.txt), before shaped and
// null attributes. Its data and attributes read as written, the file
// checks, and a commit that adds a shaped and a null attribute moves the
// superblock to version 7 while the dataset's untouched attribute set keeps
// its version-4 encoding.
func TestReadsVersion6File(t *testing.T) {
	ctx := t.Context()
	path := oldVersionFixture(t, 6)

	verify := func(f *File) {
		t.Helper()
		d, err := f.OpenDataset(ctx, "grid", nil)
		require.NoError(t, err)
		defer d.Close(ctx)
		got := make([]byte, 8*8*2)
		require.NoError(t, d.Read(ctx, All(d.Shape()), got))
		for i := range 4 * 8 * 2 {
			require.Equal(t, byte(i*3), got[i], "byte %d", i)
		}
		for i := 4 * 8 * 2; i < len(got); i += 2 {
			require.Equal(t, []byte{7, 0}, got[i:i+2], "fill at %d", i/2)
		}
		attrs, err := d.Attrs()
		require.NoError(t, err)
		strs := map[string]string{}
		for _, a := range attrs {
			strs[a.Name] = a.Value.String()
		}
		assert.Equal(t, map[string]string{"blob": `b""`, "color": "blue", "range": "[-1 2.5]", "seed": "6", "units": "m"}, strs)
		title, err := f.Attr("title")
		require.NoError(t, err)
		assert.Equal(t, "v6", title.String())
		assert.EqualValues(t, attrVersionV4, d.s.attrs.load().encoding()[0])
	}
	f, err := Open(ctx, path, nil)
	require.NoError(t, err)
	verify(f)
	m, err := ArrayAttr([]uint8{1, 2, 3, 4}).WithShape(2, 2)
	require.NoError(t, err)
	require.NoError(t, f.SetAttr(ctx, "m", m))
	require.NoError(t, f.SetAttr(ctx, "none", NullAttr(Float32)))
	require.NoError(t, f.Close(ctx))

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, format.Version, max(b[format.SlotA+4], b[format.SlotB+4]))
	assert.GreaterOrEqual(t, int(format.Version), 7)
	_, err = Check(ctx, path, nil)
	require.NoError(t, err)
	f, err = Open(ctx, path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	verify(f)
	got, err := f.Attr("m")
	require.NoError(t, err)
	assert.True(t, got.Equal(m))
	got, err = f.Attr("none")
	require.NoError(t, err)
	assert.Equal(t, AttrNull, got.Kind())
	assert.EqualValues(t, attrVersion, f.attrs.load().encoding()[0])
}
