package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
)

func init() {
	register("check", "offline consistency check of a file, with --sources of its virtual datasets' source files too (exit 1 on problems)", cmdCheck)
}

// checkOutput is check's JSON form.
type checkOutput struct {
	Path string `json:"path"`
	OK   bool   `json:"ok"`
	*engine.CheckReport
	// Sources, with --sources, are the source files of the file's
	// virtual datasets, each checked.
	Sources []checkedSource `json:"sources,omitempty"`
}

// cmdCheck runs engine.Check: every index entry inside the file, no two
// live extents overlapping, no referenced space free, every checksum valid.
// Exit status 1 when the checker finds problems or cannot read the file.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "[--json] [--sources] FILE\n\n"+fileHelp, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	withSources := fs.Bool("sources", false, "also check every source file the file's virtual datasets name (resolved as the engine resolves them), and that each source dataset fits its mapping")
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
	var sources []checkedSource
	if *withSources {
		if sources, err = checkSources(ctx, path); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			ok = false
		}
		for _, s := range sources {
			ok = ok && s.OK
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(checkOutput{Path: path, OK: ok, CheckReport: rep, Sources: sources}); err != nil {
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
		printSources(stdout, sources)
		if ok {
			fmt.Fprintln(stdout, "  OK")
		}
	}
	if !ok {
		n := len(rep.Problems)
		for _, s := range sources {
			n += len(s.Problems)
		}
		return &exitError{code: 1, msg: fmt.Sprintf("%d problem(s) found", n)}
	}
	return nil
}

// checkedSource is one source file of check --sources.
type checkedSource struct {
	// File is the name as the mappings give it (%b replaced), Path where
	// the engine looks for it.
	File string `json:"file"`
	Path string `json:"path"`
	// Exists is false for a file that is not there (yet): its elements
	// read as the fill value, which is not a problem.
	Exists bool `json:"exists"`
	OK     bool `json:"ok"`
	// Report is the file's check; Problems what is wrong with it or with
	// a source dataset in it (one that does not fit its mapping).
	Report   *engine.CheckReport `json:"report,omitempty"`
	Problems []string            `json:"problems,omitempty"`
}

// checkSources checks every source file the virtual datasets of the file
// at path name, once each, in the order the mappings name them.
func checkSources(ctx context.Context, path string) ([]checkedSource, error) {
	f, done, err := openPath(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer done()
	out := []checkedSource{}
	byPath := map[string]int{}
	names, err := tree.DatasetNames(f)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		spec, virtual, err := f.VirtualSpec(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("dataset %q: %w", name, err)
		}
		if !virtual {
			continue
		}
		ms, err := virtualMappings(ctx, f, spec)
		if err != nil {
			return nil, fmt.Errorf("dataset %q: %w", name, err)
		}
		typ := spec.Type.String()
		for _, m := range ms {
			for _, s := range m.Sources {
				if s.Path == "" && s.Error == "" {
					continue // the file itself, checked above
				}
				key := s.Path
				if key == "" {
					key = "\x00" + s.File
				}
				i, seen := byPath[key]
				if !seen {
					i = len(out)
					byPath[key] = i
					out = append(out, checkSource(ctx, s))
				}
				cs := &out[i]
				switch {
				case s.Error != "":
					if seen {
						cs.Problems = append(cs.Problems, fmt.Sprintf("dataset %q: source %s: %s", name, s.Dataset, s.Error))
					}
				case !s.Exists:
				case s.Type != typ:
					cs.Problems = append(cs.Problems, fmt.Sprintf("dataset %q: source %s has type %s, the virtual dataset %s", name, s.Dataset, s.Type, typ))
				case len(s.Shape) != len(m.Source.Start):
					cs.Problems = append(cs.Problems, fmt.Sprintf("dataset %q: source %s has rank %d, its selection %d", name, s.Dataset, len(s.Shape), len(m.Source.Start)))
				}
				cs.OK = len(cs.Problems) == 0
			}
		}
	}
	return out, nil
}

// checkSource runs the checker on one source file.
func checkSource(ctx context.Context, s lsSource) checkedSource {
	cs := checkedSource{File: s.File, Path: s.Path}
	if s.Error != "" {
		cs.Exists = true
		cs.Problems = append(cs.Problems, fmt.Sprintf("source %s: %s", s.Dataset, s.Error))
		return cs
	}
	rep, err := checkPath(ctx, s.Path)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return checkedSource{File: s.File, Path: s.Path, OK: true}
	case rep == nil:
		cs.Exists = true
		cs.Problems = append(cs.Problems, err.Error())
		return cs
	}
	cs.Exists, cs.Report = true, rep
	cs.Problems = append(cs.Problems, rep.Problems...)
	if err != nil && len(rep.Problems) == 0 {
		cs.Problems = append(cs.Problems, err.Error())
	}
	return cs
}

func printSources(w io.Writer, sources []checkedSource) {
	for _, s := range sources {
		name := s.File
		if s.Path != "" && s.Path != s.File {
			name += " (" + s.Path + ")"
		}
		switch {
		case !s.Exists:
			fmt.Fprintf(w, "  source %s: missing (reads as the fill value)\n", name)
			continue
		case s.Report != nil:
			fmt.Fprintf(w, "  source %s: generation %d, %d datasets, %d chunks verified\n", name, s.Report.Generation, s.Report.Datasets, s.Report.Chunks)
		default:
			fmt.Fprintf(w, "  source %s\n", name)
		}
		for _, p := range s.Problems {
			fmt.Fprintf(w, "    PROBLEM: %s\n", p)
		}
		if s.OK {
			fmt.Fprintln(w, "    OK")
		}
	}
}
