package engine

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/engine/internal/format"
)

// VirtualSpec returns the stored description of virtual dataset name:
// its type, max shape, fill value and mappings, with file and dataset
// names unexpanded (%b stays), and Shape as last recorded. It reads the
// dataset's header only: no source is opened and no extent evaluated, so
// tools can show the mappings of a virtual dataset whose sources are
// missing or damaged. ok is false for a dataset of another layout.
func (f *File) VirtualSpec(ctx context.Context, name string) (spec VirtualSpec, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return VirtualSpec{}, false, err
	}
	if err := f.checkOpen(); err != nil {
		return VirtualSpec{}, false, err
	}
	if _, ok := f.lookupDataset(name); !ok {
		// Paths resolve from the root: "/a/b" names "a/b".
		if p, err := cleanPath(name); err == nil {
			name = p
		}
	}
	f.mu.Lock()
	e, found := f.mu.catalog[name]
	s, open := f.mu.open[name]
	f.mu.Unlock()
	var hdr format.DatasetHeader
	switch {
	case open:
		// An open dataset answers from its state: one created since
		// the last commit has no header in the file yet.
		hdr = s.header(s.shape(), nil)
	case !found:
		return VirtualSpec{}, false, fmt.Errorf("%w: dataset %q", ErrNotFound, name)
	default:
		var err error
		if hdr, _, err = f.readHeaderImage(e, f.sb.Load().EOF); err != nil {
			return VirtualSpec{}, false, classify(err)
		}
	}
	if hdr.Layout != layoutVirtual {
		return VirtualSpec{}, false, nil
	}
	if _, err := decodeVirtualMaps(hdr.LayoutParams, hdr.MaxShape); err != nil {
		return VirtualSpec{}, false, err
	}
	ms, err := format.DecodeVirtualParams(hdr.LayoutParams)
	if err != nil {
		return VirtualSpec{}, false, classify(err)
	}
	spec = VirtualSpec{Type: typeOfHeader(hdr), Shape: clone(hdr.Shape), MaxShape: clone(hdr.MaxShape), Fill: clone(hdr.Fill)}
	for _, m := range ms {
		spec.Mappings = append(spec.Mappings, VirtualMapping{Virtual: toSel(m.Virtual), File: m.File, Dataset: m.Dataset, Source: toSel(m.Source)})
	}
	return spec, true, nil
}

func toSel(s format.VirtualSelection) Selection {
	return Hyperslab(clone(s.Start), clone(s.Stride), clone(s.Count), clone(s.Block))
}

// VirtualSource resolves a mapping's file name (with any %b already
// replaced) as this File's virtual datasets resolve it: self when it
// names the File itself, else the path or URL the source is opened by.
func (f *File) VirtualSource(file string) (name string, self bool, err error) {
	return f.sourceLocation(file)
}

// ExpandBlock returns name as a virtual dataset names block's source:
// %b replaced by the block number and %% by %. has reports whether name
// holds %b at all (a name without it names the same source for every
// block).
func ExpandBlock(name string, block uint64) (expanded string, has bool) {
	has, err := checkPattern(name)
	return expand(name, block), has && err == nil
}
