package blosc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// python is Debian's interpreter, which has python3-numcodecs (a pyenv
// python3 on PATH may not).
const python = "/usr/bin/python3"

// generated is a set of frames written by numcodecs' c-blosc (testdata/gen.py).
type generated struct {
	cases []genCase
	blob  []byte
}

type genCase struct {
	Name      string `json:"name"`
	Cname     string `json:"cname"`
	Clevel    int    `json:"clevel"`
	Shuffle   string `json:"shuffle"`
	TypeSize  int    `json:"typesize"`
	BlockSize int    `json:"blocksize"`
	NBytes    int    `json:"nbytes"`
	CBytes    int    `json:"cbytes"`
	Raw       int    `json:"raw"`
	Frame     int    `json:"frame"`
}

func (g *generated) raw(c genCase) []byte   { return g.blob[c.Raw : c.Raw+c.NBytes] }
func (g *generated) frame(c genCase) []byte { return g.blob[c.Frame : c.Frame+c.CBytes] }

var (
	genOnce sync.Once
	genSet  *generated
	genErr  error
)

// numcodecsFrames runs testdata/gen.py once per test binary. It fails (never
// skips) when numcodecs is missing: CI installs it with `make interop-deps`.
func numcodecsFrames(t testing.TB) *generated {
	t.Helper()
	genOnce.Do(func() { genSet, genErr = generate("") })
	if genErr != nil {
		t.Fatal(genErr)
	}
	return genSet
}

func generate(mode string) (*generated, error) {
	if out, err := exec.Command(python, "-c", "import numcodecs.blosc, numpy").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("numcodecs (Debian python3-numcodecs, pulled by python3-zarr) is missing (%v: %s); install it with `make interop-deps`", err, out)
	}
	dir, err := os.MkdirTemp("", "blosc-gen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	args := []string{filepath.Join("testdata", "gen.py"), dir}
	if mode != "" {
		args = append(args, mode)
	}
	if out, err := exec.Command(python, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gen.py: %v: %s", err, out)
	}
	g := new(generated)
	m, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(m, &g.cases); err != nil {
		return nil, err
	}
	if g.blob, err = os.ReadFile(filepath.Join(dir, "cases.bin")); err != nil {
		return nil, err
	}
	return g, nil
}

// TestDecodeNumcodecs decodes every frame numcodecs' c-blosc wrote for
// every compressor, shuffle, element size, block layout and compression
// level, and compares it byte for byte with the data that was compressed.
func TestDecodeNumcodecs(t *testing.T) {
	g := numcodecsFrames(t)
	seen := map[string]int{}
	dirty := bytes.Repeat([]byte{0xA5}, 4<<20)
	for _, c := range g.cases {
		raw, frame := g.raw(c), g.frame(c)
		h, err := ParseHeader(frame)
		if err != nil {
			t.Fatalf("%s: header: %v", c.Name, err)
		}
		if n, err := DecodedSize(frame); err != nil || n != c.NBytes {
			t.Fatalf("%s: DecodedSize = %d, %v; want %d", c.Name, n, err, c.NBytes)
		}
		got, err := Decode(nil, frame, c.NBytes)
		if err != nil {
			t.Fatalf("%s (header %+v): %v", c.Name, h, err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("%s (header %+v): decoded bytes differ from the original at %d", c.Name, h, firstDiff(got, raw))
		}
		// The result lands in dst's storage, whatever it held before.
		if c.NBytes > 0 && c.NBytes <= len(dirty) {
			for i := range dirty[:c.NBytes] {
				dirty[i] = 0xA5
			}
			got, err := Decode(dirty[:0], frame, c.NBytes)
			if err != nil || !bytes.Equal(got, raw) || &got[0] != &dirty[0] {
				t.Fatalf("%s: decoding into a used buffer: %v, equal %v", c.Name, err, bytes.Equal(got, raw))
			}
		}
		if c.NBytes > 0 {
			if _, err := Decode(nil, frame, c.NBytes-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: limit one byte short: %v, want ErrTooLarge", c.Name, err)
			}
		}
		if c.NBytes == 0 {
			seen["empty"]++
			continue
		}
		if h.Flags&FlagMemcpyed != 0 {
			seen["memcpyed"]++
			continue
		}
		want := strings.TrimSuffix(c.Cname, "hc")
		if h.CodecName() != want {
			t.Fatalf("%s: compressor %s in the header", c.Name, h.CodecName())
		}
		seen[c.Cname]++
		seen[c.Shuffle]++
		if h.Flags&FlagDontSplit == 0 && h.TypeSize > 1 && h.TypeSize <= maxSplits && h.BlockSize/h.TypeSize >= minSplitElems {
			seen["split"]++
		}
		if h.Flags&FlagDontSplit != 0 {
			seen["dontsplit"]++
		}
		if h.nblocks() > 1 && h.NBytes%h.BlockSize != 0 {
			seen["short last block"]++
		}
		if h.NBytes%h.TypeSize != 0 && h.Flags&(FlagShuffle|FlagBitShuffle) != 0 {
			seen["partial element"]++
		}
		if h.Codec() == CodecBloscLZ && farMatches(t, frame) > 0 {
			seen["blosclz far match"]++
		}
	}
	// The generator covers each of these; a numcodecs that stopped doing
	// so would silently weaken this test.
	for _, k := range []string{"empty", "memcpyed", "blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd",
		"noshuffle", "shuffle", "bitshuffle", "split", "dontsplit", "short last block", "partial element", "blosclz far match"} {
		if seen[k] == 0 {
			t.Errorf("no frame with %s among the %d generated", k, len(g.cases))
		}
	}
	t.Logf("%d frames decoded; %v", len(g.cases), seen)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// farMatches counts the BloscLZ matches with a 16-bit distance in a
// frame's streams, walking them as the format describes (the decoder's
// tests must show the generated frames exercise that path).
func farMatches(t testing.TB, frame []byte) int {
	h, err := ParseHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	far := 0
	for j := range h.nblocks() {
		off := int(binary.LittleEndian.Uint32(frame[HeaderSize+4*j:]))
		n := min(h.BlockSize, h.NBytes-j*h.BlockSize)
		nsplits := 1
		if h.Flags&FlagDontSplit == 0 && h.TypeSize <= maxSplits && n/h.TypeSize >= minSplitElems && n == h.BlockSize {
			nsplits = h.TypeSize
		}
		for range nsplits {
			cs := int(binary.LittleEndian.Uint32(frame[off:]))
			in := frame[off+4 : off+4+cs]
			off += 4 + cs
			if cs == n/nsplits {
				continue // stored
			}
			for ip := 0; ip < len(in); {
				ctrl := int(in[ip])
				if ip == 0 {
					ctrl &= 31
				}
				ip++
				if ctrl < 32 {
					ip += ctrl + 1
					continue
				}
				if ctrl>>5 == 7 {
					for ip < len(in) && in[ip] == 255 {
						ip++
					}
					ip++
				}
				if ip < len(in) && in[ip] == 255 && ctrl&31 == 31 {
					far++
					ip += 2
				}
				ip++
			}
		}
	}
	return far
}

// TestDifferentialNumcodecs damages frames numcodecs wrote (bytes flipped,
// header fields changed, frames cut short) and decodes each with this
// package and with numcodecs: whenever both decode a frame, they return
// the same bytes, and whenever numcodecs refuses one, so does Decode.
// Decode may refuse a frame numcodecs decodes only where a Go stream
// decoder finds damage that c-blosc's does not check (libzstd and liblz4
// turn some damaged streams into garbage of the right length), and for a
// split block that is not a whole number of elements (c-blosc leaves its
// last bytes unwritten: whatever its buffer held), and for blocks that
// share streams (see decoder.room). Damage that would make c-blosc read outside the frame (cbytes
// beyond its end, which numcodecs does not check) or allocate a huge
// buffer is not sent to numcodecs.
func TestDifferentialNumcodecs(t *testing.T) {
	g := numcodecsFrames(t)
	rng := rand.New(rand.NewPCG(7, 11))
	var seeds [][]byte
	for _, c := range g.cases {
		if c.NBytes > 0 && c.NBytes <= 70000 && !strings.Contains(c.Name, "random") {
			seeds = append(seeds, g.frame(c))
		}
	}
	var mutants [][]byte
	for len(mutants) < 6000 {
		m := mutate(rng, seeds[rng.IntN(len(seeds))])
		if len(m) >= HeaderSize {
			nbytes := binary.LittleEndian.Uint32(m[4:])
			cbytes := binary.LittleEndian.Uint32(m[12:])
			// numcodecs refuses empty frames (c-blosc returns their size,
			// 0, which numcodecs takes for failure); Decode accepts them.
			if int64(cbytes) > int64(len(m)) || nbytes > 1<<20 || nbytes == 0 {
				continue
			}
		}
		mutants = append(mutants, m)
	}
	ref := numcodecsDecode(t, mutants)
	var agree, bothFail, refOnly, oursOnly int
	for i, m := range mutants {
		got, err := Decode(nil, m, 1<<20)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("mutant %d: error %v wraps no sentinel", i, err)
		}
		want, ok := ref[i], ref[i] != nil
		switch {
		case ok && err == nil:
			if !bytes.Equal(got, want) {
				t.Errorf("mutant %d (header % x): decoded bytes differ from numcodecs' at %d of %d", i, m[:HeaderSize], firstDiff(got, want), len(want))
			}
			agree++
		case !ok && err != nil:
			bothFail++
		case ok && knownStricter(err):
			refOnly++
		case ok:
			t.Errorf("mutant %d (header % x): numcodecs decodes it, Decode refuses: %v", i, m[:min(len(m), HeaderSize)], err)
		default:
			oursOnly++
			t.Errorf("mutant %d (header % x): numcodecs refuses it, Decode returns %d bytes", i, m[:min(len(m), HeaderSize)], len(got))
		}
	}
	t.Logf("%d mutants: %d decoded alike, %d refused by both, %d only by Decode (known to decode to garbage in c-blosc), %d only by numcodecs", len(mutants), agree, bothFail, refOnly, oursOnly)
	if agree < 100 || bothFail < 100 {
		t.Errorf("the mutants hardly exercise both outcomes")
	}
}

// knownStricter says whether err refuses one of the frames c-blosc decodes
// into garbage.
func knownStricter(err error) bool {
	for _, c := range []string{"zstd: ", "lz4: ", "snappy: ", "zlib: ", "is not a multiple of typesize", "blocks share streams"} {
		if strings.Contains(err.Error(), c) {
			return true
		}
	}
	return false
}

// mutate returns a damaged copy of a frame.
func mutate(rng *rand.Rand, f []byte) []byte {
	m := bytes.Clone(f)
	switch rng.IntN(8) {
	case 0: // a byte anywhere
		m[rng.IntN(len(m))] ^= byte(1 + rng.IntN(255))
	case 1: // a few bytes past the header
		for range 1 + rng.IntN(4) {
			if len(m) > HeaderSize {
				m[HeaderSize+rng.IntN(len(m)-HeaderSize)] = byte(rng.IntN(256))
			}
		}
	case 2: // the flags
		m[2] ^= byte(1 << rng.IntN(8))
	case 3: // typesize
		m[3] = []byte{0, 1, 2, 3, 4, 7, 8, 16, 17, 255}[rng.IntN(10)]
	case 4: // nbytes or blocksize
		at := 4 + 4*rng.IntN(2)
		v := binary.LittleEndian.Uint32(m[at:])
		vs := []uint32{0, 1, v - 1, v + 1, v * 2, v / 2, v - 8, 128, 1 << 31}
		binary.LittleEndian.PutUint32(m[at:], vs[rng.IntN(len(vs))])
	case 5: // a block offset or a stream size
		if len(m) >= HeaderSize+4 {
			at := HeaderSize + 4*rng.IntN((len(m)-HeaderSize)/4)
			binary.LittleEndian.PutUint32(m[at:], binary.LittleEndian.Uint32(m[at:])+uint32(rng.IntN(9))-4)
		}
	case 6: // cut short, cbytes kept consistent
		n := HeaderSize + rng.IntN(len(m)-HeaderSize+1)
		m = m[:n]
		binary.LittleEndian.PutUint32(m[12:], uint32(n))
	case 7: // the version
		m[0] = byte(rng.IntN(4))
	}
	return m
}

// numcodecsDecode decodes frames with numcodecs in one python process; a
// nil result is a frame numcodecs refused.
func numcodecsDecode(t *testing.T, frames [][]byte) [][]byte {
	t.Helper()
	dir := t.TempDir()
	var in bytes.Buffer
	for _, f := range frames {
		in.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(f))))
		in.Write(f)
	}
	must(t, os.WriteFile(filepath.Join(dir, "in"), in.Bytes(), 0o644))
	script := `
import struct, sys
from numcodecs import blosc
src = open(sys.argv[1], "rb").read()
out = open(sys.argv[2], "wb")
i = 0
while i < len(src):
    n, = struct.unpack_from("<I", src, i)
    f = src[i+4:i+4+n]
    i += 4 + n
    try:
        d = bytes(blosc.decompress(f))
        out.write(struct.pack("<i", len(d)) + d)
    except Exception:
        out.write(struct.pack("<i", -1))
`
	if out, err := exec.Command(python, "-c", script, filepath.Join(dir, "in"), filepath.Join(dir, "out")).CombinedOutput(); err != nil {
		t.Fatalf("numcodecs decode: %v: %s", err, out)
	}
	res, err := os.ReadFile(filepath.Join(dir, "out"))
	must(t, err)
	var decoded [][]byte
	for len(res) >= 4 {
		n := int(int32(binary.LittleEndian.Uint32(res)))
		res = res[4:]
		if n < 0 {
			decoded = append(decoded, nil)
			continue
		}
		decoded = append(decoded, res[:n:n])
		res = res[n:]
	}
	if len(decoded) != len(frames) {
		t.Fatalf("numcodecs answered for %d of %d frames", len(decoded), len(frames))
	}
	return decoded
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
