package bench

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
)

// The chunk filler is the benchmark's formula, element by element, and the
// checker refuses a single wrong element.
func TestZarrBenchValues(t *testing.T) {
	c := ZarrBenchConfig{Side: 48, Chunk: 16}
	rmp := ramp(c.Side)
	buf := make([]byte, c.chunkBytes())
	for k := range c.chunks() {
		fillZarrChunk(buf, rmp, c, k)
		p := c.coord(k)
		for i := 0; i < len(buf)/2; i += 37 {
			l0, l1, l2 := i/(16*16), i/16%16, i%16
			g0, g1, g2 := uint64(p[0]*16+l0), uint64(p[1]*16+l1), uint64(p[2]*16+l2)
			if got, want := binary.LittleEndian.Uint16(buf[2*i:]), uint16((g2+g1*g1/32+g0*g0*g0)%65536); got != want {
				t.Fatalf("chunk %v element %d: %d, want %d", p, i, got, want)
			}
		}
		if err := verifyZarrChunk(buf, rmp, c, k); err != nil {
			t.Fatal(err)
		}
		buf[len(buf)-1] ^= 1
		if err := verifyZarrChunk(buf, rmp, c, k); err == nil {
			t.Fatalf("chunk %v: a changed element passed", p)
		}
	}
}

// The tiny run, without peers, gives every row for both codecs, the pread
// floor beside every read row, and verifies every element each row read or
// wrote.
func TestZarrBenchScenario(t *testing.T) {
	before := zarrVerified.Load()
	rep, err := Run(context.Background(), []string{"zarrbench"}, Options{Tiny: true, Dir: t.TempDir(), Peers: NoPeers()})
	if err != nil || len(rep.Errors) > 0 {
		t.Fatalf("%v %v", err, rep.Errors)
	}
	c := zarrBenchSize(Options{Tiny: true})
	elems := int64(c.Side * c.Side * c.Side)
	// Per codec: read_all, four read_chunks rows, the round trip's copy;
	// and the last chunk the zstd codec alone decoded. The sharded
	// variant: read_all, four read_chunks and four read_inner rows, the
	// round trip's copy, the last inner chunk its codec floor decoded and
	// the array its decode-and-place floor filled.
	inner := int64(shardInner(Options{}, c))
	if got, want := zarrVerified.Load()-before, 2*6*elems+int64(c.Chunk*c.Chunk*c.Chunk)+11*elems+inner*inner*inner; got != want {
		t.Fatalf("%d elements verified, want %d", got, want)
	}
	figs := map[string]Figure{}
	for _, f := range rep.Figures {
		if f.Scenario != "zarrbench" {
			t.Fatalf("figure of %s", f.Scenario)
		}
		figs[f.Key] = f
	}
	for _, codec := range []string{"raw", "zstd"} {
		for _, row := range []string{"read_all", "read_chunks/c1", "read_chunks/c2", "read_chunks/c4", "read_chunks/c8", "roundtrip"} {
			key := codec + "/" + row
			f, ok := figs[key]
			if !ok || f.SCC <= 0 || f.PeerValue != nil || (f.Target != nil && f.Status != "no peer") {
				t.Errorf("%s: %+v (present %v)", key, f, ok)
			}
			// The zstd read rows' decoded bytes per CPU-second, beside
			// the codec alone.
			pc, ok := figs[key+"/percore"]
			if want := codec == "zstd" && row != "roundtrip"; ok != want ||
				(ok && (pc.SCC <= 0 || pc.PeerValue == nil || *pc.PeerValue <= 0 || pc.Ratio == nil || pc.Status == "")) {
				t.Errorf("%s/percore: %+v (present %v, want %v)", key, pc, ok, want)
			}
			fl, ok := figs[key+"/floor"]
			if row == "roundtrip" {
				if ok {
					t.Errorf("%s: a pread floor for a round trip", key)
				}
				continue
			}
			if !ok || fl.PeerValue == nil || *fl.PeerValue <= 0 || fl.Ratio == nil {
				t.Errorf("%s/floor: %+v (present %v)", key, fl, ok)
			}
		}
	}
	for _, key := range shardedKeys() {
		f, ok := figs[key]
		if !ok || f.SCC <= 0 || f.PeerValue != nil {
			t.Errorf("%s: %+v (present %v)", key, f, ok)
		}
		if _, ok := figs[key+"/published-zarrs"]; !ok {
			t.Errorf("%s: no published zarrs figure beside it", key)
		}
		// Every read row carries the codec's floor on the same inner
		// frames, on one goroutine and on all cores, measured in the run.
		if want := !strings.HasSuffix(key, "roundtrip"); strings.Contains(f.Note, "on all ") != want ||
			strings.Contains(f.Note, "codec alone on the same") != want {
			t.Errorf("%s: note %q, codec floor on all cores wanted %v", key, f.Note, want)
		}
	}
	// The tiny file is mostly metadata: the figure is there, its target
	// is for the full size.
	size, ok := figs["sharded/size"]
	if !ok || size.Ratio == nil || size.SCC <= 0 {
		t.Errorf("sharded file beside its Zarr export: %+v", size)
	}
	if _, ok := figs["sharded/read_all/bound"]; !ok {
		t.Errorf("no read_all figure beside the codec and pread bound")
	}
	if !strings.Contains(strings.Join(rep.Missing, ";"), "python3") {
		t.Errorf("missing peers %v do not name python3", rep.Missing)
	}
}
