package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/vfd/s3"
)

// ingestProcs is ingest --procs N: N writer processes (this executable
// again, bench.VirtualIngest), each appending --frames frames round robin
// to its own file, and a virtual dataset over them read back and verified
// at the end.
func ingestProcs(ctx context.Context, o ingestOpts, stdout, stderr io.Writer) error {
	c := o.cfg
	cfg := bench.VirtualIngestConfig{Writers: o.procs, Frames: c.Frames, Height: c.Height, Width: c.Width,
		Filters: c.Filters, CacheBytes: c.CacheBytes, Verify: true}
	if c.Path != "" {
		if s3.IsURL(c.Path) {
			return usageErr("--procs writes local files: --file %s is an object URL", c.Path)
		}
		cfg.Dir = filepath.Dir(c.Path)
		cfg.Name = strings.TrimSuffix(filepath.Base(c.Path), ".scc")
		if filepath.Base(c.Path) != cfg.Name+".scc" {
			return usageErr("--procs: --file %s must end in .scc (the writers' files are named after it)", c.Path)
		}
	} else {
		dir, err := os.MkdirTemp("", "scc-ingest-procs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	if !o.quiet {
		fmt.Fprintf(stderr, "%d writer processes appending %d frames each...\n", o.procs, c.Frames)
	}
	res, err := bench.VirtualIngest(ctx, cfg)
	if err != nil {
		return err
	}
	if c.Path == "" {
		res.VirtualPath, res.SourcePaths = "", nil
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	w := stdout
	fmt.Fprintf(w, "scc ingest: %d writer processes × %d frames of %s (uint16), %s, into %d files + a virtual dataset\n\n",
		res.Writers, res.Frames, bench.HumanBytes(int64(2*res.Height*res.Width)), res.Filters, res.Writers)
	row := func(cells ...string) {
		fmt.Fprintf(w, "%-14s %10s %9s %9s   %s\n", cells[0], cells[1], cells[2], cells[3], cells[4])
	}
	row("", "bytes", "time", "MiB/s", "")
	row("written", bench.HumanBytes(res.BytesWritten), dur(res.WriteTime), fmt.Sprintf("%.1f", res.WriteMBps),
		"aggregate, from the start of every writer to the last one's close (final Flush included)")
	row("read+verified", bench.HumanBytes(res.BytesWritten), dur(res.ReadTime), fmt.Sprintf("%.1f", res.ReadMBps),
		fmt.Sprintf("%d frames through the virtual dataset, every one checked", res.FramesVerified))
	ratio := ""
	if res.StoredBytes > 0 {
		ratio = fmt.Sprintf("written/stored = %.2f", float64(res.BytesWritten)/float64(res.StoredBytes))
	}
	row("stored", bench.HumanBytes(res.StoredBytes), "", "", ratio)
	if res.VirtualPath != "" {
		fmt.Fprintf(w, "\nfile           %s (virtual dataset %q), sources %s\n", res.VirtualPath, "frames", strings.Join(res.SourcePaths, ", "))
	}
	return nil
}
