package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/scc-dev/scc/bench"
)

func init() {
	register("bench", "benchmarks beside HDF5, h5py, zarr, otter and ristretto (NAME|all)", cmdBench)
}

// cmdBench runs bench scenarios and prints the comparison table (or JSON).
// Progress goes to stderr. With --out it also writes report.md,
// report.json, the PNG plots and the BENCHMARKS.md page there; with
// --benchmarks it writes that page to the file named (the repository's
// BENCHMARKS.md is written so). Exit status 1 when a scenario
// failed; a target not met is reported in the table, not as a failure.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "NAME|all [--quick] [--json] [--out DIR] [--benchmarks FILE] [--dir DIR]\n\nscenarios: "+
		strings.Join(bench.Names(), ", "), stderr)
	quick := fs.Bool("quick", false, "small versions (all of them in well under 10 minutes on 2 cores)")
	tiny := fs.Bool("tiny", false, "tiny versions, seconds in all (for tests)")
	full := fs.Bool("full", false, "full size where the default is already small (zarrbench: the 1024³ array)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of Markdown")
	out := fs.String("out", "", "write report.md, report.json, PNG plots and BENCHMARKS.md into this directory")
	page := fs.String("benchmarks", "", "write the BENCHMARKS.md page (machine, date, command, one table per scenario, analysis) to this file")
	dir := fs.String("dir", "", "scratch directory for benchmark files (default the system temp dir); for the s3 scenario an s3://bucket/prefix to run against instead of a private MinIO")
	noPeers := fs.Bool("no-peers", false, "run scc only, as if no peer were installed")
	innerChunk := fs.Int("inner-chunk", 0, "zarrbench's sharded variant: the inner chunk side, dividing the chunk side (default a quarter of it: 64 in --full's 256³ chunks)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("name a scenario (%s) or all", strings.Join(bench.Names(), ", "))
	}
	o := bench.Options{Quick: *quick, Tiny: *tiny, Full: *full, Dir: *dir, Log: stderr, InnerChunk: *innerChunk}
	if *noPeers {
		o.Peers = bench.NoPeers()
	}
	if err := o.Validate(); err != nil {
		return usageErr("%v", err)
	}
	rep, err := bench.Run(ctx, pos, o)
	if err != nil {
		if rep == nil {
			return usageErr("%v", err)
		}
		return err
	}
	if *asJSON {
		err = rep.JSON(stdout)
	} else {
		err = rep.Markdown(stdout)
	}
	if err != nil {
		return err
	}
	if *out != "" {
		paths, err := rep.WriteFiles(*out)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintf(stderr, "wrote %s\n", p)
		}
	}
	var pages []string
	if *out != "" {
		pages = append(pages, filepath.Join(*out, "BENCHMARKS.md"))
	}
	if *page != "" {
		pages = append(pages, *page)
	}
	for _, p := range pages {
		if err := rep.WriteBenchmarksFile(p, bench.Page{Command: commandLine("scctl bench", args)}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if len(rep.Missing) > 0 {
		fmt.Fprintf(stderr, "missing peers: %s (install with `make bench-peers`)\n", strings.Join(rep.Missing, "; "))
	}
	if len(rep.Errors) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d scenario error(s): %s", len(rep.Errors), strings.Join(rep.Errors, "; "))}
	}
	return nil
}

// commandLine spells a command as a shell would take it back, so that the
// BENCHMARKS.md header can be pasted to run the same benchmarks again.
func commandLine(prefix string, args []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, a := range args {
		b.WriteByte(' ')
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,@+") == "" {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}
