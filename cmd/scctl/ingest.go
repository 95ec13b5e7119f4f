package main

import (
	"context"
	"encoding/json"
	"errors"
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
)

func init() {
	register("ingest", "concurrent ingest: writers append frames, readers verify them (make demo)", cmdIngest)
}

// cmdIngest runs the ingest job (bench.Ingest). With no flags it runs the
// embedded default behind `make demo`: 4 datasets, 4 writers, 2 readers,
// 512 frames of 256×256 uint16 each, shuffle+zstd level 1, a 32 MiB cache,
// on a temporary file.
func cmdIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, asJSON, quiet, memProfile, err := parseIngest(args, stderr)
	if err != nil {
		return err
	}
	if !quiet {
		cfg.Progress = progressBar(stderr)
	}
	if memProfile != "" {
		// Every allocation, so the profile's alloc_space shows where the
		// garbage the collector lets pile up comes from.
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 64 << 10
		defer func() { runtime.MemProfileRate = old }()
	}
	var profErr error
	if memProfile != "" {
		// With the cache full: inuse_space is what the process holds at
		// its fullest, alloc_space the garbage made until then.
		cfg.BeforeFlush = func() { profErr = writeHeapProfile(memProfile) }
	}
	// The job commits once, with its final Flush. Closing never commits:
	// a job that failed (a write, a read's check, an interrupt, the
	// flush itself) leaves the file as its last commit left it instead of
	// committing whatever part of the frames it got to. (Without --file
	// the job's temporary file is removed anyway.)
	create := func(path string, opts *engine.Options) (*engine.File, func() error, error) {
		f, done, err := createPath(ctx, path, opts)
		if err != nil {
			return nil, nil, err
		}
		return f, func() error {
			stop, cancel := context.WithCancel(context.Background())
			cancel()
			if err := f.CloseContext(stop); err != nil && !errors.Is(err, context.Canceled) {
				done()
				return err
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
	if n, ok := s3Size(ctx, cfg.Path); ok {
		// bench measures a local file's size; an object's is the driver's.
		res.StoredBytes = n
	}
	if profErr != nil {
		return profErr
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return ingestSummary(stdout, res)
}

// parseIngest turns ingest's flags into a job configuration.
func parseIngest(args []string, stderr io.Writer) (cfg bench.IngestConfig, asJSON, quiet bool, memProfile string, err error) {
	fs := newFlags("ingest", "[flags]", stderr)
	fs.IntVar(&cfg.Datasets, "datasets", 4, "datasets to append to")
	fs.IntVar(&cfg.Writers, "writers", 4, "writer goroutines")
	fs.IntVar(&cfg.Readers, "readers", 2, "reader goroutines verifying every frame (0 for none)")
	fs.IntVar(&cfg.Frames, "frames", 512, "frames per dataset")
	frame := fs.String("frame", "256x256", "frame size HEIGHTxWIDTH in uint16 elements")
	filters := fs.String("filter", "shuffle+zstd1", "filter pipeline: shuffle, zstdN, deflateN, lz4, crc32c joined by +, or none")
	cacheSize := fs.String("cache", "32MiB", "shared cache budget (quiescent bytes; with --adaptive the initial size)")
	adaptive := fs.Bool("adaptive", false, "let the cache resize itself to the working set (cache.AdaptiveConfig defaults: --cache/4 .. --cache×4)")
	adaptiveMax := fs.String("adaptive-max", "", "with --adaptive: the largest size (default 4 × --cache)")
	fs.StringVar(&cfg.Path, "file", "", "file to create and keep, a path or an s3://bucket/key URL (default: a temporary file, removed)")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&quiet, "quiet", false, "no progress bar")
	fs.StringVar(&memProfile, "memprofile", "", "write a heap profile to this file once the frames are written, before the final flush (the collection it starts perturbs peak Go heap)")
	pos, err := parse(fs, args)
	if err != nil {
		return cfg, false, false, "", err
	}
	if len(pos) != 0 {
		return cfg, false, false, "", usageErr("unexpected arguments %q", pos)
	}
	// Zero means "default" to bench.IngestConfig; on the command line
	// it is a mistake (except --readers 0: none).
	if cfg.Datasets < 1 || cfg.Writers < 1 || cfg.Frames < 1 || cfg.Readers < 0 {
		return cfg, false, false, "", usageErr("--datasets, --writers and --frames must be at least 1, --readers at least 0")
	}
	if cfg.Readers == 0 {
		cfg.Readers = -1
	}
	h, w, ok := strings.Cut(strings.ToLower(*frame), "x")
	if cfg.Height, err = strconv.Atoi(h); !ok || err != nil {
		return cfg, false, false, "", usageErr("--frame %q: want HEIGHTxWIDTH", *frame)
	}
	if cfg.Width, err = strconv.Atoi(w); err != nil {
		return cfg, false, false, "", usageErr("--frame %q: want HEIGHTxWIDTH", *frame)
	}
	if cfg.Filters, err = bench.ParseFilters(*filters); err != nil {
		return cfg, false, false, "", usageErr("%v", err)
	}
	if cfg.CacheBytes, err = bench.ParseBytes(*cacheSize); err != nil || cfg.CacheBytes == 0 {
		return cfg, false, false, "", usageErr("--cache %q: want a size such as 32MiB", *cacheSize)
	}
	if *adaptiveMax != "" && !*adaptive {
		return cfg, false, false, "", usageErr("--adaptive-max needs --adaptive")
	}
	if *adaptive {
		cfg.Adaptive.Enabled = true
		if *adaptiveMax != "" {
			if cfg.Adaptive.MaxBytes, err = bench.ParseBytes(*adaptiveMax); err != nil || cfg.Adaptive.MaxBytes == 0 {
				return cfg, false, false, "", usageErr("--adaptive-max %q: want a size such as 128MiB", *adaptiveMax)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, false, false, "", usageErr("%v", err)
	}
	return cfg, asJSON, quiet, memProfile, nil
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

func ingestSummary(w io.Writer, r *bench.IngestResult) error {
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
