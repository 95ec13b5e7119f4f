package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// What ls and check show of a virtual dataset: its mappings and, per
// mapping, the source files they name as the engine resolves them. The
// stored description comes from File.VirtualSpec, which reads the header
// alone, so that a dataset whose sources are damaged can still be listed.

// lsSel is a selection of a mapping: a regular hyperslab, count
// "unlimited" along an unlimited dimension.
type lsSel struct {
	Start  []uint64 `json:"start"`
	Stride []uint64 `json:"stride"`
	Count  []string `json:"count"`
	Block  []uint64 `json:"block"`
}

func (s lsSel) String() string {
	return fmt.Sprintf("start=(%s) stride=(%s) count=(%s) block=(%s)",
		dims(s.Start), dims(s.Stride), strings.Join(s.Count, ", "), dims(s.Block))
}

func selOf(s engine.Selection) lsSel {
	start, stride, count, block := s.Parts()
	out := lsSel{Start: start, Stride: stride, Block: block}
	for _, c := range count {
		if c == engine.Unlimited {
			out.Count = append(out.Count, "unlimited")
		} else {
			out.Count = append(out.Count, fmt.Sprint(c))
		}
	}
	return out
}

// lsMapping is one mapping and the sources it names now.
type lsMapping struct {
	Virtual lsSel  `json:"virtual"`
	File    string `json:"file"`
	Dataset string `json:"dataset"`
	Source  lsSel  `json:"source"`
	// Printf: File or Dataset holds %b, one source per block of the
	// virtual selection along its unlimited dimension.
	Printf  bool       `json:"printf,omitempty"`
	Sources []lsSource `json:"sources"`
}

// lsSource is one source dataset as it is now.
type lsSource struct {
	// Block is the block number of a printf mapping's source.
	Block *uint64 `json:"block,omitempty"`
	// File and Dataset are the names with %b replaced; Path is where the
	// engine looks for File ("" for the virtual dataset's own file).
	File    string `json:"file"`
	Dataset string `json:"dataset"`
	Path    string `json:"path"`
	// Exists: the file and the dataset in it exist; Shape is then the
	// dataset's extent and Type its element type.
	Exists bool     `json:"exists"`
	Shape  []uint64 `json:"shape,omitempty"`
	Type   string   `json:"type,omitempty"`
	// Error is why the source could not be looked at (not a missing one:
	// a missing source reads as the fill value).
	Error string `json:"error,omitempty"`
}

// maxPrintfBlocks bounds how many blocks of a printf mapping a listing
// looks for.
const maxPrintfBlocks = 1 << 16

// virtualMappings lists spec's mappings with their sources: every source
// of a plain mapping; for a printf mapping the blocks from 0 up to the
// first missing one, which is listed too (the next a writer will add).
func virtualMappings(ctx context.Context, f *engine.File, spec engine.VirtualSpec) ([]lsMapping, error) {
	sc := &sourceCache{f: f, open: map[string]*engine.File{}}
	defer sc.close()
	var out []lsMapping
	for _, m := range spec.Mappings {
		_, fileHas := engine.ExpandBlock(m.File, 0)
		_, dsetHas := engine.ExpandBlock(m.Dataset, 0)
		lm := lsMapping{Virtual: selOf(m.Virtual), File: m.File, Dataset: m.Dataset, Source: selOf(m.Source),
			Printf: fileHas || dsetHas, Sources: []lsSource{}}
		if !lm.Printf {
			lm.Sources = append(lm.Sources, sc.look(ctx, m.File, m.Dataset))
		} else {
			for k := uint64(0); k < maxPrintfBlocks; k++ {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				file, _ := engine.ExpandBlock(m.File, k)
				dset, _ := engine.ExpandBlock(m.Dataset, k)
				src := sc.look(ctx, file, dset)
				src.Block = &k
				lm.Sources = append(lm.Sources, src)
				if !src.Exists {
					break
				}
			}
		}
		out = append(out, lm)
	}
	return out, nil
}

// sourceCache opens each source file once per listing.
type sourceCache struct {
	f      *engine.File
	open   map[string]*engine.File
	closes []func() error
}

func (sc *sourceCache) close() {
	for _, c := range sc.closes {
		_ = c()
	}
}

// look describes one source: where the engine finds it and whether it
// is there.
func (sc *sourceCache) look(ctx context.Context, file, dset string) lsSource {
	src := lsSource{File: file, Dataset: dset}
	path, self, err := sc.f.VirtualSource(file)
	if err != nil {
		src.Error = err.Error()
		return src
	}
	src.Path = path
	key := path
	if self {
		key = "\x00self"
	}
	sf, seen := sc.open[key]
	if !seen {
		switch {
		case self:
			sf = sc.f
		default:
			var done func() error
			sf, done, err = openPath(ctx, path, &engine.Options{ReadOnly: true})
			switch {
			case errors.Is(err, engine.ErrNotFound):
				sf = nil
			case err != nil:
				src.Error = err.Error()
				return src
			default:
				sc.closes = append(sc.closes, done)
			}
		}
		sc.open[key] = sf
	}
	if sf == nil {
		return src // no such file: fill
	}
	ds, err := sf.OpenDataset(ctx, dset, nil)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return src
	case err != nil:
		src.Error = err.Error()
		return src
	}
	defer ds.Close(ctx)
	src.Exists, src.Shape, src.Type = true, ds.Shape(), ds.Type().String()
	return src
}

// printMappings prints a virtual dataset's mappings for ls, every file
// and dataset name escaped as ls escapes names (displayName).
func printMappings(w io.Writer, ms []lsMapping) {
	for i, m := range ms {
		file := displayName(m.File)
		if file == "" {
			file = "."
		}
		fmt.Fprintf(w, "    Mapping %d: virtual {%s}\n", i, m.Virtual)
		fmt.Fprintf(w, "               <- %s : %s {%s}\n", file, displayName(m.Dataset), m.Source)
		for _, s := range m.Sources {
			fmt.Fprintf(w, "      source %s\n", describeSource(s))
		}
	}
}

func describeSource(s lsSource) string {
	name := displayName(s.File)
	if name == "" {
		name = "."
	}
	where := name
	if s.Path != "" && s.Path != s.File {
		where += " (" + displayName(s.Path) + ")"
	}
	dset := displayName(s.Dataset)
	if s.Block != nil {
		where = fmt.Sprintf("block %d: %s", *s.Block, where)
	}
	switch {
	case s.Error != "":
		return fmt.Sprintf("%s : %s: error: %s", where, dset, s.Error)
	case s.Exists:
		return fmt.Sprintf("%s : %s: exists, %s {%s}", where, dset, s.Type, dims(s.Shape))
	}
	return fmt.Sprintf("%s : %s: missing (reads as the fill value)", where, dset)
}
