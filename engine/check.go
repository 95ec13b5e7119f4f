package engine

import (
	"context"
	"fmt"
	"sort"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// CheckReport is what the offline consistency checker found.
type CheckReport struct {
	Generation  uint64 // committed superblock generation
	SlotsValid  int    // how many of the two superblock slots decode (1 or 2)
	Datasets    int
	Chunks      int   // stored chunks, all verified
	IndexBlocks int   // index blocks
	LiveBytes   int64 // bytes the committed state references
	// Unreferenced counts the bytes of [DataStart, EOF) the committed
	// state does not reference: free space, and space a writer leaked.
	// A writer that frees what it stops referencing (Delete included)
	// holds exactly these bytes free once its commits settle.
	Unreferenced int64
	EOF          int64
	FileSize     int64
	// ImageFreeMap reports that the file's cache image carries a
	// free-space map (the next writable open rebuilds its allocator from
	// it); Check verifies that no extent of it holds referenced bytes.
	// ImageMapLeak counts the bytes the map leaves out although nothing
	// references them (space freed by operations racing the closing
	// commit): not damage, but space no writer reuses until an open
	// without the image.
	ImageFreeMap bool
	ImageMapLeak int64
	// LostGeneration is the generation of a commit that the file's
	// superblock slots show was written but is not the state it opens
	// at: the slot holding it is damaged (one of Problems says so). A
	// commit cut by a crash or a failed write while its slot was being
	// written (never acknowledged) looks the same as one damaged since.
	// 0: none, or the damaged slot names no generation.
	LostGeneration uint64
	Problems       []string // empty when the file is consistent
}

// Check verifies the committed state of the file at path (a local path,
// an s3:// URL, or any name with opts.Driver set), opened read-only,
// without changing it: both
// superblock slots, the catalog, every dataset header, every index block,
// every stored chunk (its checksum and that it decodes through the dataset's
// pipeline to a whole chunk); that every extent lies inside the file's space
// and below the end of file; and that no two live extents overlap (so no
// referenced space can be handed out as free — free space is exactly the
// complement of the live extents, see FORMAT.md). A file with problems
// returns the report and an error wrapping ErrCorrupt; a file that cannot be
// opened returns Open's error (ErrIO, ErrVersion, ...) with its class.
func Check(ctx context.Context, path string, opts *Options) (*CheckReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &Options{}
	}
	drv, done, err := openCheckDriver(ctx, path, opts)
	if err != nil {
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	defer done()
	r, err := checkDriver(ctx, drv)
	if err != nil && path != "" {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return r, err
}

func checkDriver(ctx context.Context, drv vfd.Driver) (*CheckReport, error) {
	r := &CheckReport{}
	var slots [2]*format.SlotState // nil: unreadable (Open reports the I/O error)
	for i, off := range []int64{format.SlotA, format.SlotB} {
		buf := make([]byte, format.SlotSize)
		if readFull(drv, buf, off) == nil {
			st := format.InspectSlot(buf, off)
			slots[i] = &st
			if st.Valid {
				r.SlotsValid++
			}
		}
	}
	size, err := drv.Size()
	if err != nil {
		return nil, classify(err)
	}
	r.FileSize = size
	f, err := openDriver(ctx, drv, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 1 << 20}})
	if err != nil {
		// Open's error already names its one class: a damaged file is
		// ErrCorrupt, but a driver failure (ErrIO) or a newer format
		// (ErrVersion) is not damage and must not be reported as such.
		r.Problems = append(r.Problems, "open: "+err.Error())
		return r, fmt.Errorf("open: %w", err)
	}
	defer f.Close(ctx)
	r.Generation, r.EOF = f.sb.Load().Generation, int64(f.sb.Load().EOF)
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	r.LostGeneration = checkSlots(r.Generation, slots, problem)

	type owned struct {
		alloc.Extent
		what string
	}
	var live []owned
	add := func(off, size int64, what string) {
		live = append(live, owned{alloc.Extent{Off: off, Size: size}, what})
	}
	c := &checkRun{drv: drv, eof: int64(f.sb.Load().EOF), r: r, add: add, problem: problem}
	add(int64(f.sb.Load().CatalogAddr), int64(f.sb.Load().CatalogSize), "catalog")
	// A valid cache image is referenced space (image.go); a stale one is
	// ignored by every open, so its bytes are nobody's.
	if r := f.sb.Load().Image; r.Exists() && f.ImageInfo().Used {
		add(int64(r.Addr), int64(r.Size), "cache image")
	}
	names := f.datasetNames()
	r.Datasets = len(names)
	for _, name := range names {
		f.mu.Lock()
		e := f.mu.catalog[name]
		f.mu.Unlock()
		add(int64(e.HeaderAddr), int64(e.HeaderSize), "header "+name)
		s, err := f.loadState(e)
		if err != nil {
			problem("dataset %q: %v", name, err)
			continue
		}
		if err := s.store.checkStored(ctx, name, c); err != nil {
			return r, err
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Off < live[j].Off })
	var end int64 = format.DataStart
	var prev string = "superblock slots"
	for _, x := range live {
		if x.Size <= 0 {
			problem("%s has size %d", x.what, x.Size)
			continue
		}
		if x.Off < end {
			problem("%s [%d,+%d) overlaps %s", x.what, x.Off, x.Size, prev)
		}
		if x.Off+x.Size > int64(f.sb.Load().EOF) {
			problem("%s [%d,+%d) ends past the committed end of file %d", x.what, x.Off, x.Size, f.sb.Load().EOF)
		}
		if x.Off+x.Size > size {
			problem("%s [%d,+%d) ends past the file's size %d", x.what, x.Off, x.Size, size)
		}
		if x.Off+x.Size > end {
			end, prev = x.Off+x.Size, x.what
		}
		r.LiveBytes += x.Size
	}
	r.Unreferenced = int64(f.sb.Load().EOF) - format.DataStart - r.LiveBytes
	f.img.mu.Lock()
	freeMap := f.img.mu.free
	f.img.mu.Unlock()
	if freeMap != nil {
		r.ImageFreeMap = true
		r.ImageMapLeak = int64(f.sb.Load().EOF) - format.DataStart - r.LiveBytes
		i := 0 // live is in address order, and so is the map
		for _, x := range freeMap {
			r.ImageMapLeak -= x.Size
			for i < len(live) && live[i].End() <= x.Off {
				i++
			}
			for j := i; j < len(live) && live[j].Off < x.End(); j++ {
				problem("cache image free-space map: %v holds %s [%d,+%d)", x, live[j].what, live[j].Off, live[j].Size)
			}
		}
	}
	exts := make([]alloc.Extent, len(live))
	for i := range live {
		exts[i] = live[i].Extent
	}
	if len(r.Problems) == 0 {
		if _, err := alloc.Rebuild(format.DataStart, int64(f.sb.Load().EOF), exts); err != nil {
			problem("free-space rebuild: %v", err)
		}
	}
	if len(r.Problems) > 0 {
		return r, fmt.Errorf("%w: %d problems, first: %s", ErrCorrupt, len(r.Problems), r.Problems[0])
	}
	return r, nil
}

// checkRun is one Check's running state, which each dataset's storage
// reports to (storage.checkStored).
type checkRun struct {
	drv     vfd.Driver
	eof     int64 // the committed end of file
	r       *CheckReport
	add     func(off, size int64, what string)
	problem func(format string, args ...any)
}

// checkSlots reports the damage of the slot the file did not open from.
// Commits alternate slots, so the other slot holds the previous generation
// (gen-1), or nothing on a file committed once. Damaged, it is either a
// commit after gen that was written and lost (the file silently opens one
// generation back) or the previous generation's copy gone: both are
// problems, and when its damaged bytes still name a newer generation the
// lost commit is that one, which it returns.
func checkSlots(gen uint64, slots [2]*format.SlotState, problem func(string, ...any)) (lost uint64) {
	i := 0
	if format.SlotFor(gen+1) == format.SlotB {
		i = 1
	}
	st := slots[i]
	if st == nil || st.Valid {
		return 0
	}
	name, off := [2]string{"A", "B"}[i], [2]int64{format.SlotA, format.SlotB}[i]
	switch {
	case st.Blank:
		if gen >= 2 {
			problem("superblock slot %s (offset %d) is blank, though generation %d was committed there: the file has a single valid superblock", name, off, gen-1)
		}
	case st.GenLegible && st.Gen > gen:
		problem("superblock slot %s (offset %d) is damaged (%v): the commit of generation %d is lost (cut while it was written, or damaged since); the file opens at generation %d",
			name, off, st.Err, st.Gen, gen)
		return st.Gen
	default:
		problem("superblock slot %s (offset %d) is damaged (%v): the newest commit (generation %d or later) may be lost; the file opens at generation %d", name, off, st.Err, gen+1, gen)
	}
	return 0
}
