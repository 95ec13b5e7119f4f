package tree

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

func TestGroupsAndNames(t *testing.T) {
	ctx := context.Background()
	f, err := engine.Create(ctx, "", &engine.Options{Driver: vfd.NewMem()})
	require.NoError(t, err)
	defer f.Close(ctx)
	spec := engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{2}}
	for _, p := range []string{"a/b/x", "a/c/y", "d/z", "top"} {
		_, err := f.CreateDataset(ctx, p, spec)
		require.NoError(t, err)
	}
	names, err := DatasetNames(f)
	require.NoError(t, err)
	assert.Equal(t, []string{"a/b/x", "a/c/y", "d/z", "top"}, names)

	var seen []string
	require.NoError(t, Groups(ctx, f.Group, func(g *engine.Group, p string) (bool, error) {
		assert.Equal(t, "/"+p, g.Path())
		seen = append(seen, p)
		return p != "a/b", nil
	}))
	assert.Equal(t, []string{"a", "a/b", "a/c", "d"}, seen)

	// Leaving a group out leaves out the groups inside it.
	require.NoError(t, f.Delete(ctx, "a/c", &engine.DeleteOptions{Recursive: true}))
	_, err = f.CreateGroup(ctx, "a/b/deep/deeper")
	require.NoError(t, err)
	seen = nil
	require.NoError(t, Groups(ctx, f.Group, func(g *engine.Group, p string) (bool, error) {
		seen = append(seen, p)
		return p != "a/b", nil
	}))
	assert.Equal(t, []string{"a", "a/b", "d"}, seen)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, Groups(cctx, f.Group, func(*engine.Group, string) (bool, error) { return true, nil }), context.Canceled)
}
