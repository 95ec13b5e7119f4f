package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// ErrVerify is returned when a frame read back does not match what was
// written.
var ErrVerify = errors.New("bench: frame failed verification")

// IngestConfig configures the ingest job: writer goroutines append uint16
// frames to datasets (one unlimited dimension, one frame per chunk) while
// reader goroutines follow them and verify every frame. Zero fields take
// the documented defaults, which are also `make demo`'s embedded default.
type IngestConfig struct {
	// Path of the file to create; "" makes a temporary file in Dir that is
	// removed afterwards.
	Path string
	// Dir for the temporary file; default os.TempDir().
	Dir string
	// Create, when set, creates the file at Path instead of engine.Create
	// (scctl passes one for s3:// URLs); done closes the File and whatever
	// Create opened beneath it. Path must then be set.
	Create func(path string, opts *engine.Options) (f *engine.File, done func() error, err error) `json:"-"`
	// Datasets to append to. Default 4.
	Datasets int
	// Writers is the number of writer goroutines. Default 4.
	Writers int
	// Readers is the number of reader goroutines that follow the writers and
	// verify every frame. Default 2; -1 means none (write only).
	Readers int
	// Frames per dataset. Default 512.
	Frames int
	// Height and Width of a frame in elements (uint16). Default 256×256;
	// at least 8 elements in all, because a frame carries its own header.
	Height, Width int
	// InnerHeight and InnerWidth, when set, store each frame as a
	// sharded chunk of inner chunks of that size (engine.DatasetSpec.
	// InnerChunk), each dividing the frame's. Default 0: unsharded.
	InnerHeight, InnerWidth int
	// Filters is the pipeline. Nil means shuffle + zstd level 1; use
	// an empty non-nil slice for none.
	Filters []engine.Filter
	// CacheBytes is the shared cache's quiescent budget. Default 32 MiB,
	// well below the default run's 256 MiB so that eviction happens.
	CacheBytes int64
	// Adaptive, when Enabled, lets the cache resize itself between
	// Adaptive.MinBytes and MaxBytes (cache.AdaptiveConfig; CacheBytes is
	// the initial size). Default off.
	Adaptive cache.AdaptiveConfig
	// Progress, when set, is called about ten times a second and once at
	// the end, from one goroutine.
	Progress func(IngestProgress)
	// BeforeFlush, when set, is called once the writers and readers are
	// done and before the final Flush, with the cache still full (scctl
	// ingest -memprofile takes its heap profile there).
	BeforeFlush func()
}

// Validate reports whether c (after defaults) is usable.
func (c IngestConfig) Validate() error {
	d := c.withDefaults()
	switch {
	case c.Create != nil && c.Path == "":
		return fmt.Errorf("bench: ingest: Create needs a Path")
	case d.Datasets < 1 || d.Datasets > 1<<16:
		return fmt.Errorf("bench: ingest: datasets %d (1..65536)", c.Datasets)
	case d.Writers < 1 || d.Writers > 4096:
		return fmt.Errorf("bench: ingest: writers %d (1..4096)", c.Writers)
	case d.Readers < -1 || d.Readers > 4096:
		return fmt.Errorf("bench: ingest: readers %d (-1..4096)", c.Readers)
	case d.Frames < 1 || d.Frames > 1<<30:
		return fmt.Errorf("bench: ingest: frames %d", c.Frames)
	case d.Height < 1 || d.Width < 1 || d.Height*d.Width < 8 || d.Height*d.Width > 1<<28:
		return fmt.Errorf("bench: ingest: frame %dx%d (at least 8 elements)", d.Height, d.Width)
	case (d.InnerHeight == 0) != (d.InnerWidth == 0) || d.InnerHeight < 0 || d.InnerWidth < 0 ||
		d.InnerHeight > 0 && (d.Height%d.InnerHeight != 0 || d.Width%d.InnerWidth != 0):
		return fmt.Errorf("bench: ingest: inner chunk %dx%d does not divide the frame %dx%d", d.InnerHeight, d.InnerWidth, d.Height, d.Width)
	case d.CacheBytes < 0:
		return fmt.Errorf("bench: ingest: cache bytes %d", c.CacheBytes)
	}
	if err := (cache.Config{QuiescentBytes: d.CacheBytes, Adaptive: c.Adaptive}).Validate(); err != nil {
		return fmt.Errorf("bench: ingest: %w", err)
	}
	return nil
}

func (c IngestConfig) withDefaults() IngestConfig {
	if c.Datasets == 0 {
		c.Datasets = 4
	}
	if c.Writers == 0 {
		c.Writers = 4
	}
	if c.Readers == 0 {
		c.Readers = 2
	}
	if c.Frames == 0 {
		c.Frames = 512
	}
	if c.Height == 0 {
		c.Height = 256
	}
	if c.Width == 0 {
		c.Width = 256
	}
	if c.Filters == nil {
		c.Filters = []engine.Filter{engine.Shuffle(), engine.Zstd(1)}
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 32 << 20
	}
	return c
}

// IngestProgress is a snapshot handed to IngestConfig.Progress.
type IngestProgress struct {
	FramesWritten  int64
	FramesVerified int64
	FramesTotal    int64
	BytesWritten   int64
	Elapsed        time.Duration
	ResidentBytes  int64
	CacheBytes     int64 // the cache's quiescent size in force (adaptive sizing moves it)
	Done           bool
}

// IngestResult is what an ingest run measured.
type IngestResult struct {
	Path           string        `json:"path"`
	Datasets       int           `json:"datasets"`
	Writers        int           `json:"writers"`
	Readers        int           `json:"readers"`
	Frames         int           `json:"frames_per_dataset"`
	FrameBytes     int64         `json:"frame_bytes"`
	Filters        string        `json:"filters"`
	BytesWritten   int64         `json:"bytes_written"`
	BytesRead      int64         `json:"bytes_read"`
	FramesVerified int64         `json:"frames_verified"`
	WriteTime      time.Duration `json:"write_ns"`  // first write to end of Flush
	AppendTime     time.Duration `json:"append_ns"` // first write to last write returned
	FlushTime      time.Duration `json:"flush_ns"`  // the final Flush alone
	ReadTime       time.Duration `json:"read_ns"`   // first read to last verified frame
	TotalTime      time.Duration `json:"total_ns"`  // create to close
	WriteMBps      float64       `json:"write_mib_per_s"`
	ReadMBps       float64       `json:"read_mib_per_s"`
	StoredBytes    int64         `json:"stored_bytes"` // file size after close
	Hits           int64         `json:"hits"`
	Misses         int64         `json:"misses"`
	HitRatio       float64       `json:"hit_ratio"`
	Evictions      int64         `json:"evictions"`
	DirtyEvictions int64         `json:"dirty_evictions"`
	SpaceWaits     int64         `json:"space_waits"`
	PeakResident   int64         `json:"peak_resident_bytes"`
	PeakHeap       int64         `json:"peak_heap_bytes"`
	CacheQuiescent int64         `json:"cache_quiescent_bytes"`
	CacheActive    int64         `json:"cache_active_limit_bytes"`
	// CacheSizes is the cache's size over time (adaptive_ingest.go).
	CacheSizes []SizeSample `json:"cache_sizes"`
	Resizes    int64        `json:"resizes"`
}

// FilterNames renders a pipeline as scctl ingest's --filter flag reads it.
func FilterNames(fs []engine.Filter) string {
	if len(fs) == 0 {
		return "none"
	}
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, "+")
}

// frameMagic opens every frame so that a frame read from the wrong place
// is told apart from a damaged one.
const frameMagic = 0x5343

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FillFrame writes frame index of dataset ds into b (2×n bytes for n
// uint16 elements): a header (magic, dataset, index as two halves), a
// smooth detector-like image with a little noise (so that compressors have
// realistic work), and a CRC32C of everything before it in the last two
// elements. Every frame therefore describes and checks itself.
func FillFrame(b []byte, ds, index int) {
	n := len(b) / 2
	binary.LittleEndian.PutUint16(b[0:], frameMagic)
	binary.LittleEndian.PutUint16(b[2:], uint16(ds))
	binary.LittleEndian.PutUint16(b[4:], uint16(index))
	binary.LittleEndian.PutUint16(b[6:], uint16(index>>16))
	// Four elements at a time, in the lanes of a uint64, with the noise
	// from one xorshift64 step: a step and a store per element made
	// generating a frame cost as much as shuffling and deflating it, and
	// the ingest benchmarks measured the generator more than the engine.
	const ones, high = 0x0001_0001_0001_0001, 0x8000_8000_8000_8000
	x := uint64(ds)*0x9E3779B97F4A7C15 ^ uint64(index)*0xC2B2AE3D27D4EB4F | 1
	base := uint16(index * 7)
	base4 := uint64(base) * ones
	i := 4
	for ; i+4 <= n-2; i += 4 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		// Lane k: (i>>6)&0x3ff + (i+k)&63 + 3 bits of noise, below 2^11,
		// so no lane carries into the next; base is then added lane by
		// lane modulo 2^16.
		w := uint64((i>>6)&0x3ff+i&63)*ones + 0x0003_0002_0001_0000 + x&(7*ones)
		w = ((w &^ high) + (base4 &^ high)) ^ ((w ^ base4) & high)
		binary.LittleEndian.PutUint64(b[2*i:], w)
	}
	for ; i < n-2; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint16(b[2*i:], base+uint16(i>>6)&0x3ff+uint16(i&63)+uint16(x&7))
	}
	binary.LittleEndian.PutUint32(b[2*(n-2):], crc32.Checksum(b[:2*(n-2)], castagnoli))
}

// VerifyFrame checks a frame filled by FillFrame for dataset ds, index.
func VerifyFrame(b []byte, ds, index int) error {
	n := len(b) / 2
	if n < 8 {
		return fmt.Errorf("%w: frame of %d elements", ErrVerify, n)
	}
	if m := binary.LittleEndian.Uint16(b); m != frameMagic {
		return fmt.Errorf("%w: dataset %d frame %d: magic %#x", ErrVerify, ds, index, m)
	}
	gd := int(binary.LittleEndian.Uint16(b[2:]))
	gi := int(binary.LittleEndian.Uint16(b[4:])) | int(binary.LittleEndian.Uint16(b[6:]))<<16
	if gd != ds&0xffff || gi != index {
		return fmt.Errorf("%w: dataset %d frame %d holds dataset %d frame %d", ErrVerify, ds, index, gd, gi)
	}
	want := binary.LittleEndian.Uint32(b[2*(n-2):])
	if got := crc32.Checksum(b[:2*(n-2)], castagnoli); got != want {
		return fmt.Errorf("%w: dataset %d frame %d: checksum %#x, want %#x", ErrVerify, ds, index, got, want)
	}
	return nil
}

// heapSampler tracks the peak of live Go heap objects. runtime/metrics is
// read without stopping the world, so sampling at 20 Hz does not disturb
// the run being measured.
type heapSampler struct {
	s    []metrics.Sample
	peak int64
}

func newHeapSampler() *heapSampler {
	return &heapSampler{s: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

func (h *heapSampler) sample() int64 {
	metrics.Read(h.s)
	v := int64(h.s[0].Value.Uint64())
	if v > h.peak {
		h.peak = v
	}
	return v
}

// ingestDataset is one dataset of the job with what writers and readers
// share about it.
type ingestDataset struct {
	ds *engine.Dataset
	// done[i] is set once frame i's Write returned.
	done []atomic.Bool
	// grow serializes extent changes; extent is the extent in frames.
	grow struct {
		sync.Mutex
		extent int
	}
}

// growBatch is how many frames an extent change adds at once: extending
// drains the dataset's requests in flight, so doing it per frame would
// serialize the writers.
const growBatch = 32

func (d *ingestDataset) ensure(ctx context.Context, frame, limit, h, w int) error {
	d.grow.Lock()
	defer d.grow.Unlock()
	if frame < d.grow.extent {
		return nil
	}
	n := min(limit, frame+growBatch)
	if err := d.ds.SetExtent(ctx, []uint64{uint64(n), uint64(h), uint64(w)}); err != nil {
		return err
	}
	d.grow.extent = n
	return nil
}

// Ingest runs the ingest job and reports what it measured.
//
// Work split: frame j of the whole run (j = 0..Datasets×Frames-1) goes to
// dataset j mod Datasets as its frame j div Datasets; writers take j from a
// shared counter, so every dataset is appended to by several writers at
// once. Reader r follows datasets r, r+Readers, ...: it reads each frame as
// soon as its write has returned and verifies it, so every frame is
// verified once while the writers still run.
func Ingest(ctx context.Context, cfg IngestConfig) (res *IngestResult, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	path := cfg.Path
	if path == "" {
		dir := cfg.Dir
		if dir == "" {
			dir = os.TempDir()
		}
		fh, err := os.CreateTemp(dir, "scc-ingest-*.scc")
		if err != nil {
			return nil, err
		}
		path = fh.Name()
		fh.Close()
		defer os.Remove(path)
	}
	c, err := cache.New(cache.Config{QuiescentBytes: cfg.CacheBytes, Adaptive: cfg.Adaptive})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	heap := newHeapSampler()
	heap.sample()
	t0 := time.Now()
	create := cfg.Create
	if create == nil {
		create = func(path string, opts *engine.Options) (*engine.File, func() error, error) {
			f, err := engine.Create(ctx, path, opts)
			if err != nil {
				return nil, nil, err
			}
			return f, func() error { return f.Close(ctx) }, nil
		}
	}
	f, done, err := create(path, &engine.Options{Cache: c})
	if err != nil {
		return nil, err
	}
	defer func() {
		if f != nil {
			done()
		}
	}()
	h, w := cfg.Height, cfg.Width
	frameBytes := int64(h * w * 2)
	dss := make([]*ingestDataset, cfg.Datasets)
	for i := range dss {
		ds, err := f.CreateDataset(ctx, fmt.Sprintf("frames%03d", i), engine.DatasetSpec{
			Type:     engine.Uint16,
			Shape:    []uint64{0, uint64(h), uint64(w)},
			MaxShape: []uint64{engine.Unlimited, uint64(h), uint64(w)},
			Chunk:    []uint64{1, uint64(h), uint64(w)},
			Filters:  cfg.Filters,
			InnerChunk: func() []uint64 {
				if cfg.InnerHeight == 0 {
					return nil
				}
				return []uint64{1, uint64(cfg.InnerHeight), uint64(cfg.InnerWidth)}
			}(),
		})
		if err != nil {
			return nil, err
		}
		dss[i] = &ingestDataset{ds: ds, done: make([]atomic.Bool, cfg.Frames)}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next             atomic.Int64
		written, checked atomic.Int64
		readBytes        atomic.Int64
		errOnce          sync.Once
		firstErr         error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	total := int64(cfg.Datasets) * int64(cfg.Frames)

	var writersWG, readersWG sync.WaitGroup
	wStart := time.Now()
	for wi := 0; wi < cfg.Writers; wi++ {
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			buf := make([]byte, frameBytes)
			for {
				j := next.Add(1) - 1
				if j >= total || ctx.Err() != nil {
					return
				}
				d, fr := int(j%int64(cfg.Datasets)), int(j/int64(cfg.Datasets))
				ids := dss[d]
				if err := ids.ensure(ctx, fr, cfg.Frames, h, w); err != nil {
					fail(fmt.Errorf("extend dataset %d: %w", d, err))
					return
				}
				FillFrame(buf, d, fr)
				sel := engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, uint64(h), uint64(w)})
				if err := ids.ds.Write(ctx, sel, buf); err != nil {
					fail(fmt.Errorf("write dataset %d frame %d: %w", d, fr, err))
					return
				}
				ids.done[fr].Store(true)
				written.Add(1)
			}
		}()
	}
	var rStart time.Time
	var rEnd atomic.Int64 // unix nanos of the last verified frame
	if cfg.Readers > 0 {
		rStart = time.Now()
		for ri := 0; ri < cfg.Readers; ri++ {
			var mine []int
			for d := ri; d < cfg.Datasets; d += cfg.Readers {
				mine = append(mine, d)
			}
			if len(mine) == 0 {
				continue
			}
			readersWG.Add(1)
			go func() {
				defer readersWG.Done()
				buf := make([]byte, frameBytes)
				pos := make([]int, len(mine))
				left := len(mine) * cfg.Frames
				for left > 0 {
					progressed := false
					for k, d := range mine {
						ids := dss[d]
						for pos[k] < cfg.Frames && ids.done[pos[k]].Load() {
							if ctx.Err() != nil {
								return
							}
							fr := pos[k]
							sel := engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, uint64(h), uint64(w)})
							if err := ids.ds.Read(ctx, sel, buf); err != nil {
								fail(fmt.Errorf("read dataset %d frame %d: %w", d, fr, err))
								return
							}
							if err := VerifyFrame(buf, d, fr); err != nil {
								fail(err)
								return
							}
							readBytes.Add(frameBytes)
							checked.Add(1)
							pos[k]++
							left--
							progressed = true
						}
					}
					if ctx.Err() != nil {
						return
					}
					if !progressed {
						// The writers are behind: poll again shortly rather
						// than spin on a core they need.
						time.Sleep(200 * time.Microsecond)
					}
				}
				now := time.Now().UnixNano()
				for {
					old := rEnd.Load()
					if old >= now || rEnd.CompareAndSwap(old, now) {
						break
					}
				}
			}()
		}
	}

	// Progress and heap sampling until the writers and readers are done.
	allDone := make(chan struct{})
	go func() { writersWG.Wait(); readersWG.Wait(); close(allDone) }()
	var sizes sizeSampler
	report := func(done bool) {
		heap.sample()
		st := c.Stats()
		sizes.add(time.Since(t0), st)
		if cfg.Progress != nil {
			cfg.Progress(IngestProgress{
				FramesWritten: written.Load(), FramesVerified: checked.Load(), FramesTotal: total,
				BytesWritten: written.Load() * frameBytes, Elapsed: time.Since(t0),
				ResidentBytes: st.ResidentBytes, CacheBytes: st.QuiescentLimit, Done: done,
			})
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	n := 0
loop:
	for {
		select {
		case <-allDone:
			break loop
		case <-tick.C:
			heap.sample()
			if n++; n%2 == 0 {
				report(false)
			}
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	aTime := time.Since(wStart)
	if cfg.BeforeFlush != nil {
		cfg.BeforeFlush()
	}
	if err := f.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	wTime := time.Since(wStart)
	heap.sample()
	st := c.Stats()
	err = done()
	f = nil
	if err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	total_ := time.Since(t0)
	report(true)
	res = &IngestResult{
		Path: path, Datasets: cfg.Datasets, Writers: cfg.Writers, Readers: max(cfg.Readers, 0),
		Frames: cfg.Frames, FrameBytes: frameBytes, Filters: FilterNames(cfg.Filters),
		BytesWritten: written.Load() * frameBytes, BytesRead: readBytes.Load(),
		FramesVerified: checked.Load(), WriteTime: wTime, TotalTime: total_,
		AppendTime: aTime, FlushTime: wTime - aTime,
		Hits: st.Hits, Misses: st.Misses, Evictions: st.Evictions, DirtyEvictions: st.DirtyEvictions,
		SpaceWaits: st.SpaceWaits, PeakResident: st.PeakResidentBytes, PeakHeap: heap.peak,
		CacheQuiescent: st.QuiescentLimit, CacheActive: st.ActiveLimit,
		CacheSizes: sizes.samples, Resizes: st.Resizes,
	}
	if cfg.Path == "" {
		res.Path = ""
	}
	if fi, err := os.Stat(path); err == nil {
		res.StoredBytes = fi.Size()
	}
	if st.Hits+st.Misses > 0 {
		res.HitRatio = float64(st.Hits) / float64(st.Hits+st.Misses)
	}
	res.WriteMBps = mibps(res.BytesWritten, wTime)
	if cfg.Readers > 0 && rEnd.Load() != 0 {
		res.ReadTime = time.Unix(0, rEnd.Load()).Sub(rStart)
		res.ReadMBps = mibps(res.BytesRead, res.ReadTime)
	}
	if want := total; cfg.Readers > 0 && res.FramesVerified != want {
		return res, fmt.Errorf("%w: verified %d of %d frames", ErrVerify, res.FramesVerified, want)
	}
	return res, nil
}

// tempDir makes a scenario's scratch directory under o.Dir.
func tempDir(o Options, name string) (string, func(), error) {
	base := o.Dir
	if base == "" {
		base = os.TempDir()
	}
	d, err := os.MkdirTemp(base, "scc-bench-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
