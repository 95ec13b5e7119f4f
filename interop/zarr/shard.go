package zarr

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// Zarr v3 sharded arrays (ZarrV3 "sharding") import into sharded scc
// datasets: the shard is the scc chunk, the Zarr inner chunk the scc
// inner chunk (engine.DatasetSpec.InnerChunk). Where the inner codecs map
// onto the pipeline (importPlan), each inner chunk's bytes go into the
// chunk's portable form as they are (a last crc32c codec's checksum is
// the portable frame's own; a gzip stage is unwrapped to its deflate
// stream) and only the index is rewritten; the others are decoded.

// maxShardInner bounds the inner chunks of one shard: the engine's bound
// (FORMAT.md "Sharded chunks").
const maxShardInner = 1 << 20

// shardMeta is a sharding_indexed codec's configuration, checked.
type shardMeta struct {
	// inner holds the inner chunks' shape (chunk) and codecs (chain,
	// bigEndian, order).
	inner        *arrayMeta
	counts       []uint64 // inner chunks along each dimension of a shard
	n            int      // inner chunks in a shard
	indexAtStart bool
	indexBig     bool // index entries big-endian
	indexCRC     bool // index followed by its crc32c
}

// indexSize is the encoded index's size.
func (sh *shardMeta) indexSize() int {
	n := sh.n * 16
	if sh.indexCRC {
		n += 4
	}
	return n
}

// sharding reads a sharding_indexed codec's configuration.
func (m *arrayMeta) sharding(cfg map[string]any) (*shardMeta, error) {
	const what = "zarr.json: sharding_indexed"
	inner, err := dimsKey(cfg, what, "chunk_shape", true)
	if err != nil {
		return nil, err
	}
	if len(inner) != len(m.chunk) {
		return nil, fmt.Errorf("%w: %s: inner chunk shape %v for shard shape %v", ErrCorrupt, what, inner, m.chunk)
	}
	sh := &shardMeta{counts: make([]uint64, len(inner)), n: 1}
	for d := range inner {
		if m.chunk[d]%inner[d] != 0 {
			return nil, fmt.Errorf("%w: %s: inner chunk shape %v does not divide shard shape %v", ErrCorrupt, what, inner, m.chunk)
		}
		sh.counts[d] = m.chunk[d] / inner[d]
		if sh.counts[d] > maxShardInner || uint64(sh.n)*sh.counts[d] > maxShardInner {
			return nil, fmt.Errorf("%w: %s: a shard of %v holds more than %d inner chunks of %v", ErrUnsupported, what, m.chunk, maxShardInner, inner)
		}
		sh.n *= int(sh.counts[d])
	}
	codecs, ok := cfg["codecs"].([]any)
	if !ok || len(codecs) == 0 {
		return nil, badKey(what, "codecs", cfg["codecs"], "a non-empty list of codecs")
	}
	sh.inner = &arrayMeta{shape: m.shape, chunk: inner, typ: m.typ}
	if err := sh.inner.v3Codecs(codecs); err != nil {
		return nil, err
	}
	if sh.inner.shard != nil {
		return nil, fmt.Errorf("%w: %s: sharding inside sharding", ErrUnsupported, what)
	}
	// The index codecs must give a fixed size: bytes, then optionally
	// crc32c (the spec's default), which is all scc reads.
	ic, ok := cfg["index_codecs"].([]any)
	if !ok || len(ic) == 0 {
		return nil, badKey(what, "index_codecs", cfg["index_codecs"], "a non-empty list of codecs")
	}
	for i, c := range ic {
		var name string
		var ccfg map[string]any
		switch x := c.(type) {
		case string:
			name = x
		case map[string]any:
			name, _ = x["name"].(string)
			ccfg, _ = x["configuration"].(map[string]any)
		}
		switch {
		case i == 0 && name == "bytes":
			switch e := ccfg["endian"]; e {
			case "big":
				sh.indexBig = true
			case "little", nil:
			default:
				return nil, badKey(what, "index_codecs.bytes.configuration.endian", e, `"little" or "big"`)
			}
		case i == 1 && name == "crc32c":
			sh.indexCRC = true
		default:
			return nil, fmt.Errorf("%w: %s: index codecs %s (scc reads bytes, then crc32c or nothing)", ErrUnsupported, what, asJSON(ic))
		}
	}
	switch loc := cfg["index_location"]; loc {
	case "start":
		sh.indexAtStart = true
	case "end", nil:
	default:
		return nil, badKey(what, "index_location", loc, `"start" or "end"`)
	}
	return sh, nil
}

// span is one inner chunk's bytes in a shard; off == math.MaxUint64 for
// an absent one.
type span struct{ off, size uint64 }

func (s span) empty() bool { return s.off == math.MaxUint64 }

// decodeShardIndex decodes the n entries of a shard's index idx (its
// checksum already checked) and checks them before anyone trusts them:
// every inner chunk lies inside [lo, hi) (the shard's bytes less the
// index), is 1 to maxInner bytes long, and no two overlap; an absent one
// is 2^64-1 in both fields. The error wraps ErrCorrupt. It allocates only
// the n entries the metadata gives.
func decodeShardIndex(idx []byte, n int, big bool, lo, hi, maxInner uint64) ([]span, error) {
	if n < 0 || n > maxShardInner || len(idx) != n*16 {
		return nil, fmt.Errorf("%w: shard index of %d bytes for %d inner chunks", ErrCorrupt, len(idx), n)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if big {
		order = binary.BigEndian
	}
	out := make([]span, n)
	used := make([]int, 0, n)
	for i := range out {
		s := span{order.Uint64(idx[16*i:]), order.Uint64(idx[16*i+8:])}
		switch {
		case s.off == math.MaxUint64 && s.size == math.MaxUint64:
		case s.off == math.MaxUint64 || s.size == math.MaxUint64:
			return nil, fmt.Errorf("%w: shard index entry %d: offset %#x, size %#x (absent is all ones in both)", ErrCorrupt, i, s.off, s.size)
		case s.size == 0 || s.size > maxInner:
			return nil, fmt.Errorf("%w: shard index entry %d: inner chunk of %d bytes (1..%d)", ErrCorrupt, i, s.size, maxInner)
		case s.off < lo || s.off > hi || s.size > hi-s.off:
			return nil, fmt.Errorf("%w: shard index entry %d: inner chunk [%d, +%d) outside the shard's data [%d, %d)", ErrCorrupt, i, s.off, s.size, lo, hi)
		default:
			used = append(used, i)
		}
		out[i] = s
	}
	slices.SortFunc(used, func(a, b int) int {
		switch {
		case out[a].off < out[b].off:
			return -1
		case out[a].off > out[b].off:
			return 1
		}
		return 0
	})
	for k := 1; k < len(used); k++ {
		if p, q := out[used[k-1]], out[used[k]]; p.off+p.size > q.off {
			return nil, fmt.Errorf("%w: shard index: inner chunks %d and %d overlap at offset %d", ErrCorrupt, used[k-1], used[k], q.off)
		}
	}
	return out, nil
}

// openShard checks a shard's bytes and returns its inner chunks' spans.
func openShard(sh *shardMeta, b []byte, maxInner uint64) ([]span, error) {
	is := sh.indexSize()
	if len(b) < is {
		return nil, fmt.Errorf("%w: shard of %d bytes for an index of %d", ErrCorrupt, len(b), is)
	}
	idx, lo, hi := b[len(b)-is:], uint64(0), uint64(len(b)-is)
	if sh.indexAtStart {
		idx, lo, hi = b[:is], uint64(is), uint64(len(b))
	}
	if sh.indexCRC {
		body := idx[:len(idx)-4]
		if got, want := crc32.Checksum(body, zarrmap.Castagnoli), binary.LittleEndian.Uint32(idx[len(body):]); got != want {
			return nil, fmt.Errorf("%w: shard index crc32c %08x, stored %08x", ErrCorrupt, got, want)
		}
		idx = body
	}
	return decodeShardIndex(idx, sh.n, sh.indexBig, lo, hi, maxInner)
}

// innerFilters is the pipeline of a sharded dataset whose inner codecs
// are sh.inner's: importPlan's, less a last crc32c, whose checksum is the
// inner frame's own (dropCRC).
func innerFilters(sh *shardMeta) (filters []engine.Filter, copyOK bool, unwrapID, why string, dropCRC bool) {
	chain := sh.inner.chain
	if n := len(chain); n > 0 && chain[n-1].id == "crc32c" {
		dropCRC = true
		trimmed := *sh.inner
		trimmed.chain = chain[:n-1]
		filters, copyOK, unwrapID, why, _ = importPlan(&trimmed)
		return filters, copyOK, unwrapID, why, true
	}
	filters, copyOK, unwrapID, why, _ = importPlan(sh.inner)
	return filters, copyOK, unwrapID, why, false
}

func importSharded(ctx context.Context, s *store, f *engine.File, name, key string, m *arrayMeta, workers int) (DatasetReport, error) {
	sh := m.shard
	in := sh.inner
	dr := DatasetReport{Name: name, Codecs: "sharding(" + chainString(in.chain) + ")", Notes: m.notes}
	dr.Notes = append(dr.Notes, fmt.Sprintf("sharded: inner chunks %v", in.chunk))
	filters, copyOK, unwrapID, why, dropCRC := innerFilters(sh)
	dr.Why = why
	ds, err := createArray(ctx, f, name, engine.DatasetSpec{
		Type: m.typ, Shape: m.shape, Chunk: m.chunk, InnerChunk: in.chunk, Filters: filters, Fill: m.fill,
	}, m)
	if err != nil {
		return dr, err
	}
	defer ds.Close(ctx)
	es := m.typ.Size()
	innerBytes := es
	for _, c := range in.chunk {
		innerBytes *= int(c)
	}
	// An inner chunk is at most its decoded size plus what a codec adds
	// to incompressible data; a shard at most n of those and its index.
	maxInner := uint64(innerBytes) + uint64(innerBytes)/8 + 1024
	bound := int64(sh.n)*int64(maxInner) + int64(sh.indexSize())
	coords, err := s.listChunks(ctx, key, m, m.grid)
	if err != nil {
		return dr, err
	}
	var copied, rewrapped, reenc, count atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, c := range coords {
		g.Go(func() error {
			b, err := s.read(gctx, joinKey(key, chunkKey(m, c)), bound)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("shard %v: %w", c, err)
			}
			count.Add(1)
			spans, err := openShard(sh, b, maxInner)
			if err != nil {
				return fmt.Errorf("shard %v: %w", c, err)
			}
			if copyOK {
				portable, err := portableShard(b, spans, unwrapID, dropCRC, innerBytes)
				if err == nil {
					err = ds.WriteChunkRaw(gctx, c, portable, 0)
					if err == nil {
						if unwrapID != "" {
							rewrapped.Add(1)
						} else {
							copied.Add(1)
						}
						return nil
					}
				}
				if !errors.Is(err, engine.ErrInvalid) && !errors.Is(err, ErrCorrupt) {
					return fmt.Errorf("shard %v: %w", c, err)
				}
				if os.Getenv("SCC_ZARR_DEBUG") != "" {
					fmt.Fprintln(os.Stderr, "raw shard write refused:", c, err)
				}
				// Not scc's form of those codecs (a frame the engine
				// does not take, padding other than the fill value), or
				// a damaged inner chunk, which the decode below names.
			}
			reenc.Add(1)
			return writeShardDecoded(gctx, ds, m, c, b, spans, innerBytes)
		})
	}
	if err := g.Wait(); err != nil {
		return dr, err
	}
	dr.Chunks = int(count.Load())
	dr.Copied, dr.Rewrapped, dr.Reencoded = int(copied.Load()), int(rewrapped.Load()), int(reenc.Load())
	dr.Untouched = 0 // the engine decodes every raw sharded chunk it stores
	dr.Bytes = count.Load() * int64(m.chunkBytes)
	if dr.Reencoded > 0 && dr.Why == "" {
		dr.Why = "inner chunks not in scc's form of the codecs (or edge padding other than the fill value)"
	}
	return dr, nil
}

// portableShard builds the portable form of a sharded chunk (FORMAT.md
// "Sharded chunks", raw chunks) from a Zarr shard: each inner chunk's
// bytes as they are (a gzip stage unwrapped), followed by their CRC32C
// unless the last inner codec is crc32c (dropCRC), whose checksum the
// bytes already end with; then scc's index.
func portableShard(b []byte, spans []span, unwrapID string, dropCRC bool, innerBytes int) ([]byte, error) {
	size := len(spans) * 16
	for _, sp := range spans {
		if !sp.empty() {
			size += int(sp.size) + 4
		}
	}
	out := make([]byte, 0, size)
	entries := make([]byte, 0, len(spans)*16)
	for i, sp := range spans {
		if sp.empty() {
			entries = binary.LittleEndian.AppendUint64(entries, math.MaxUint64)
			entries = binary.LittleEndian.AppendUint64(entries, 0)
			continue
		}
		data := b[sp.off : sp.off+sp.size]
		off := len(out)
		if dropCRC && unwrapID != "" {
			// gzip, then crc32c (what an export of a deflate pipeline
			// writes): the checksum is checked here, the stream
			// unwrapped and given its own.
			if len(data) < 4 || crc32.Checksum(data[:len(data)-4], zarrmap.Castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
				return nil, fmt.Errorf("%w: inner chunk %d: crc32c mismatch", ErrCorrupt, i)
			}
			data = data[:len(data)-4]
		}
		switch {
		case unwrapID != "":
			raw, err := unwrap(unwrapID, data, innerBytes)
			if err != nil {
				return nil, fmt.Errorf("inner chunk %d: %w", i, err)
			}
			out = zarrmap.AppendCRC(append(out, raw...), off)
		case dropCRC:
			out = append(out, data...)
		default:
			out = zarrmap.AppendCRC(append(out, data...), off)
		}
		n := len(out) - off
		if n < 4 || n > math.MaxUint32 {
			return nil, fmt.Errorf("%w: inner chunk %d of %d bytes", ErrCorrupt, i, n)
		}
		entries = binary.LittleEndian.AppendUint64(entries, uint64(off))
		entries = binary.LittleEndian.AppendUint32(entries, uint32(n))
		entries = binary.LittleEndian.AppendUint32(entries, 0)
	}
	return append(out, entries...), nil
}

// writeShardDecoded decodes every inner chunk of the shard at c and
// writes the shard's part inside the array. A damaged inner chunk is
// ErrCorrupt naming it.
func writeShardDecoded(ctx context.Context, ds *engine.Dataset, m *arrayMeta, c []uint64, b []byte, spans []span, innerBytes int) error {
	sh := m.shard
	in := sh.inner
	es := m.typ.Size()
	full := make([]byte, m.chunkBytes)
	if m.fill != nil && !zarrmap.AllFill(full[:es], m.fill) {
		for i := 0; i < len(full); i += es {
			copy(full[i:], m.fill)
		}
	}
	for i, sp := range spans {
		if sp.empty() {
			continue
		}
		q := zarrmap.InnerCoord(sh.counts, i)
		raw, err := decodeChain(in.chain, b[sp.off:sp.off+sp.size], innerBytes)
		if err != nil {
			return fmt.Errorf("shard %v inner chunk %v: %w", c, q, err)
		}
		if in.bigEndian {
			raw = swapBytes(raw, swapUnit(m.typ))
		}
		if in.order != nil {
			raw = untranspose(raw, in.chunk, in.order, es)
		}
		zarrmap.InnerBox(full, m.chunk, in.chunk, q, es, raw, true)
	}
	start, cnt, edge := zarrmap.ChunkBox(c, m.chunk, m.shape)
	part := full
	if edge {
		n := es
		for _, x := range cnt {
			n *= int(x)
		}
		part = make([]byte, n)
		zarrmap.CopyBox(full, m.chunk, part, cnt, es, true)
	}
	return ds.Write(ctx, engine.Box(start, cnt), part)
}
