package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/scc-dev/scc/bench"
)

func init() {
	register("bench", "benchmarks beside HDF5, h5py, zarr, otter and ristretto: NAME|all [--quick] [--json] [--out DIR]", cmdBench)
}

// cmdBench runs bench scenarios and prints the comparison table (or JSON).
// Progress goes to stderr. With --out it also writes report.md,
// report.json and the PNG plots there. Exit status 1 when a scenario
// failed; a target not met is reported in the table, not as a failure.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "NAME|all [--quick] [--json] [--out DIR] [--dir DIR]\n\nscenarios: "+
		strings.Join(bench.Names(), ", "), stderr)
	quick := fs.Bool("quick", false, "small versions (all of them in well under 10 minutes on 2 cores)")
	tiny := fs.Bool("tiny", false, "tiny versions, seconds in all (for tests)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of Markdown")
	out := fs.String("out", "", "write report.md, report.json and PNG plots into this directory")
	dir := fs.String("dir", "", "scratch directory for benchmark files (default the system temp dir); for the s3 scenario an s3://bucket/prefix to run against instead of a private MinIO")
	noPeers := fs.Bool("no-peers", false, "run scc only, as if no peer were installed")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("name a scenario (%s) or all", strings.Join(bench.Names(), ", "))
	}
	o := bench.Options{Quick: *quick, Tiny: *tiny, Dir: *dir, Log: stderr}
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
	if len(rep.Missing) > 0 {
		fmt.Fprintf(stderr, "missing peers: %s (install with `make bench-peers`)\n", strings.Join(rep.Missing, "; "))
	}
	if len(rep.Errors) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d scenario error(s): %s", len(rep.Errors), strings.Join(rep.Errors, "; "))}
	}
	return nil
}
