package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

func TestAttrRoundTripAllKinds(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: []uint64{4}, Chunk: []uint64{2}})
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
	must(t, f.Close(ctx))

	f2 := tOpen(t, mem, &Options{ReadOnly: true})
	ds2, err := f2.OpenDataset(ctx, "d", nil)
	must(t, err)
	if got := len(attrsOf(t, f2)); got != len(vals) {
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
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Int8, Shape: []uint64{1}, Chunk: []uint64{1}})
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
	if len(attrsOf(t, f)) != 0 || len(attrsOf(t, ds)) != 0 {
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
	if n := len(attrsOf(t, f)); n != i || len(f.attrs.load().encoding()) > format.MaxPartBytes {
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
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Int32, Shape: []uint64{4}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{2}})
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
	must(t, f.Close(ctx))
	f2 := tOpen(t, mem, nil)
	ds2, err := f2.OpenDataset(ctx, "d", nil)
	must(t, err)
	attrs := attrsOf(t, ds2)
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
	for _, prefill := range []int{0, 1500} {
		t.Run(fmt.Sprint("prefill=", prefill), func(t *testing.T) { testAttrConcurrent(t, prefill) })
	}
}

// testAttrConcurrent runs TestAttrConcurrent's schedule on a file and a
// dataset that already hold prefill attributes each (deep trees, whose
// changes rebalance).
func testAttrConcurrent(t *testing.T, prefill int) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{8}})
	must(t, err)
	for i := 0; i < prefill; i++ {
		must(t, f.SetAttr(ctx, fmt.Sprintf("p%05d", i), ScalarAttr(int32(i))))
		must(t, ds.SetAttr(ctx, fmt.Sprintf("p%05d", i), ScalarAttr(int32(-i))))
	}
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
				// A listing is one consistent set: sorted, and holding
				// exactly this goroutine's names as it last left them.
				if rng.IntN(4) == 0 {
					var list []Attr
					if onFile {
						list = attrsOf(t, f)
					} else {
						list = attrsOf(t, ds)
					}
					mine, prefix := 0, fmt.Sprintf("w%d.", w)
					for j, a := range list {
						if j > 0 && list[j-1].Name >= a.Name {
							t.Errorf("listing not sorted: %q then %q", list[j-1].Name, a.Name)
						}
						if !strings.HasPrefix(a.Name, prefix) {
							continue
						}
						mine++
						if v, ok := want[w][fmt.Sprint(onFile, a.Name)]; !ok || !a.Value.Equal(v) {
							t.Errorf("listing has %s = %v, want %v (%v)", a.Name, a.Value, v, ok)
						}
					}
					n := 0
					for k := range want[w] {
						if strings.HasPrefix(k, fmt.Sprint(onFile)+"w") { // keys are fmt.Sprint(onFile, name)
							n++
						}
					}
					if mine != n {
						t.Errorf("listing has %d of this goroutine's attributes, want %d", mine, n)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	must(t, f.Close(ctx))
	f2 := tOpen(t, mem, nil)
	ds2, err := f2.OpenDataset(ctx, "d", nil)
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
	for i := 0; i < prefill; i += 7 {
		fv, ferr := f2.Attr(fmt.Sprintf("p%05d", i))
		dv, derr := ds2.Attr(fmt.Sprintf("p%05d", i))
		if ferr != nil || derr != nil || !fv.Equal(ScalarAttr(int32(i))) || !dv.Equal(ScalarAttr(int32(-i))) {
			t.Fatalf("after reopen p%05d: %v %v, %v %v", i, fv, ferr, dv, derr)
		}
	}
	if n := len(attrsOf(t, f2)) + len(attrsOf(t, ds2)); n != total+2*prefill {
		t.Fatalf("%d attributes after reopen, want %d", n, total)
	}
}

// attrWorkload is crashWorkload's shape with attribute changes between
// the commits: each generation's expected attributes are recorded.
func attrWorkload(drv vfd.Driver, states map[uint64]string) (lastAck uint64, err error) {
	ctx := context.Background()
	states[1] = ""
	f, err := Create(ctx, "", &Options{Driver: drv, CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
	if err != nil {
		return 0, err
	}
	lastAck = 1
	defer func() {
		if cerr := f.Close(ctx); err == nil {
			if cerr == nil {
				lastAck = f.Generation()
			}
			err = cerr
		}
	}()
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Int16, Shape: []uint64{8}, Chunk: []uint64{4}, Filters: []Filter{Zstd(1)}})
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
	for _, a := range f.attrs.list() {
		fmt.Fprintf(&b, "f:%s=%x/%d;", a.Name, a.Value.data, a.Value.kind)
	}
	if ds != nil {
		for _, a := range ds.s.attrs.list() {
			fmt.Fprintf(&b, "d:%s=%x/%d;", a.Name, a.Value.data, a.Value.kind)
		}
	}
	return b.String()
}

func verifyAttrState(t *testing.T, drv vfd.Driver, lastAck uint64, states map[uint64]string) {
	t.Helper()
	if _, err := Check(context.Background(), "", &Options{Driver: drv}); err != nil {
		t.Fatalf("check: %v", err)
	}
	f, err := Open(context.Background(), "", &Options{Driver: drv, ReadOnly: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer f.Close(context.Background())
	gen := f.Generation()
	want, ok := states[gen]
	if gen < lastAck || !ok {
		t.Fatalf("reopened at generation %d (acknowledged %d, known %v)", gen, lastAck, ok)
	}
	var ds *Dataset
	if len(f.datasetNames()) > 0 {
		if ds, err = f.OpenDataset(context.Background(), "d", nil); err != nil {
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
	if s, err := decodeAttrs(good); err != nil || len(s.list()) != 2 {
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
	f.Add(encodeAttrs([]Attr{{"b", ArrayAttr([]bool{true, false})}, {"c", ScalarAttr(complex64(1 + 1i))}, {"z", ArrayAttr([]complex128{-2i})}}))
	fs, _ := FixedStringsAttr(FixedString(4, SpacePad, UTF8), "ab", "é")
	f.Add(encodeAttrs([]Attr{{"n", ScalarAttr(int8(1))}, {"s", fs}}))
	f.Add(encodeAttrs([]Attr{{"c", RawAttr(AttrArray, tRecord, make([]byte, 2*tRecord.Size()))}, {"h", RawAttr(AttrScalar, Float16, []byte{0, 0x3c})},
		{"o", RawAttr(AttrScalar, tBlob, []byte("12345"))}}))
	m, _ := ArrayAttr([]int16{1, 2, 3, 4, 5, 6}).WithShape(3, 1, 2)
	e, _ := ArrayAttr([]float32{}).WithShape(0, 4)
	ms, _ := fs.WithShape(1, 2)
	f.Add(encodeAttrs([]Attr{{"e", e}, {"m", m}, {"n", NullAttr(Float64)}, {"s", ms}, {"t", NullAttr(0)}, {"u", NullAttr(tColor)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeAttrs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		// A version-1 encoding re-encodes in the current version,
		// otherwise unchanged.
		want := slices.Clone(b)
		if len(want) > 0 {
			want[0] = attrEncodingVersion(s.list())
		}
		if enc := encodeAttrs(s.list()); string(enc) != string(want) {
			t.Fatalf("not canonical: %x re-encodes to %x", b, enc)
		}
		for _, a := range s.list() {
			if err := a.Value.validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// attrFill returns n attribute names and values that together encode to
// a little under 1 MiB at n = 18,000 (57 bytes each).
func attrFill(n int) ([]string, []AttrValue) {
	names := make([]string, n)
	vals := make([]AttrValue, n)
	for i := range names {
		names[i] = fmt.Sprintf("attr%05d", i)
		vals[i] = StringAttr(fmt.Sprintf("value %033d", i))
	}
	return names, vals
}

// attrSetBytesPerCall sets n attributes on a new file, then reports the
// bytes allocated per call over a mix of SetAttr replacing an attribute,
// SetAttr adding one and DeleteAttr removing it again (the set's size
// stays n).
func attrSetBytesPerCall(t *testing.T, n int) float64 {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	defer f.Close(ctx)
	names, vals := attrFill(n)
	for i := range names {
		must(t, f.SetAttr(ctx, names[i], vals[i]))
	}
	const rounds = 100
	extra := make([]string, rounds)
	for i := range extra {
		extra[i] = fmt.Sprintf("attr%05dx", i*n/rounds)
	}
	// TotalAlloc counts every goroutine's allocations; the least of three
	// windows leaves out what anything else allocated meanwhile.
	least := uint64(math.MaxUint64)
	for try := 0; try < 3; try++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < rounds; i++ {
			j := i * n / rounds
			must(t, f.SetAttr(ctx, names[j], vals[(j+1+try)%n]))
			must(t, f.SetAttr(ctx, extra[i], vals[j]))
			must(t, f.DeleteAttr(ctx, extra[i]))
		}
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if got := len(attrsOf(t, f)); got != n {
		t.Fatalf("%d attributes, want %d", got, n)
	}
	return float64(least) / (3 * rounds)
}

// TestAttrSetWorkIndependentOfSetSize: changing one attribute costs what
// that attribute costs, not what the set costs. The work is counted as
// bytes allocated per call, with 18,000 attributes against the same calls
// with 100: copying the set or encoding it per call (about 1.4 MiB per call
// at 18,000) is hundreds of times the small set's cost; copying the path
// to one attribute grows with its depth only.
func TestAttrSetWorkIndependentOfSetSize(t *testing.T) {
	small := attrSetBytesPerCall(t, 100)
	large := attrSetBytesPerCall(t, 18000)
	t.Logf("bytes allocated per call: %.0f with 100 attributes, %.0f with 18,000", small, large)
	if large > 4*small+1024 {
		t.Fatalf("a change allocates %.0f bytes with 18,000 attributes, %.0f with 100: it copies or encodes the set", large, small)
	}
}

// BenchmarkSetAttrScaling: SetAttr calls per second on a file holding 100
// attributes (the baseline: what one attribute costs) and on one holding
// 18,000 (nearly the 1 MiB bound), timed in alternating blocks of the same
// run, and their cost ratio.
func BenchmarkSetAttrScaling(b *testing.B) {
	ctx := context.Background()
	files := make([]*File, 2)
	names := make([][]string, 2)
	vals := make([][]AttrValue, 2)
	for k, n := range []int{100, 18000} {
		f := tCreate(b, vfd.NewMem(), nil)
		defer f.Close(ctx)
		names[k], vals[k] = attrFill(n)
		for i := range names[k] {
			must(b, f.SetAttr(ctx, names[k][i], vals[k][i]))
		}
		files[k] = f
	}
	var took [2]time.Duration
	b.ResetTimer()
	const block = 256
	for done := 0; done < b.N; done += block {
		m := min(block, b.N-done)
		for k, f := range files {
			n := len(names[k])
			t0 := time.Now()
			for i := done; i < done+m; i++ {
				if err := f.SetAttr(ctx, names[k][i%n], vals[k][(i+1)%n]); err != nil {
					b.Fatal(err)
				}
			}
			took[k] += time.Since(t0)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took[0].Seconds(), "calls/s@100")
	b.ReportMetric(float64(b.N)/took[1].Seconds(), "calls/s@18000")
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "cost18000/cost100")
}

// checkAttrTree checks the AVL shape of a set's tree: heights recorded
// right, balanced, names strictly increasing; it returns the height.
func checkAttrTree(t *testing.T, n *attrNode, lo, hi string) int {
	t.Helper()
	if n == nil {
		return 0
	}
	if lo != "" && n.a.Name <= lo || hi != "" && n.a.Name >= hi {
		t.Fatalf("name %q out of order (between %q and %q)", n.a.Name, lo, hi)
	}
	hl, hr := checkAttrTree(t, n.left, lo, n.a.Name), checkAttrTree(t, n.right, n.a.Name, hi)
	if hl-hr > 1 || hr-hl > 1 || n.height != 1+max(hl, hr) {
		t.Fatalf("node %q: heights %d/%d, recorded %d", n.a.Name, hl, hr, n.height)
	}
	return n.height
}

// TestAttrSetModel: random sets, replacements and deletions, near and
// over the 1 MiB bound, against a map: every change is refused exactly
// when the model's encoding would pass the bound, a refused change leaves
// the set as it was, and the set's list, lookups, size and encoding are the
// model's. Earlier sets are unchanged by later changes (commits hold them).
func TestAttrSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 8))
	var h attrHolder
	model := map[string]AttrValue{}
	type snap struct {
		set *attrSet
		enc string
	}
	var snaps []snap
	var accepted, refused int
	modelSize := func(m map[string]AttrValue) int {
		if len(m) == 0 {
			return 0
		}
		n := attrFixed
		for name, v := range m {
			n += 2 + len(name) + 1 + 1 + 4 + len(v.data)
		}
		return n
	}
	modelEnc := func(m map[string]AttrValue) []byte {
		attrs := make([]Attr, 0, len(m))
		for n, v := range m {
			attrs = append(attrs, Attr{n, v})
		}
		slices.SortFunc(attrs, func(a, b Attr) int { return strings.Compare(a.Name, b.Name) })
		return encodeAttrs(attrs)
	}
	sizes := []int{0, 1, 7, 100, 4000, 30000, MaxAttrValueBytes}
	for op := 0; op < 4000; op++ {
		name := fmt.Sprintf("n%03d", rng.IntN(300))
		if rng.IntN(50) == 0 {
			name = strings.Repeat("x", 1+rng.IntN(MaxAttrNameBytes))
		}
		var v *AttrValue
		if rng.IntN(4) > 0 {
			val := BytesAttr(make([]byte, sizes[rng.IntN(len(sizes))]))
			if len(val.data) > 0 {
				val.data[0] = byte(op) // replacements differ from what they replace
			}
			v = &val
		}
		next := maps.Clone(model)
		if v == nil {
			delete(next, name)
		} else {
			next[name] = *v
		}
		_, had := model[name]
		wantSize := modelSize(next)
		prev := h.load()
		err := h.change(name, v, func() {})
		switch {
		case v == nil && !had:
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("op %d: delete of missing %q: %v", op, name, err)
			}
		case wantSize > format.MaxPartBytes:
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("op %d: %d encoded bytes accepted: %v", op, wantSize, err)
			}
		case err != nil:
			t.Fatalf("op %d: %d encoded bytes refused: %v", op, wantSize, err)
		default:
			model = next
		}
		if err == nil {
			accepted++
		} else if errors.Is(err, ErrInvalid) {
			refused++
		}
		s := h.load()
		if err != nil && s != prev {
			t.Fatalf("op %d: a refused change replaced the set", op)
		}
		if s.size != modelSize(model) {
			t.Fatalf("op %d: size %d, model %d", op, s.size, modelSize(model))
		}
		if got, ok := s.get(name); ok != (model[name].kind != 0) || ok && !got.Equal(model[name]) {
			t.Fatalf("op %d: get %q = %v %v", op, name, got, ok)
		}
		if op%97 == 0 {
			checkAttrTree(t, s.root, "", "")
			enc := modelEnc(model)
			if s.size != len(enc) || len(enc) != modelSize(model) || string(s.encoding()) != string(enc) || s.n != len(model) {
				t.Fatalf("op %d: size %d, %d attributes; model %d bytes, %d", op, s.size, s.n, len(enc), len(model))
			}
			if len(snaps) < 40 {
				snaps = append(snaps, snap{s, string(enc)})
			}
		}
	}
	if accepted < 1000 || refused < 100 {
		t.Fatalf("%d changes accepted, %d refused over the bound: the schedule misses a side", accepted, refused)
	}
	for i, sn := range snaps {
		if string(encodeAttrs(sn.set.list())) != sn.enc {
			t.Fatalf("snapshot %d changed after later changes", i)
		}
	}
}

// TestAttrBoundExact: a set encoding to exactly 1 MiB is accepted and
// committed; one byte more, by a new attribute or a longer value, is
// ErrInvalid and leaves the set as it was.
func TestAttrBoundExact(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Int8, Shape: []uint64{1}, Chunk: []uint64{1}})
	must(t, err)
	full := BytesAttr(make([]byte, MaxAttrValueBytes))
	for _, set := range []func(string, AttrValue) error{
		func(n string, v AttrValue) error { return f.SetAttr(ctx, n, v) },
		func(n string, v AttrValue) error { return ds.SetAttr(ctx, n, v) },
	} {
		size := attrFixed
		for i := 0; i < 15; i++ {
			must(t, set(fmt.Sprintf("a%02d", i), full))
			size += attrEntryMin - 1 + 3 + MaxAttrValueBytes
		}
		last := format.MaxPartBytes - size - (attrEntryMin - 1 + 1) // "z" fills it exactly
		must(t, set("z", BytesAttr(make([]byte, last))))
		for _, c := range []struct {
			name string
			v    AttrValue
		}{
			{"zz", StringAttr("")},                   // a new attribute of 10 bytes
			{"z", BytesAttr(make([]byte, last+1))},   // a value one byte longer
			{"a00", BytesAttr(make([]byte, 1))},      // fits: frees room
			{"y", BytesAttr(make([]byte, 65536-10))}, // 1 byte over the freed room
		} {
			before := [2]*attrSet{f.attrs.load(), ds.s.attrs.load()}
			err := set(c.name, c.v)
			if c.name == "a00" {
				must(t, err)
				must(t, set("a00", full)) // back to exactly the bound
				continue
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("set %q past the bound: %v", c.name, err)
			}
			if [2]*attrSet{f.attrs.load(), ds.s.attrs.load()} != before {
				t.Fatalf("a refused set of %q changed the attributes", c.name)
			}
		}
	}
	if n := len(f.attrs.load().encoding()); n != format.MaxPartBytes {
		t.Fatalf("file attributes encode to %d bytes", n)
	}
	if n := len(ds.s.attrs.load().encoding()); n != format.MaxPartBytes {
		t.Fatalf("dataset attributes encode to %d bytes", n)
	}
	want := [2]string{string(f.attrs.load().encoding()), string(ds.s.attrs.load().encoding())}
	must(t, f.Close(ctx))
	f2 := tOpen(t, mem, &Options{ReadOnly: true})
	defer f2.Close(ctx)
	ds2, err := f2.OpenDataset(ctx, "d", nil)
	must(t, err)
	if got := [2]string{string(encodeAttrs(attrsOf(t, f2))), string(encodeAttrs(attrsOf(t, ds2)))}; got != want {
		t.Fatal("attributes at the bound changed across a reopen")
	}
}
