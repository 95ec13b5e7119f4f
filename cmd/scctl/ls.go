package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
)

func init() {
	register("ls", "list datasets: type, shape, chunking, filters, index, storage; a virtual dataset's mappings and their sources (like h5ls -v)", cmdLs)
}

// lsDataset is what ls prints for one dataset.
type lsDataset struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Shape    []uint64 `json:"shape"`
	MaxShape []string `json:"max_shape"` // numbers, or "unlimited"
	Chunk    []uint64 `json:"chunk"`
	// InnerChunk is the inner chunk shape of a dataset whose chunks are
	// sharded (engine.DatasetSpec.InnerChunk).
	InnerChunk []uint64 `json:"inner_chunk,omitempty"`
	// ChunkBytes is one chunk's decoded size.
	ChunkBytes int64    `json:"chunk_bytes"`
	Filters    []string `json:"filters"`
	Fill       string   `json:"fill"`
	IndexKind  string   `json:"index_kind"`
	// StoredChunks is how many chunks the index holds; the others read as
	// the fill value.
	StoredChunks int `json:"stored_chunks"`
	// GridChunks is how many chunks the current extent spans.
	GridChunks uint64 `json:"grid_chunks"`
	// LogicalBytes is the extent's size decoded; StoredLogicalBytes the
	// decoded size of the stored chunks (StoredChunks × ChunkBytes).
	LogicalBytes       uint64 `json:"logical_bytes"`
	StoredLogicalBytes uint64 `json:"stored_logical_bytes"`
	// StoredBytes is what the stored chunks occupy in the file (encoded,
	// with checksums); IndexBytes what the chunk index occupies.
	StoredBytes uint64 `json:"stored_bytes"`
	IndexBytes  uint64 `json:"index_bytes"`
	// Attrs are the dataset's attributes (attrs.go).
	Attrs []lsAttr `json:"attributes"`
	// Layout is "chunked" or "sparse". A sparse dataset stores only its
	// defined elements: DefinedElements counts them (StoredLogicalBytes
	// is then their decoded size), SelectionFilters is the pipeline of
	// the sections that record where they are.
	Layout           string   `json:"layout"`
	DefinedElements  uint64   `json:"defined_elements,omitempty"`
	SelectionFilters []string `json:"selection_filters,omitempty"`
	// Mappings are a virtual dataset's mappings, each with the sources
	// it names and whether they exist now.
	Mappings []lsMapping `json:"mappings,omitempty"`
	// Error is why a virtual dataset could not be opened (a source that
	// fails to open fails the evaluation of its extent); its mappings
	// are still listed.
	Error string `json:"error,omitempty"`
}

// lsFile is the whole listing.
type lsFile struct {
	Path     string      `json:"path"`
	Size     int64       `json:"file_bytes"`
	Datasets []lsDataset `json:"datasets"`
	// Logical and StoredLogical sum the datasets' figures; the file's size
	// over StoredLogical is the overall compression.
	Logical       uint64 `json:"logical_bytes"`
	StoredLogical uint64 `json:"stored_logical_bytes"`
	// Attrs are the file's attributes (the root group's).
	Attrs []lsAttr `json:"attributes"`
	// Groups are the groups below the root, parents before children.
	Groups []lsGroup `json:"groups"`
	// tree is the hierarchy in h5ls -r order, for the -r listing.
	tree []lsNode
	// Image is the file's cache image (Cache image RFC §3.2), nil when it has
	// none.
	Image *lsImage `json:"cache_image,omitempty"`
}

// lsGroup is what ls prints for one group.
type lsGroup struct {
	Path  string   `json:"path"` // from the root, starting with "/"
	Attrs []lsAttr `json:"attributes"`
}

// lsNode is one line of the -r listing: a group (Group >= 0, an index in
// Groups, -1 for the root) or a dataset (Dataset an index in Datasets).
type lsNode struct {
	Path           string
	Group, Dataset int
}

// lsImage is what ls prints about a cache image.
type lsImage struct {
	Addr    uint64 `json:"addr"`
	Size    uint64 `json:"bytes"`
	Entries int    `json:"entries"`
	// FreeMap: the image carries the free-space map (check verifies it;
	// no open allocates from it).
	FreeMap bool `json:"free_space_map"`
	// Ignored says why the image is not used (stale or damaged).
	Ignored string `json:"ignored,omitempty"`
}

func cmdLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ls", "[--json] FILE\n\n"+fileHelp, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	recursive := fs.Bool("r", false, "list the group hierarchy, one line per group and dataset with its path from the root (like h5ls -r)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	l, err := listFile(ctx, path)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	if *recursive {
		printTree(stdout, l)
		return nil
	}
	printListing(stdout, l)
	return nil
}

func listFile(ctx context.Context, path string) (*lsFile, error) {
	f, done, err := openPath(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer done()
	rootAttrs, err := f.Attrs()
	if err != nil {
		return nil, err
	}
	l := &lsFile{Path: path, Datasets: []lsDataset{}, Groups: []lsGroup{}, Attrs: listAttrs(rootAttrs)}
	if info := f.ImageInfo(); info.Exists {
		l.Image = &lsImage{Addr: info.Addr, Size: info.Size, Entries: info.Entries, FreeMap: info.FreeMap, Ignored: info.Ignored}
	}
	if st, err := os.Stat(path); err == nil {
		l.Size = st.Size()
	} else if n, ok := s3Size(ctx, path); ok {
		l.Size = n
	}
	names, err := tree.DatasetNames(f)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		spec, virtual, serr := f.VirtualSpec(ctx, name)
		if serr != nil {
			return nil, fmt.Errorf("dataset %q: %w", name, serr)
		}
		var d lsDataset
		ds, err := f.OpenDataset(ctx, name, nil)
		switch {
		case err != nil && virtual:
			d = describeSpec(name, spec)
			d.Error = err.Error()
		case err != nil:
			return nil, fmt.Errorf("dataset %q: %w", name, err)
		default:
			d, err = describe(ds)
			ds.Close(ctx)
			if err != nil {
				return nil, fmt.Errorf("dataset %q: %w", name, err)
			}
		}
		if d.Layout == "virtual" {
			if d.Mappings, err = virtualMappings(ctx, f, spec); err != nil {
				return nil, fmt.Errorf("dataset %q: %w", name, err)
			}
		}
		l.Logical = addSat(l.Logical, d.LogicalBytes)
		l.StoredLogical = addSat(l.StoredLogical, d.StoredLogicalBytes)
		l.Datasets = append(l.Datasets, d)
	}
	if err := listGroups(l, f.Group); err != nil {
		return nil, err
	}
	return l, nil
}

// listGroups walks the hierarchy depth first in member order, as h5ls -r
// does, recording the groups and the order of the -r listing.
func listGroups(l *lsFile, root *engine.Group) error {
	byName := make(map[string]int, len(l.Datasets))
	for i, d := range l.Datasets {
		byName[strings.TrimPrefix(d.Name, "/")] = i
	}
	l.tree = append(l.tree, lsNode{Path: "/", Group: -1, Dataset: -1})
	var walk func(g *engine.Group) error
	walk = func(g *engine.Group) error {
		var ms []engine.Member
		for m, err := range g.Members() {
			if err != nil {
				return fmt.Errorf("group %q: %w", g.Path(), err)
			}
			ms = append(ms, m)
		}
		base := strings.TrimSuffix(g.Path(), "/")
		for _, m := range ms {
			p := base + "/" + m.Name
			if m.Kind != engine.MemberGroup {
				i, ok := byName[p[1:]]
				if !ok {
					return fmt.Errorf("dataset %q: %w", p, engine.ErrNotFound)
				}
				l.tree = append(l.tree, lsNode{Path: p, Group: -1, Dataset: i})
				continue
			}
			sub, err := g.OpenGroup(context.Background(), m.Name)
			if err != nil {
				return fmt.Errorf("group %q: %w", p, err)
			}
			attrs, err := sub.Attrs()
			if err != nil {
				return fmt.Errorf("group %q: %w", p, err)
			}
			l.Groups = append(l.Groups, lsGroup{Path: p, Attrs: listAttrs(attrs)})
			l.tree = append(l.tree, lsNode{Path: p, Group: len(l.Groups) - 1, Dataset: -1})
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root)
}

// printTree prints the -r listing: each object's path and kind, then its
// attributes; the root's are the file's.
func printTree(w io.Writer, l *lsFile) {
	printAttrs := func(as []lsAttr) {
		for _, a := range as {
			fmt.Fprintf(w, "    Attribute: %q %s = %s\n", a.Name, a.Type, a.Value)
		}
	}
	for _, n := range l.tree {
		switch {
		case n.Dataset >= 0:
			d := l.Datasets[n.Dataset]
			fmt.Fprintf(w, "%-20s Dataset {%s}\n", displayName(n.Path), shapeString(d))
			printAttrs(d.Attrs)
		case n.Group >= 0:
			fmt.Fprintf(w, "%-20s Group\n", displayName(n.Path))
			printAttrs(l.Groups[n.Group].Attrs)
		default:
			fmt.Fprintf(w, "%-20s Group\n", n.Path)
			printAttrs(l.Attrs)
		}
	}
	fmt.Fprintf(w, "%d groups, %d datasets, %s logical; file %s\n", len(l.Groups)+1, len(l.Datasets),
		humanSize(l.Logical), bench.HumanBytes(l.Size))
}

// shapeString is a dataset's extent as h5ls prints it: current/maximum
// where they differ, Inf for unlimited.
func shapeString(d lsDataset) string {
	shape := make([]string, len(d.Shape))
	for i := range d.Shape {
		shape[i] = fmt.Sprint(d.Shape[i])
		if d.MaxShape[i] == "unlimited" {
			shape[i] += "/Inf"
		} else if d.MaxShape[i] != shape[i] {
			shape[i] += "/" + d.MaxShape[i]
		}
	}
	return strings.Join(shape, ", ")
}

func describe(ds *engine.Dataset) (lsDataset, error) {
	st, err := ds.Storage(context.Background())
	if err != nil {
		return lsDataset{}, err
	}
	attrs, err := ds.Attrs()
	if err != nil {
		return lsDataset{}, err
	}
	d := lsDataset{
		Name: strings.TrimPrefix(ds.Path(), "/"), Type: ds.Type().String(), Shape: ds.Shape(), Chunk: ds.Chunk(), InnerChunk: ds.InnerChunk(),
		IndexKind: ds.IndexKind(), StoredChunks: st.Chunks, Filters: []string{},
		StoredBytes: st.StoredBytes, IndexBytes: st.IndexBytes, Attrs: listAttrs(attrs),
	}
	for _, m := range ds.MaxShape() {
		if m == engine.Unlimited {
			d.MaxShape = append(d.MaxShape, "unlimited")
		} else {
			d.MaxShape = append(d.MaxShape, fmt.Sprint(m))
		}
	}
	for _, f := range ds.Filters() {
		d.Filters = append(d.Filters, f.String())
	}
	es := uint64(ds.Type().Size())
	d.Fill = formatValues(ds.Type(), ds.Fill())[0]
	d.ChunkBytes = int64(es)
	d.GridChunks = 1
	d.LogicalBytes = es
	for i, c := range d.Chunk {
		d.ChunkBytes *= int64(c)
		d.LogicalBytes = mulSat(d.LogicalBytes, d.Shape[i])
		d.GridChunks *= (d.Shape[i] + c - 1) / c
	}
	d.StoredLogicalBytes = uint64(d.StoredChunks) * uint64(d.ChunkBytes)
	d.Layout = ds.Layout().String()
	if ds.Layout() == engine.Sparse {
		pos, err := ds.DefinedElements(context.Background(), engine.All(d.Shape))
		if err != nil {
			return lsDataset{}, err
		}
		d.DefinedElements = uint64(len(pos))
		d.StoredLogicalBytes = d.DefinedElements * es
		for _, f := range ds.SelectionFilters() {
			d.SelectionFilters = append(d.SelectionFilters, f.String())
		}
	}
	return d, nil
}

// describeSpec describes a virtual dataset that could not be opened from
// its stored description.
func describeSpec(name string, spec engine.VirtualSpec) lsDataset {
	d := lsDataset{Name: name, Type: spec.Type.String(), Shape: spec.Shape, Layout: "virtual", Filters: []string{}}
	for _, m := range spec.MaxShape {
		if m == engine.Unlimited {
			d.MaxShape = append(d.MaxShape, "unlimited")
		} else {
			d.MaxShape = append(d.MaxShape, fmt.Sprint(m))
		}
	}
	fill := spec.Fill
	if len(fill) == 0 {
		fill = make([]byte, spec.Type.Size())
	}
	d.Fill = formatValues(spec.Type, fill)[0]
	return d
}

func dims(v []uint64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func printListing(w io.Writer, l *lsFile) {
	for _, a := range l.Attrs {
		fmt.Fprintf(w, "Attribute %q %s = %s\n", a.Name, a.Type, a.Value)
	}
	for _, d := range l.Datasets {
		fmt.Fprintf(w, "%-20s Dataset {%s}\n", displayName(d.Name), shapeString(d))
		filters := strings.Join(d.Filters, " + ")
		if filters == "" {
			filters = "none"
		}
		fmt.Fprintf(w, "    Type:      %s\n", d.Type)
		if d.Layout == "sparse" {
			sf := strings.Join(d.SelectionFilters, " + ")
			if sf == "" {
				sf = "none"
			}
			fmt.Fprintf(w, "    Layout:    sparse, %d elements defined, selection filters: %s\n", d.DefinedElements, sf)
		} else if d.Layout == "virtual" {
			fmt.Fprintf(w, "    Layout:    virtual, %d mappings\n", len(d.Mappings))
		} else {
			fmt.Fprintf(w, "    Layout:    %s\n", d.Layout)
		}
		if d.Layout == "virtual" {
			// Nothing is stored: the elements are the sources'.
			fmt.Fprintf(w, "    Fill:      %s\n", d.Fill)
			if d.Error != "" {
				fmt.Fprintf(w, "    Extent:    not evaluated (shape as last recorded): %s\n", d.Error)
			}
			printMappings(w, d.Mappings)
			for _, a := range d.Attrs {
				fmt.Fprintf(w, "    Attribute: %q %s = %s\n", a.Name, a.Type, a.Value)
			}
			continue
		}
		fmt.Fprintf(w, "    Chunks:    {%s} %s\n", dims(d.Chunk), bench.HumanBytes(d.ChunkBytes))
		if len(d.InnerChunk) > 0 {
			fmt.Fprintf(w, "    Sharded:   inner chunks {%s}\n", dims(d.InnerChunk))
		}
		fmt.Fprintf(w, "    Filters:   %s\n", filters)
		fmt.Fprintf(w, "    Fill:      %s\n", d.Fill)
		fmt.Fprintf(w, "    Index:     %s, %d of %d chunks stored\n", d.IndexKind, d.StoredChunks, d.GridChunks)
		fmt.Fprintf(w, "    Storage:   %s logical, %s in stored chunks (decoded), %s stored, index %s\n",
			humanSize(d.LogicalBytes), humanSize(d.StoredLogicalBytes),
			humanSize(d.StoredBytes), humanSize(d.IndexBytes))
		for _, a := range d.Attrs {
			fmt.Fprintf(w, "    Attribute: %q %s = %s\n", a.Name, a.Type, a.Value)
		}
	}
	ratio := ""
	if l.Size > 0 && l.StoredLogical > 0 {
		ratio = fmt.Sprintf(" (stored chunks decode to %.2f× the file size)", float64(l.StoredLogical)/float64(l.Size))
	}
	fmt.Fprintf(w, "%d datasets, %s logical; file %s%s\n", len(l.Datasets),
		humanSize(l.Logical), bench.HumanBytes(l.Size), ratio)
	if im := l.Image; im != nil {
		fmt.Fprintf(w, "cache image at %d, %s, %d entries", im.Addr, bench.HumanBytes(int64(im.Size)), im.Entries)
		if im.FreeMap {
			fmt.Fprint(w, ", with the free-space map")
		}
		if im.Ignored != "" {
			fmt.Fprintf(w, " (ignored: %s)", im.Ignored)
		}
		fmt.Fprintln(w)
	}
}

// humanSize is bench.HumanBytes for sizes that may not fit an int64: a
// dataset of up to 2^63-1 elements of several bytes each is larger.
func humanSize(n uint64) string {
	if n <= math.MaxInt64 {
		return bench.HumanBytes(int64(n))
	}
	if n == math.MaxUint64 {
		return "16384 PiB or more" // saturated (mulSat, addSat)
	}
	return fmt.Sprintf("%.0f PiB", float64(n)/(1<<50))
}

// mulSat and addSat saturate at the largest uint64: a sum of logical
// sizes, or an element count times the element size, may not fit.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// displayName is a name as the listing prints it: as it is, or quoted
// with Go's escapes when it holds what a terminal would not show as it
// is (control characters, invalid UTF-8): names older files may hold,
// which no create call accepts now.
func displayName(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
