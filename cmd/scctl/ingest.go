package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

func init() {
	register("ingest", "concurrent ingest: writers append frames, readers verify them (make demo)", cmdIngest)
}

// cmdIngest runs the ingest job (bench.Ingest). With no flags it runs the
// embedded default behind `make demo`: 4 datasets, 4 writers, 2 readers,
// 512 frames of 256×256 uint16 each, shuffle+zstd level 1, a 32 MiB cache,
// on a temporary file.
func cmdIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseIngest(args, stderr)
	if err != nil {
		return err
	}
	if o.procs > 0 {
		return ingestProcs(ctx, o, stdout, stderr)
	}
	cfg := o.cfg
	if !o.quiet {
		cfg.Progress = progressBar(stderr)
	}
	if o.memProfile != "" {
		// Every allocation, so the profile's alloc_space shows where the
		// garbage the collector lets pile up comes from.
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 64 << 10
		defer func() { runtime.MemProfileRate = old }()
	}
	var profErr error
	if o.memProfile != "" {
		// With the cache full: inuse_space is what the process holds at
		// its fullest, alloc_space the garbage made until then.
		cfg.BeforeFlush = func() { profErr = writeHeapProfile(o.memProfile) }
	}
	if o.image && cfg.Path == "" {
		// The image is written by our close (below), which bench only
		// calls on a path we name: make the temporary file here.
		fh, err := os.CreateTemp("", "scc-ingest-*.scc")
		if err != nil {
			return err
		}
		cfg.Path = fh.Name()
		fh.Close()
		defer os.Remove(cfg.Path)
	}
	var image *engine.ImageInfo
	// The job commits once, with its final Flush. Closing commits only
	// to write the cache image (-image), and only after that Flush
	// committed: a job that failed (a write, a read's check, an
	// interrupt, the flush itself) leaves the file as its last commit left
	// it instead of committing whatever part of the frames it got to.
	// (Without --file the job's temporary file is removed anyway.)
	create := func(path string, opts *engine.Options) (*engine.File, func() error, error) {
		if o.image {
			withImage := *opts
			withImage.Image = engine.ImageOptions{Generate: true}
			opts = &withImage
		}
		f, done, err := createPath(ctx, path, opts)
		if err != nil {
			return nil, nil, err
		}
		created := f.Generation()
		return f, func() error {
			commit := o.image && f.Generation() != created
			closeCtx := ctx
			if !commit {
				stop, cancel := context.WithCancel(context.Background())
				cancel()
				closeCtx = stop
			}
			if err := f.Close(closeCtx); err != nil && (commit || !errors.Is(err, context.Canceled)) {
				done()
				return err
			}
			if commit {
				info := f.ImageInfo()
				image = &info
			}
			return done()
		}, nil
	}
	if cfg.Path != "" {
		cfg.Create = create
	}
	res, err := bench.Ingest(ctx, cfg)
	if err != nil {
		return err
	}
	if o.image && o.cfg.Path == "" {
		res.Path = ""
	}
	if n, ok := s3Size(ctx, cfg.Path); ok {
		// bench measures a local file's size; an object's is the driver's.
		res.StoredBytes = n
	}
	if profErr != nil {
		return profErr
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ingestJSON{res, image})
	}
	return ingestSummary(stdout, res, image)
}

// ingestJSON is ingest's --json output: bench's result and, with -image,
// the cache image the close wrote.
type ingestJSON struct {
	*bench.IngestResult
	Image *engine.ImageInfo `json:"image,omitempty"`
}

// ingestOpts is what ingest's flags ask for.
type ingestOpts struct {
	cfg        bench.IngestConfig
	json       bool
	quiet      bool
	image      bool
	memProfile string
	// procs > 0: the multi-process job (ingest_procs.go).
	procs int
}

// filterHelp names every filter ingest accepts, as parseFilters reads them.
const filterHelp = `filter pipeline, stages joined by + (or ","), or none:
shuffle; deflateN (raw DEFLATE) and zlibN (zlib-framed DEFLATE, the form HDF5
and Zarr store), N 1..9; zstdN at one of zstd's levels, N -131072..22 (0 for
zstd's default, 3; negative for the fast levels: zstd-5 or zstd(-5)); lz4;
crc32c (a checksum stage). A level left out is 1.`

// parseIngest turns ingest's flags into a job configuration.
func parseIngest(args []string, stderr io.Writer) (o ingestOpts, err error) {
	cfg := &o.cfg
	fs := newFlags("ingest", "[flags]\n\nWriters append frames to datasets of one file through a shared cache while\nreaders follow and verify every frame; prints throughput and cache figures.\n\n"+
		fileHelp, stderr)
	fs.IntVar(&cfg.Datasets, "datasets", 4, "datasets to append to")
	fs.IntVar(&cfg.Writers, "writers", 4, "writer goroutines")
	fs.IntVar(&cfg.Readers, "readers", 2, "reader goroutines verifying every frame (0 for none)")
	fs.IntVar(&cfg.Frames, "frames", 512, "frames per dataset")
	frame := fs.String("frame", "256x256", "frame size HEIGHTxWIDTH in uint16 elements")
	innerChunk := fs.String("inner-chunk", "", "store each frame as a sharded chunk of inner chunks HEIGHTxWIDTH, each dividing the frame's (default: unsharded)")
	filters := fs.String("filter", "shuffle+zstd1", filterHelp)
	cacheSize := fs.String("cache", "32MiB", "shared cache budget (quiescent bytes; with --adaptive the initial size)")
	adaptive := fs.Bool("adaptive", false, "let the cache resize itself to the working set (cache.AdaptiveConfig defaults: --cache/4 .. --cache×4)")
	adaptiveMax := fs.String("adaptive-max", "", "with --adaptive: the largest size (default 4 × --cache)")
	fs.StringVar(&cfg.Path, "file", "", "`FILE` to create and keep, a local path or an s3://bucket/key URL (default: a temporary file, removed)")
	fs.BoolVar(&o.image, "image", false, "write a cache image when the file is closed after a successful job (engine.ImageOptions{Generate: true}), so the next open starts warm; the summary reports its size")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	fs.StringVar(&o.memProfile, "memprofile", "", "write a heap profile to this file once the frames are written, before the final flush (the collection it starts perturbs peak Go heap)")
	fs.IntVar(&o.procs, "procs", 0, "`N` writer processes instead: each appends --frames frames to its own file (frame g of the whole to writer g%N), a virtual dataset made up front stitches them into one array in frame order, and the job reads it back and verifies every frame at the end; --file names the virtual dataset's file, the writers' files go beside it")
	pos, err := parse(fs, args)
	if err != nil {
		return ingestOpts{}, err
	}
	if len(pos) != 0 {
		return ingestOpts{}, usageErr("unexpected arguments %q", pos)
	}
	if o.procs < 0 {
		return ingestOpts{}, usageErr("--procs must be at least 0")
	}
	if o.procs > 0 {
		// Flags of the one-file job mean nothing to the writer
		// processes: refused rather than ignored.
		var bad []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "datasets", "writers", "readers", "adaptive", "adaptive-max", "image", "memprofile", "inner-chunk":
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			return ingestOpts{}, usageErr("--procs does not take %s", strings.Join(bad, ", "))
		}
	}
	// Zero means "default" to bench.IngestConfig; on the command line
	// it is a mistake (except --readers 0: none).
	if cfg.Datasets < 1 || cfg.Writers < 1 || cfg.Frames < 1 || cfg.Readers < 0 {
		return ingestOpts{}, usageErr("--datasets, --writers and --frames must be at least 1, --readers at least 0")
	}
	if cfg.Readers == 0 {
		cfg.Readers = -1
	}
	h, w, ok := strings.Cut(strings.ToLower(*frame), "x")
	if cfg.Height, err = strconv.Atoi(h); !ok || err != nil {
		return ingestOpts{}, usageErr("--frame %q: want HEIGHTxWIDTH", *frame)
	}
	if cfg.Width, err = strconv.Atoi(w); err != nil {
		return ingestOpts{}, usageErr("--frame %q: want HEIGHTxWIDTH", *frame)
	}
	if *innerChunk != "" {
		h, w, ok := strings.Cut(strings.ToLower(*innerChunk), "x")
		if cfg.InnerHeight, err = strconv.Atoi(h); !ok || err != nil || cfg.InnerHeight < 1 {
			return ingestOpts{}, usageErr("--inner-chunk %q: want HEIGHTxWIDTH", *innerChunk)
		}
		if cfg.InnerWidth, err = strconv.Atoi(w); err != nil || cfg.InnerWidth < 1 {
			return ingestOpts{}, usageErr("--inner-chunk %q: want HEIGHTxWIDTH", *innerChunk)
		}
	}
	if cfg.Filters, err = parseFilters(*filters); err != nil {
		return ingestOpts{}, usageErr("--filter: %v", err)
	}
	if cfg.CacheBytes, err = bench.ParseBytes(*cacheSize); err != nil || cfg.CacheBytes == 0 {
		return ingestOpts{}, usageErr("--cache %q: want a size such as 32MiB", *cacheSize)
	}
	if *adaptiveMax != "" && !*adaptive {
		return ingestOpts{}, usageErr("--adaptive-max needs --adaptive")
	}
	if *adaptive {
		cfg.Adaptive.Enabled = true
		if *adaptiveMax != "" {
			if cfg.Adaptive.MaxBytes, err = bench.ParseBytes(*adaptiveMax); err != nil || cfg.Adaptive.MaxBytes == 0 {
				return ingestOpts{}, usageErr("--adaptive-max %q: want a size such as 128MiB", *adaptiveMax)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return ingestOpts{}, usageErr("%v", err)
	}
	return o, nil
}

// filterNames are the stages parseFilters knows, with whether each takes
// a level.
var filterNames = []struct {
	name  string
	level bool
	make  func(level int) engine.Filter
}{
	{"shuffle", false, func(int) engine.Filter { return engine.Shuffle() }},
	{"deflate", true, engine.Deflate},
	{"zlib", true, engine.Zlib},
	{"zstd", true, engine.Zstd},
	{"lz4", false, func(int) engine.Filter { return engine.LZ4() }},
	{"crc32c", false, func(int) engine.Filter { return engine.CRC32C() }},
}

// parseFilters reads a pipeline as filterHelp describes it, and also in
// the form engine.Filter.String prints ("shuffle+zstd(-5)"), so that a
// pipeline ingest reports can be passed back to it. A level is the
// compressor's own: the minus sign of "zstd-5" is a negative level, not
// a separator. The levels are checked by the engine itself (validFilters),
// so a pipeline the engine would refuse is refused here, before the file
// is created.
func parseFilters(s string) ([]engine.Filter, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	out := []engine.Filter{}
	if s == "" || s == "none" {
		return out, nil
	}
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' }) {
		tok = strings.TrimSpace(tok)
		found := false
		for _, n := range filterNames {
			rest, ok := strings.CutPrefix(tok, n.name)
			if !ok {
				continue
			}
			if inner, ok := strings.CutPrefix(rest, "("); ok {
				if rest, ok = strings.CutSuffix(inner, ")"); !ok {
					return nil, fmt.Errorf("%q: unbalanced parenthesis", tok)
				}
			}
			level := 1
			if rest != "" {
				v, err := strconv.Atoi(rest)
				if err != nil || !n.level {
					return nil, fmt.Errorf("unknown filter %q", tok)
				}
				level = v
			}
			out = append(out, n.make(level))
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("unknown filter %q (shuffle, deflateN, zlibN, zstdN, lz4, crc32c, none)", tok)
		}
	}
	if err := validFilters(out); err != nil {
		return nil, err
	}
	return out, nil
}

// validFilters asks the engine whether it takes the pipeline, by creating
// a dataset with it in a file in memory: the engine's rules (level ranges,
// pipeline length) are then the CLI's with no copy of them here.
func validFilters(fs []engine.Filter) error {
	f, err := engine.Create(context.Background(), "", &engine.Options{Driver: vfd.NewMem(), NoSync: true})
	if err != nil {
		return err
	}
	_, err = f.CreateDataset(context.Background(), "probe", engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{1}, Chunk: []uint64{1}, Filters: fs,
	})
	if cerr := f.Close(context.Background()); err == nil {
		err = cerr
	}
	return err
}

// progressBar returns a Progress callback drawing one \r-refreshed line.
func progressBar(w io.Writer) func(bench.IngestProgress) {
	const width = 30
	return func(p bench.IngestProgress) {
		frac := 0.0
		if p.FramesTotal > 0 {
			frac = float64(p.FramesWritten+p.FramesVerified) / float64(2*p.FramesTotal)
			if p.FramesVerified == 0 && p.Done {
				frac = float64(p.FramesWritten) / float64(p.FramesTotal)
			}
		}
		n := int(frac * width)
		bar := strings.Repeat("█", n) + strings.Repeat("░", width-n)
		rate := 0.0
		if s := p.Elapsed.Seconds(); s > 0 {
			rate = float64(p.BytesWritten) / (1 << 20) / s
		}
		fmt.Fprintf(w, "\r%s %3.0f%%  written %d/%d  verified %d  %6.1f MiB/s  resident %-10s cache %-10s %5.1fs",
			bar, frac*100, p.FramesWritten, p.FramesTotal, p.FramesVerified, rate,
			bench.HumanBytes(p.ResidentBytes), bench.HumanBytes(p.CacheBytes), p.Elapsed.Seconds())
		if p.Done {
			fmt.Fprintln(w)
		}
	}
}

// ingestSummary prints the job's result; image, when set, is the cache
// image the close wrote (-image).
func ingestSummary(w io.Writer, r *bench.IngestResult, image *engine.ImageInfo) error {
	fmt.Fprintf(w, "scc ingest: %d datasets × %d frames of %s (uint16), %s, %d writers, %d readers\n\n",
		r.Datasets, r.Frames, bench.HumanBytes(r.FrameBytes), r.Filters, r.Writers, r.Readers)
	row := func(cells ...string) {
		fmt.Fprintf(w, "%-14s %10s %9s %9s   %s\n", cells[0], cells[1], cells[2], cells[3], cells[4])
	}
	row("", "bytes", "time", "MiB/s", "")
	row("written", bench.HumanBytes(r.BytesWritten), dur(r.WriteTime), fmt.Sprintf("%.1f", r.WriteMBps),
		fmt.Sprintf("appends %s + final Flush (fsync) %s", dur(r.AppendTime), dur(r.FlushTime)))
	if r.Readers > 0 {
		row("read+verified", bench.HumanBytes(r.BytesRead), dur(r.ReadTime), fmt.Sprintf("%.1f", r.ReadMBps),
			fmt.Sprintf("%d frames, every one checked", r.FramesVerified))
	}
	ratio := ""
	if r.StoredBytes > 0 {
		ratio = fmt.Sprintf("written/stored = %.2f", float64(r.BytesWritten)/float64(r.StoredBytes))
	}
	row("stored", bench.HumanBytes(r.StoredBytes), "", "", ratio)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "hit ratio\t%.3f\t(%d hits, %d misses)\n", r.HitRatio, r.Hits, r.Misses)
	fmt.Fprintf(tw, "evictions\t%d\t(%d dirty, %d space waits)\n", r.Evictions, r.DirtyEvictions, r.SpaceWaits)
	fmt.Fprintf(tw, "peak resident\t%s\tvs cache limit %s quiescent / %s active\n",
		bench.HumanBytes(r.PeakResident), bench.HumanBytes(r.CacheQuiescent), bench.HumanBytes(r.CacheActive))
	fmt.Fprintf(tw, "cache size\t%d resizes\t(over time, size/resident) %s\n", r.Resizes, bench.SizeTimeline(r.CacheSizes, 8))
	fmt.Fprintf(tw, "peak Go heap\t%s\t\n", bench.HumanBytes(r.PeakHeap))
	fmt.Fprintf(tw, "total\t%s\t(create to close)\n", dur(r.TotalTime))
	if err := tw.Flush(); err != nil {
		return err
	}
	if image != nil {
		if image.Exists {
			fmt.Fprintf(w, "cache image    %s at offset %d, written on close\n", bench.HumanBytes(int64(image.Size)), image.Addr)
		} else {
			fmt.Fprintln(w, "cache image    none: the close wrote no image")
		}
	}
	if r.Path != "" {
		fmt.Fprintf(w, "file           %s\n", r.Path)
	}
	return nil
}

// writeHeapProfile writes the heap profile after a collection, so that
// inuse figures are live bytes.
func writeHeapProfile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
