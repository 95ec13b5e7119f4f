package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/format"
	"github.com/scc-dev/scc/vfd"
)

func TestAttrRoundTripAllKinds(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset("d", DatasetSpec{Type: Uint16, Shape: []uint64{4}, Chunk: []uint64{2}})
	must(t, err)
	vals := map[string]AttrValue{
		"i8": ScalarAttr(int8(-5)), "i16": ScalarAttr(int16(-300)), "i32": ScalarAttr(int32(-70000)),
		"i64": ScalarAttr(int64(math.MinInt64)), "u8": ScalarAttr(uint8(255)), "u16": ScalarAttr(uint16(65535)),
		"u32": ScalarAttr(uint32(1 << 31)), "u64": ScalarAttr(uint64(math.MaxUint64)),
		"f32": ScalarAttr(float32(1.5)), "f64": ScalarAttr(math.Inf(-1)),
		"arr": ArrayAttr([]float64{1, 2.5, math.NaN()}), "empty": ArrayAttr([]int32{}),
		"s": StringAttr("héllo"), "es": StringAttr(""), "b": BytesAttr([]byte{0, 1, 255}),
	}
	for n, v := range vals {
		must(t, f.SetAttr(ctx, n, v))
		must(t, ds.SetAttr(ctx, "ds."+n, v))
	}
	must(t, f.Close())

	f2 := tOpen(t, mem, &Options{ReadOnly: true})
	ds2, err := f2.OpenDataset("d")
	must(t, err)
	if got := len(f2.Attrs()); got != len(vals) {
		t.Fatalf("file has %d attributes, want %d", got, len(vals))
	}
	for n, v := range vals {
		got, err := f2.Attr(n)
		must(t, err)
		if !got.Equal(v) {
			t.Errorf("file attr %s: got %v, want %v", n, got, v)
		}
		got, err = ds2.Attr("ds." + n)
		must(t, err)
		if !got.Equal(v) {
			t.Errorf("dataset attr %s: got %v, want %v", n, got, v)
		}
	}
	if v, err := Scalar[uint64](mustAttr(t, f2, "u64")); err != nil || v != math.MaxUint64 {
		t.Fatalf("Scalar[uint64] = %v, %v", v, err)
	}
	if v, err := Array[float64](mustAttr(t, f2, "arr")); err != nil || len(v) != 3 || v[1] != 2.5 || !math.IsNaN(v[2]) {
		t.Fatalf("Array[float64] = %v, %v", v, err)
	}
	if s, err := mustAttr(t, f2, "s").Str(); err != nil || s != "héllo" {
		t.Fatalf("Str = %q, %v", s, err)
	}
	// Wrong types on Get are typed errors.
	for _, err := range []error{
		func() error { _, err := Scalar[int32](mustAttr(t, f2, "u64")); return err }(),
		func() error { _, err := Array[int8](mustAttr(t, f2, "s")); return err }(),
		func() error { _, err := mustAttr(t, f2, "b").Str(); return err }(),
		func() error { _, err := mustAttr(t, f2, "s").ByteString(); return err }(),
		func() error { _, err := mustAttr(t, f2, "s").Float64s(); return err }(),
	} {
		if !errors.Is(err, ErrAttrType) || !errors.Is(err, ErrInvalid) {
			t.Errorf("wrong-type get: %v, want ErrAttrType", err)
		}
	}
	if _, err := f2.Attr("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing attr: %v", err)
	}
	if err := f2.SetAttr(ctx, "x", StringAttr("y")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("set on read-only file: %v", err)
	}
	if err := ds2.SetAttr(ctx, "x", StringAttr("y")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("set on read-only dataset: %v", err)
	}
}

func mustAttr(t *testing.T, f *File, name string) AttrValue {
	t.Helper()
	v, err := f.Attr(name)
	must(t, err)
	return v
}

func TestAttrBadInput(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset("d", DatasetSpec{Type: Int8, Shape: []uint64{1}, Chunk: []uint64{1}})
	must(t, err)
	big := make([]byte, MaxAttrValueBytes+1)
	cases := []struct {
		name string
		v    AttrValue
	}{
		{"", StringAttr("x")},
		{strings.Repeat("n", MaxAttrNameBytes+1), StringAttr("x")},
		{"bad\xff", StringAttr("x")},
		{"nul\x00", StringAttr("x")},
		{"zero", AttrValue{}},
		{"huge", BytesAttr(big)},
		{"hugearr", ArrayAttr(make([]float64, MaxAttrValueBytes/8+1))},
		{"badutf8", StringAttr("\xff")},
		{"rawbad", RawAttr(AttrScalar, Int32, []byte{1, 2})},
		{"rawtype", RawAttr(AttrArray, Type(99), []byte{1})},
	}
	for _, c := range cases {
		for _, set := range []func() error{
			func() error { return f.SetAttr(ctx, c.name, c.v) },
			func() error { return ds.SetAttr(ctx, c.name, c.v) },
		} {
			if err := set(); !errors.Is(err, ErrInvalid) {
				t.Errorf("set %q: %v, want ErrInvalid", c.name, err)
			}
		}
	}
	if len(f.Attrs()) != 0 || len(ds.Attrs()) != 0 {
		t.Fatal("a refused Set changed the attributes")
	}
	// The whole set is bounded by one part: many values under the
	// per-value limit fail once the sum passes it, leaving the set as it was.
	val := BytesAttr(make([]byte, MaxAttrValueBytes))
	var i int
	for i = 0; ; i++ {
		err := f.SetAttr(ctx, fmt.Sprintf("a%03d", i), val)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("set %d: %v", i, err)
			}
			break
		}
	}
	if n := len(f.Attrs()); n != i || len(f.attrs.load().enc) > format.MaxPartBytes {
		t.Fatalf("%d attributes after the refusal, want %d", n, i)
	}
	if err := f.DeleteAttr(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := ds.SetAttr(cctx, "x", StringAttr("y")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled set: %v", err)
	}
}

// TestAttrSurvivesHeaderRewrites: a dataset's attributes are carried by
// every header the engine writes (data writes, extent changes), and a
// change of attributes alone is committed.
func TestAttrSurvivesHeaderRewrites(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset("d", DatasetSpec{Type: Int32, Shape: []uint64{4}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{2}})
	must(t, err)
	must(t, ds.SetAttr(ctx, "units", StringAttr("m")))
	must(t, f.Flush(ctx))
	must(t, WriteSlice(ctx, ds, Box([]uint64{0}, []uint64{4}), []int32{1, 2, 3, 4}))
	must(t, ds.SetExtent(ctx, []uint64{10}))
	must(t, f.Flush(ctx))
	gen := f.Generation()
	must(t, ds.SetAttr(ctx, "scale", ScalarAttr(2.5)))
	must(t, f.Flush(ctx))
	if f.Generation() == gen {
		t.Fatal("an attribute change alone did not commit")
	}
	must(t, ds.DeleteAttr(ctx, "units"))
	must(t, f.Close())
	f2 := tOpen(t, mem, nil)
	ds2, err := f2.OpenDataset("d")
	must(t, err)
	attrs := ds2.Attrs()
	if len(attrs) != 1 || attrs[0].Name != "scale" {
		t.Fatalf("attributes after reopen: %v", attrs)
	}
	if got := ds2.Shape(); got[0] != 10 {
		t.Fatalf("shape %v", got)
	}
}

// TestAttrConcurrent: many goroutines set, delete and read attributes of a
// file and a dataset while data is written and the file commits; each
// goroutine owns its names, so the final state is known (a reference
// model), and it must survive a reopen.
func TestAttrConcurrent(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset("d", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{8}})
	must(t, err)
	const workers, ops = 8, 200
	want := make([]map[string]AttrValue, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		want[w] = map[string]AttrValue{}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < ops; i++ {
				name := fmt.Sprintf("w%d.%d", w, rng.IntN(6))
				onFile := rng.IntN(2) == 0
				key := fmt.Sprint(onFile, name)
				switch rng.IntN(5) {
				case 0:
					var err error
					if onFile {
						err = f.DeleteAttr(ctx, name)
					} else {
						err = ds.DeleteAttr(ctx, name)
					}
					_, had := want[w][key]
					if had && err != nil || !had && !errors.Is(err, ErrNotFound) {
						t.Errorf("delete %s: %v (had %v)", key, err, had)
					}
					delete(want[w], key)
				case 1:
					if err := f.Flush(ctx); err != nil {
						t.Error(err)
					}
				case 2:
					if err := ds.Write(ctx, Box([]uint64{uint64(rng.IntN(60))}, []uint64{4}), []byte{1, 2, 3, byte(i)}); err != nil {
						t.Error(err)
					}
				default:
					v := ArrayAttr([]int64{int64(w), int64(i)})
					var err error
					if onFile {
						err = f.SetAttr(ctx, name, v)
					} else {
						err = ds.SetAttr(ctx, name, v)
					}
					if err != nil {
						t.Error(err)
					}
					want[w][key] = v
				}
				// Reads see this goroutine's latest value.
				var got AttrValue
				var gerr error
				if onFile {
					got, gerr = f.Attr(name)
				} else {
					got, gerr = ds.Attr(name)
				}
				if v, ok := want[w][key]; ok && (gerr != nil || !got.Equal(v)) || !ok && !errors.Is(gerr, ErrNotFound) {
					t.Errorf("get %s: %v %v", key, got, gerr)
				}
			}
		}(w)
	}
	wg.Wait()
	must(t, f.Close())
	f2 := tOpen(t, mem, nil)
	ds2, err := f2.OpenDataset("d")
	must(t, err)
	total := 0
	for w := range want {
		for key, v := range want[w] {
			var onFile bool
			var name string
			fmt.Sscan(key, &onFile, &name)
			var got AttrValue
			var err error
			if onFile {
				got, err = f2.Attr(name)
			} else {
				got, err = ds2.Attr(name)
			}
			if err != nil || !got.Equal(v) {
				t.Errorf("after reopen %s: %v %v, want %v", key, got, err, v)
			}
			total++
		}
	}
	if n := len(f2.Attrs()) + len(ds2.Attrs()); n != total {
		t.Fatalf("%d attributes after reopen, want %d", n, total)
	}
}

// attrWorkload is crashWorkload's shape with attribute changes between
// the commits: each generation's expected attributes are recorded.
func attrWorkload(drv vfd.Driver, states map[uint64]string) (lastAck uint64, err error) {
	ctx := context.Background()
	states[1] = ""
	f, err := CreateWith(drv, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
	if err != nil {
		return 0, err
	}
	lastAck = 1
	defer func() {
		if cerr := f.Close(); err == nil {
			if cerr == nil {
				lastAck = f.Generation()
			}
			err = cerr
		}
	}()
	ds, err := f.CreateDataset("d", DatasetSpec{Type: Int16, Shape: []uint64{8}, Chunk: []uint64{4}, Filters: []Filter{Zstd(1)}})
	if err != nil {
		return lastAck, err
	}
	for step := 0; step < 4; step++ {
		if err := f.SetAttr(ctx, "step", ScalarAttr(int32(step))); err != nil {
			return lastAck, err
		}
		if err := ds.SetAttr(ctx, "tag", StringAttr(strings.Repeat("x", step*50))); err != nil {
			return lastAck, err
		}
		if step == 2 {
			if err := f.DeleteAttr(ctx, "step"); err != nil {
				return lastAck, err
			}
		}
		if err := WriteSlice(ctx, ds, Box([]uint64{uint64(step)}, []uint64{1}), []int16{int16(step)}); err != nil {
			return lastAck, err
		}
		states[f.Generation()+1] = describeAttrs(f, ds)
		if step == 3 {
			break // Close commits it
		}
		if err := f.Flush(ctx); err != nil {
			return lastAck, err
		}
		lastAck = f.Generation()
	}
	return lastAck, nil
}

func describeAttrs(f *File, ds *Dataset) string {
	var b strings.Builder
	for _, a := range f.Attrs() {
		fmt.Fprintf(&b, "f:%s=%x/%d;", a.Name, a.Value.data, a.Value.kind)
	}
	if ds != nil {
		for _, a := range ds.Attrs() {
			fmt.Fprintf(&b, "d:%s=%x/%d;", a.Name, a.Value.data, a.Value.kind)
		}
	}
	return b.String()
}

func verifyAttrState(t *testing.T, drv vfd.Driver, lastAck uint64, states map[uint64]string) {
	t.Helper()
	if _, err := Check(context.Background(), drv); err != nil {
		t.Fatalf("check: %v", err)
	}
	f, err := OpenWith(drv, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer f.Close()
	gen := f.Generation()
	want, ok := states[gen]
	if gen < lastAck || !ok {
		t.Fatalf("reopened at generation %d (acknowledged %d, known %v)", gen, lastAck, ok)
	}
	var ds *Dataset
	if len(f.Datasets()) > 0 {
		if ds, err = f.OpenDataset("d"); err != nil {
			t.Fatal(err)
		}
	}
	if got := describeAttrs(f, ds); got != want {
		t.Fatalf("generation %d: attributes %q, want %q", gen, got, want)
	}
}

// TestAttrCrashAndFault: a power cut at every mutating operation, and an
// I/O error from every operation on, leave the attributes of the last
// acknowledged commit (or a later attempted one), never a mix.
func TestAttrCrashAndFault(t *testing.T) {
	defer verifyNoLeaks(t)
	probe := &cutDriver{Driver: vfd.NewCrash()}
	probe.left.Store(1 << 40)
	if _, err := attrWorkload(probe, map[uint64]string{}); err != nil {
		t.Fatal(err)
	}
	total := int(probe.used.Load())
	for k := 0; k <= total; k++ {
		crash := vfd.NewCrash()
		drv := &cutDriver{Driver: crash}
		drv.left.Store(int64(k))
		states := map[uint64]string{}
		lastAck, _ := attrWorkload(drv, states)
		if lastAck == 0 {
			continue
		}
		for _, mode := range []vfd.CrashMode{vfd.KeepSynced, vfd.RandomUnsynced} {
			verifyAttrState(t, vfd.NewMemFrom(crash.CrashImage(mode, uint64(k))), lastAck, states)
		}
	}
	fprobe := vfd.NewFault(vfd.NewMem())
	if _, err := attrWorkload(fprobe, map[uint64]string{}); err != nil {
		t.Fatal(err)
	}
	ops := fprobe.Ops().Total()
	for k := int64(0); k < ops; k++ {
		mem := vfd.NewMem()
		fd := vfd.NewFault(mem, vfd.Fail(vfd.From(vfd.OpAny, k)))
		states := map[uint64]string{}
		lastAck, err := attrWorkload(fd, states)
		if fd.Injected() > 0 && err == nil {
			t.Fatalf("fault at op %d: injected errors did not reach the caller", k)
		}
		if lastAck == 0 {
			continue
		}
		fd.SetEnabled(false)
		verifyAttrState(t, mem, lastAck, states)
	}
	t.Logf("%d crash points, %d fault points", total+1, ops)
}

// TestAttrDecodeErrors: attribute parts that do not decode are ErrCorrupt,
// never a panic.
func TestAttrDecodeErrors(t *testing.T) {
	good := encodeAttrs([]Attr{{"a", StringAttr("x")}, {"b", ScalarAttr(int16(3))}})
	if s, err := decodeAttrs(good); err != nil || len(s.attrs) != 2 {
		t.Fatalf("decode good: %v", err)
	}
	bad := [][]byte{
		{2, 1, 0, 0, 0},                      // version
		{1, 0, 0, 0, 0},                      // zero count
		{1, 0xff, 0xff, 0xff, 0xff, 1, 2},    // count beyond the bytes
		good[:len(good)-1],                   // truncated
		append(append([]byte{}, good...), 0), // trailing byte
		encodeAttrs([]Attr{{"b", StringAttr("x")}, {"a", StringAttr("y")}}), // order
		encodeAttrs([]Attr{{"a", RawAttr(AttrScalar, Int32, []byte{1})}}),   // size
		encodeAttrs([]Attr{{"a", StringAttr("\xff")}}),                      // utf-8
	}
	for i, b := range bad {
		if _, err := decodeAttrs(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("case %d: %v, want ErrCorrupt", i, err)
		}
	}
}

// FuzzDecodeAttrs: the attribute decoder never panics, is bounded by its
// input, and whatever it accepts re-encodes to the same bytes (canonical).
func FuzzDecodeAttrs(f *testing.F) {
	f.Add(encodeAttrs([]Attr{{"a", StringAttr("x")}, {"b", ScalarAttr(int16(3))}, {"c", ArrayAttr([]float64{1, 2})}, {"d", BytesAttr([]byte{9})}}))
	f.Add([]byte{1, 1, 0, 0, 0, 1, 0, 'a', 3, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeAttrs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if enc := encodeAttrs(s.attrs); string(enc) != string(b) {
			t.Fatalf("not canonical: %x re-encodes to %x", b, enc)
		}
		for _, a := range s.attrs {
			if err := a.Value.validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
