package engine

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// The API's conventions: paths, the File as its root Group, Append,
// Follow, attribute values.

func TestGroupPaths(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	raw, err := f.CreateGroup(ctx, "run/raw")
	require.NoError(t, err)
	assert.Equal(t, "/run/raw", raw.Path())
	assert.Equal(t, "raw", raw.Name())
	assert.Equal(t, "/", f.Path())
	assert.Equal(t, "/", f.Name())

	// Relative to the group, or from the root with a leading '/'.
	ds, err := raw.CreateDataset(ctx, "frames", smallSpec)
	require.NoError(t, err)
	assert.Equal(t, "/run/raw/frames", ds.Path())
	assert.Equal(t, "frames", ds.Name())
	abs, err := raw.CreateDataset(ctx, "/top", smallSpec)
	require.NoError(t, err)
	assert.Equal(t, "/top", abs.Path())
	for _, p := range []string{"frames", "/run/raw/frames"} {
		d, err := raw.OpenDataset(ctx, p, nil)
		require.NoError(t, err, p)
		assert.Equal(t, "/run/raw/frames", d.Path())
	}
	d, err := f.OpenDataset(ctx, "run/raw/frames", nil)
	require.NoError(t, err)
	assert.Equal(t, ds.Path(), d.Path())

	var got []Member
	for m, err := range f.Members() {
		require.NoError(t, err)
		got = append(got, m)
	}
	assert.Equal(t, []Member{{Name: "run", Path: "/run", Kind: MemberGroup}, {Name: "top", Path: "/top", Kind: MemberDataset}}, got)

	// Move and Delete resolve inside the group too; handles follow.
	run, err := f.OpenGroup(ctx, "run")
	require.NoError(t, err)
	require.NoError(t, run.Move(ctx, "raw", "cooked"))
	assert.Equal(t, "/run/cooked/frames", ds.Path())
	assert.Equal(t, "/run/cooked", raw.Path())
	err = run.Delete(ctx, "cooked", nil)
	assert.ErrorIs(t, err, ErrInvalid, "a group that is not empty needs Recursive")
	require.NoError(t, run.Delete(ctx, "cooked", &DeleteOptions{Recursive: true}))
	_, err = ds.Attrs()
	assert.ErrorIs(t, err, ErrDeleted)
	_, err = raw.Attrs()
	assert.ErrorIs(t, err, ErrDeleted)
	require.NoError(t, run.Delete(ctx, "/top", nil))
	_, err = f.OpenDataset(ctx, "top", nil)
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestOpenCreateWays(t *testing.T) {
	ctx := context.Background()
	// A driver through the options: the path only names the file.
	mem := vfd.NewMem()
	f, err := Create(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	_, err = f.CreateDataset(ctx, "d", smallSpec)
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
	require.NoError(t, err)
	_, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	rep, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Datasets)
	_, err = mem.Size()
	require.NoError(t, err, "the driver stays the caller's: Close does not close it")

	// A local path.
	path := filepath.Join(t.TempDir(), "a.scc")
	f, err = Create(ctx, path, nil)
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	rep, err = Check(ctx, path, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Datasets)
	_, err = Open(ctx, filepath.Join(t.TempDir(), "none.scc"), nil)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = Check(ctx, filepath.Join(t.TempDir(), "none.scc"), nil)
	assert.ErrorIs(t, err, ErrNotFound)

	// A context that ended refuses before anything is made.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Create(cctx, "", &Options{Driver: vfd.NewMem()})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = Open(cctx, "", &Options{Driver: mem})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestAppend(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	spec := DatasetSpec{Type: Uint32, Shape: []uint64{0, 3}, MaxShape: []uint64{Unlimited, 3}, Chunk: []uint64{4, 3}}
	ds, err := f.CreateDataset(ctx, "frames", spec)
	require.NoError(t, err)

	// Many goroutines append rows of their own number; every row lands
	// whole, each at its own place.
	const writers, each = 8, 25
	var wg sync.WaitGroup
	firsts := make([][]uint64, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				first, err := AppendSlice(ctx, ds, []uint32{uint32(w), uint32(w), uint32(w)})
				if !assert.NoError(t, err) {
					return
				}
				firsts[w] = append(firsts[w], first)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, []uint64{writers * each, 3}, ds.Shape())
	all := make([]uint32, writers*each*3)
	require.NoError(t, ReadSlice(ctx, ds, All(ds.Shape()), all))
	seen := map[uint64]bool{}
	for w, fs := range firsts {
		for _, row := range fs {
			require.False(t, seen[row], "row %d appended twice", row)
			seen[row] = true
			assert.Equal(t, []uint32{uint32(w), uint32(w), uint32(w)}, all[row*3:row*3+3], "row %d", row)
		}
	}

	// Bad input changes nothing.
	_, err = ds.Append(ctx, make([]byte, 5))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = AppendSlice(ctx, ds, []float64{1, 2, 3})
	assert.ErrorIs(t, err, ErrInvalid)
	fixed, err := f.CreateDataset(ctx, "fixed", smallSpec)
	require.NoError(t, err)
	_, err = fixed.Append(ctx, make([]byte, 1))
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, []uint64{writers * each, 3}, ds.Shape())

	// A call whose context ended leaves the extent as it was.
	require.NoError(t, f.Close(ctx))
	rw := vfd.NewMem()
	f2 := tCreate(t, rw, nil)
	ds2, err := f2.CreateDataset(ctx, "frames", spec)
	require.NoError(t, err)
	_, err = AppendSlice(ctx, ds2, []uint32{1, 2, 3})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = AppendSlice(cctx, ds2, []uint32{4, 5, 6})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []uint64{1, 3}, ds2.Shape())
}

func TestFollow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.scc")
	w := tCreatePath(t, path, &Options{NoSync: true})
	spec := DatasetSpec{Type: Uint32, Shape: []uint64{0}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{4}}
	ds, err := w.CreateDataset(ctx, "frames", spec)
	require.NoError(t, err)
	require.NoError(t, w.Flush(ctx))

	r := tOpenPath(t, path, &Options{ReadOnly: true})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type seen struct {
		gen    uint64
		frames uint64
	}
	got := make(chan seen, 100)
	done := make(chan error, 1)
	go func() {
		var rds *Dataset
		for gen, err := range r.Follow(rctx) {
			if err != nil {
				done <- err
				return
			}
			if rds == nil {
				if rds, err = r.OpenDataset(rctx, "frames", nil); err != nil {
					done <- err
					return
				}
			}
			got <- seen{gen, rds.Shape()[0]}
		}
		done <- nil
	}()
	// Each Flush is seen: its generation, and the frames it made durable.
	for i := range 5 {
		_, err := AppendSlice(ctx, ds, []uint32{uint32(i)})
		require.NoError(t, err)
		require.NoError(t, w.Flush(ctx))
		select {
		case s := <-got:
			assert.Equal(t, w.Generation(), s.gen)
			assert.Equal(t, uint64(i+1), s.frames)
		case err := <-done:
			t.Fatalf("Follow ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("commit %d not seen", i)
		}
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	// Closing the file ends a Follow with ErrClosed.
	end := make(chan error, 1)
	go func() {
		for _, err := range r.Follow(ctx) {
			if err != nil {
				end <- err
				return
			}
		}
	}()
	require.NoError(t, r.Close(ctx))
	select {
	case err := <-end:
		assert.ErrorIs(t, err, ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not end at Close")
	}
}

func TestAttrValueString(t *testing.T) {
	fs, err := FixedStringsAttr(FixedString(4, NullPad, ASCII), "ab", "cd")
	require.NoError(t, err)
	one := RawAttr(AttrScalar, FixedString(4, NullPad, ASCII), []byte("xy\x00\x00"))
	cases := []struct {
		v     AttrValue
		str   string
		value any
	}{
		{StringAttr("meters"), "meters", "meters"},
		{BytesAttr([]byte{0, 'a'}), `b"\x00a"`, []byte{0, 'a'}},
		{ScalarAttr(int32(-3)), "-3", int32(-3)},
		{ScalarAttr(2.5), "2.5", 2.5},
		{ScalarAttr(float32(0.1)), "0.1", float32(0.1)},
		{ScalarAttr(true), "true", true},
		{ArrayAttr([]uint16{1, 2, 3}), "[1 2 3]", []uint16{1, 2, 3}},
		{ArrayAttr([]float32{0.1, 2}), "[0.1 2]", []float32{0.1, 2}},
		{ArrayAttr([]int64{}), "[]", []int64{}},
		{ScalarAttr(complex(1, 2)), "(1+2i)", complex(1, 2)},
		{fs, `["ab" "cd"]`, []string{"ab", "cd"}},
		{one, "xy", "xy"},
	}
	color := Enum(Uint8, EnumMember{Name: "RED", Value: 0}, EnumMember{Name: "GREEN", Value: 1})
	point := Compound(12, Field{Name: "x", Offset: 0, Type: Float32}, Field{Name: "n", Offset: 4, Type: Int64})
	pt := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	pt = binary.LittleEndian.AppendUint64(pt, 7)
	cases = append(cases, []struct {
		v     AttrValue
		str   string
		value any
	}{
		{RawAttr(AttrScalar, Float16, binary.LittleEndian.AppendUint16(nil, Float16Bits(0.5))), "0.5", float32(0.5)},
		{RawAttr(AttrArray, BFloat16, binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, BFloat16Bits(2)), BFloat16Bits(-1))), "[2 -1]", []any{float32(2), float32(-1)}},
		{RawAttr(AttrScalar, color, []byte{1}), "GREEN", uint8(1)},
		{RawAttr(AttrArray, color, []byte{0, 1, 9}), "[RED GREEN 9]", []any{uint8(0), uint8(1), uint8(9)}},
		{RawAttr(AttrScalar, point, pt), "map[n:7 x:1.5]", map[string]any{"x": float32(1.5), "n": int64(7)}},
		{RawAttr(AttrScalar, Opaque(2, "tag"), []byte{1, 2}), "[1 2]", []byte{1, 2}},
		{RawAttr(AttrScalar, ArrayOf(Int16, 2), []byte{1, 0, 2, 0}), "[1 2]", []any{int16(1), int16(2)}},
	}...)
	for _, c := range cases {
		assert.Equal(t, c.str, c.v.String())
		assert.Equal(t, c.value, c.v.Value(), c.str)
	}
	// A raw value of an element type the engine does not know prints its
	// shape, not garbage.
	raw := RawAttr(AttrScalar, Type(200), binary.LittleEndian.AppendUint32(nil, 7))
	assert.Nil(t, raw.Value())
	assert.Contains(t, raw.String(), "AttrValue(")
}

// A Close whose write-back fails (here: its context ended) returns the
// error and keeps the dirty chunks for the next Flush; the next handle
// takes the dataset's cache registration over.
func TestDatasetCloseCancelled(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{8}})
	require.NoError(t, err)
	want := make([]byte, 64)
	for i := range want {
		want[i] = byte(i + 1)
	}
	require.NoError(t, ds.Write(ctx, All(ds.Shape()), want))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, ds.Close(cctx), context.Canceled)

	again, err := f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err, "the next handle takes the kept registration over")
	got := make([]byte, 64)
	require.NoError(t, again.Read(ctx, All(again.Shape()), got))
	assert.Equal(t, want, got)
	require.NoError(t, again.Close(ctx))
	require.NoError(t, f.Close(ctx))

	r := tOpen(t, drv, &Options{ReadOnly: true})
	rds, err := r.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	require.NoError(t, rds.Read(ctx, All(rds.Shape()), got))
	assert.Equal(t, want, got, "the dirty chunks reached the file")
}
