package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
)

func init() {
	register("check", "offline consistency check of a file (exit 1 on problems)", cmdCheck)
}

// checkOutput is check's JSON form.
type checkOutput struct {
	Path string `json:"path"`
	OK   bool   `json:"ok"`
	*engine.CheckReport
}

// cmdCheck runs engine.CheckPath: every index entry inside the file, no two
// live extents overlapping, no referenced space free, every checksum valid.
// Exit status 1 when the checker finds problems or cannot read the file.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "[--json] FILE\n\n"+fileHelp, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	// A file with problems gives the report and an error wrapping
	// engine.ErrCorrupt; only an error without a report (the file cannot
	// be opened at all) ends here.
	rep, err := checkPath(ctx, path)
	if rep == nil {
		return err
	}
	if err != nil && len(rep.Problems) == 0 {
		rep.Problems = append(rep.Problems, err.Error())
	}
	ok := len(rep.Problems) == 0
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(checkOutput{Path: path, OK: ok, CheckReport: rep}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s: generation %d, %d of 2 superblock slots valid\n", path, rep.Generation, rep.SlotsValid)
		fmt.Fprintf(stdout, "  %d datasets, %d chunks verified, %d index blocks\n", rep.Datasets, rep.Chunks, rep.IndexBlocks)
		fmt.Fprintf(stdout, "  live %s, end of file %s, file size %s\n",
			bench.HumanBytes(rep.LiveBytes), bench.HumanBytes(rep.EOF), bench.HumanBytes(rep.FileSize))
		if rep.ImageFreeMap {
			fmt.Fprintf(stdout, "  cache image free-space map verified; it leaves out %s of unreferenced space\n", bench.HumanBytes(rep.ImageMapLeak))
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(stdout, "  PROBLEM: %s\n", p)
		}
		if ok {
			fmt.Fprintln(stdout, "  OK")
		}
	}
	if !ok {
		return &exitError{code: 1, msg: fmt.Sprintf("%d problem(s) found", len(rep.Problems))}
	}
	return nil
}
