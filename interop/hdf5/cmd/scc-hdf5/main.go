// Command scc-hdf5 exports scc files to HDF5 and imports HDF5 files into
// scc, through the HDF5 C library (package interop/hdf5). It is a separate
// binary, in the cgo module interop/hdf5, so that scctl stays pure Go;
// scctl's "hdf5" command runs it.
//
//	scc-hdf5 export [flags] FILE.scc OUT.h5   OUT.h5 must not exist (-force: replace it)
//	scc-hdf5 import [flags] IN.h5 FILE.scc    FILE.scc is created if missing,
//	                                          merged into if not (-force: replaced)
//
// Both are all or nothing: the result is written under a temporary name
// beside the destination and renamed into place when complete; a failure
// (or an interrupt) leaves the destination as it was.
//
// It prints one line per dataset: how its chunks moved (raw, rewrapped,
// re-encoded and why), chunk counts and bytes, and one line per dataset
// or group it skipped (import: a type, filter, layout or name scc cannot
// take; export: a name HDF5 cannot hold as it is) with the reason, then
// the counts. Exit status: 0 success (skipped datasets
// included, unless -strict), 1 failure, 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/scc-dev/scc/engine"
	hdf5 "github.com/scc-dev/scc/interop/hdf5"
)

func main() {
	// An interrupt or a kill ends the context, and the temporary file
	// of the import or export in progress is removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		fmt.Fprintln(stderr, "usage: scc-hdf5 export [flags] FILE.scc OUT.h5\n       scc-hdf5 import [flags] IN.h5 FILE.scc")
		return 2
	}
	err := command(ctx, args[0], args[1:], stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "scc-hdf5 %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "scc-hdf5 %s: %v\n", args[0], err)
		return 1
	}
}

func command(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scc-hdf5 "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts hdf5.Options
	datasets := fs.String("datasets", "", "comma-separated dataset names to move (default: all)")
	fs.IntVar(&opts.Workers, "workers", 0, "goroutines doing per-chunk work (default GOMAXPROCS)")
	fs.IntVar(&opts.DeflateLevel, "level", 0, "deflate level where chunks are re-encoded, 1..9 (default 1)")
	chunk := fs.String("chunk", "", "import: scc chunk shape for unchunked HDF5 datasets, e.g. 64,1024")
	fs.BoolVar(&opts.Replace, "force", false, "replace the destination if it exists (import: instead of adding to it)")
	fs.BoolVar(&opts.Strict, "strict", false, "fail, moving nothing, if any dataset would be skipped (export: for its name)")
	fs.BoolVar(&opts.SkipSources, "skip-sources", false, "export: leave out the scc files virtual datasets map (by default each is exported beside OUT.h5 as the mapping names it, .scc replaced by .h5)")
	fs.BoolVar(&opts.Verify, "verify", false, "import: decode every copied chunk once before storing it (deflate chunks are otherwise stored uninflated; their Adler-32 is checked on every read)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: want 2 paths, got %d", errUsage, fs.NArg())
	}
	if *datasets != "" {
		opts.Datasets = strings.Split(*datasets, ",")
	}
	if *chunk != "" {
		for _, s := range strings.Split(*chunk, ",") {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: chunk %q: %v", errUsage, *chunk, err)
			}
			opts.Chunk = append(opts.Chunk, n)
		}
	}
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var rep hdf5.Report
	var err error
	if verb == "export" {
		var f *engine.File
		if f, err = engine.Open(ctx, fs.Arg(0), &engine.Options{ReadOnly: true}); err != nil {
			return err
		}
		rep, err = hdf5.Export(ctx, f, fs.Arg(1), &opts)
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
	} else {
		rep, err = hdf5.ImportFile(ctx, fs.Arg(0), fs.Arg(1), &opts)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep)
	if verb == "import" {
		fmt.Fprintf(stdout, "%d datasets imported, %d skipped\n", len(rep.Datasets), len(rep.Skipped))
	}
	secs := rep.Elapsed.Seconds()
	if secs > 0 {
		fmt.Fprintf(stdout, "%d datasets, %.1f MiB logical in %.2fs (%.0f MiB/s)\n", len(rep.Datasets), float64(rep.LogicalBytes())/(1<<20), secs, float64(rep.LogicalBytes())/(1<<20)/secs)
	}
	return nil
}
