package bench

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// SeqReadResult is a sequential read of a file of unfiltered chunks,
// through scc and as raw preads of the same file.
type SeqReadResult struct {
	Bytes     int64
	SCCMBps   float64 // open read-only, read every chunk in order, close
	PreadMBps float64 // pread the whole file in chunk-sized pieces
	// PreadSumMBps is the same preads each followed by a CRC32C of the
	// bytes read (the checksum every scc chunk carries, computed as
	// engine/internal/format does): the ceiling of a reader that verifies what it
	// reads on one core. scc's direct reads do this work plus the
	// engine's own, split between the caller and an idle core when the
	// chunks are large (cache/splitread.go); PreadMBps is the ceiling of
	// one core that does not verify.
	PreadSumMBps float64
}

// SeqRead writes a dataset of n unfiltered chunks of chunkBytes each into
// dir, then times reading it back in chunk-sized requests through a cold
// scc cache, and times reading the same file with plain preads of the
// same size. Both reads find the file in the page cache (the write just
// put it there, and each is run after one untimed warm pass), so the
// figure compares the engines' own costs, not the disk.
func SeqRead(ctx context.Context, dir string, n int, chunkBytes int) (*SeqReadResult, error) {
	path := filepath.Join(dir, "seqread.scc")
	defer os.Remove(path)
	f, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	ds, err := f.CreateDataset(ctx, "seq", engine.DatasetSpec{
		Type: engine.Uint8, Shape: []uint64{uint64(n), uint64(chunkBytes)}, Chunk: []uint64{1, uint64(chunkBytes)},
	})
	if err != nil {
		f.Close(ctx)
		return nil, err
	}
	buf := make([]byte, chunkBytes)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for i := 0; i < n; i++ {
		buf[0] = byte(i)
		if err := ds.Write(ctx, engine.Box([]uint64{uint64(i), 0}, []uint64{1, uint64(chunkBytes)}), buf); err != nil {
			f.Close(ctx)
			return nil, err
		}
	}
	if err := f.Close(ctx); err != nil {
		return nil, err
	}
	res := &SeqReadResult{Bytes: int64(n) * int64(chunkBytes)}
	readSCC := func() (time.Duration, error) {
		t0 := time.Now()
		// A cache smaller than the data, as a scan of a large dataset has.
		c, err := cache.New(cache.Config{QuiescentBytes: int64(max(4*chunkBytes, 16<<20))})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		f, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true, Cache: c})
		if err != nil {
			return 0, err
		}
		defer f.Close(ctx)
		ds, err := f.OpenDataset(ctx, "seq", nil)
		if err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			if err := ds.Read(ctx, engine.Box([]uint64{uint64(i), 0}, []uint64{1, uint64(chunkBytes)}), buf); err != nil {
				return 0, err
			}
			if buf[0] != byte(i) || buf[1] != 7 {
				return 0, fmt.Errorf("%w: seqread chunk %d", ErrVerify, i)
			}
		}
		if err := f.Close(ctx); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var sums uint32
	readRawSum := func(sum bool) (time.Duration, error) {
		t0 := time.Now()
		fh, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		for off := int64(0); ; off += int64(len(buf)) {
			k, err := fh.ReadAt(buf, off)
			if err == io.EOF || k < len(buf) {
				break
			}
			if err != nil {
				return 0, err
			}
			if sum {
				sums += crc32.Checksum(buf, castagnoli)
			}
		}
		return time.Since(t0), nil
	}
	readRaw := func() (time.Duration, error) { return readRawSum(false) }
	readSum := func() (time.Duration, error) { return readRawSum(true) }
	for _, r := range []struct {
		fn  func() (time.Duration, error)
		out *float64
	}{{readSCC, &res.SCCMBps}, {readRaw, &res.PreadMBps}, {readSum, &res.PreadSumMBps}} {
		if _, err := r.fn(); err != nil { // warm pass
			return nil, err
		}
		d, err := r.fn()
		if err != nil {
			return nil, err
		}
		*r.out = mibps(res.Bytes, d)
	}
	return res, nil
}

// runSeqRead is the sequential-read scenario: 1 GiB of 1 MiB unfiltered
// chunks (64 MiB with --quick), target 0.8× raw pread.
func runSeqRead(ctx context.Context, o Options, _ *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "seqread")
	if err != nil {
		return err
	}
	defer cleanup()
	n := o.size(1024, 64, 8)
	chunk := o.size(1<<20, 1<<20, 64<<10)
	o.logf("   %d chunks of %s, unfiltered", n, HumanBytes(int64(chunk)))
	res, err := SeqRead(ctx, dir, n, chunk)
	if err != nil {
		return err
	}
	o.logf("   scc %.1f MiB/s, raw pread %.1f MiB/s, raw pread + CRC32C %.1f MiB/s", res.SCCMBps, res.PreadMBps, res.PreadSumMBps)
	r.add(Figure{Scenario: "seqread", Key: "read", Metric: fmt.Sprintf("sequential read of %s in %s chunks (page cache warm)", HumanBytes(res.Bytes), HumanBytes(int64(chunk))),
		Unit: "MiB/s", HigherIsBetter: true, SCC: res.SCCMBps, Peer: "raw pread of the same file", PeerValue: ptr(res.PreadMBps),
		Target: &Target{Kind: "ratio", Value: 0.8}})
	r.add(Figure{Scenario: "seqread", Key: "read-verified", Metric: fmt.Sprintf("sequential read of %s in %s chunks, beside a one-core verified read", HumanBytes(res.Bytes), HumanBytes(int64(chunk))),
		Unit: "MiB/s", HigherIsBetter: true, SCC: res.SCCMBps, Peer: "raw pread + CRC32C of the same file", PeerValue: ptr(res.PreadSumMBps),
		Note: "every scc chunk carries a CRC32C that a read verifies; raw pread + CRC32C is what one core can do; scc splits a large direct read between the caller and an idle core, each reading and checksumming its share (cache/splitread.go), so it can pass it (moving only the checksum to another core measured slower: the bytes are in the reading core's cache)"})
	return nil
}
