package engine

import (
	"context"

	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
)

// indexStore gives the chunk indexes their blocks: reads from the driver,
// writes to space from the file's allocator, frees deferred to the next
// commit (see space).
type indexStore struct{ f *File }

func (f *File) indexStore() index.Store { return indexStore{f} }

func (s indexStore) ReadAt(_ context.Context, p []byte, off int64) error {
	return readFull(s.f.drv, p, off)
}

func (s indexStore) WriteAt(_ context.Context, p []byte, off int64) error {
	if s.f.readOnly {
		return ErrReadOnly
	}
	return s.f.writeFull(p, off)
}

func (s indexStore) Alloc(size int64) (int64, error) {
	if s.f.readOnly {
		return 0, ErrReadOnly
	}
	return s.f.space.alloc(size)
}

// Free is called by an index's flush only, which runs inside a commit:
// the blocks it frees are the ones that commit replaced (space.freeReplaced).
func (s indexStore) Free(off, size int64) {
	if s.f.readOnly {
		return
	}
	s.f.space.freeReplaced(off, size)
}

// liveExtents lists every extent the committed state references: the
// catalog, each dataset header, every index block and every stored chunk.
func (f *File) liveExtents(ctx context.Context) ([]alloc.Extent, error) {
	live := []alloc.Extent{{Off: int64(f.sb.Load().CatalogAddr), Size: int64(f.sb.Load().CatalogSize)}}
	f.mu.Lock()
	entries := make([]format.CatalogEntry, 0, len(f.mu.catalog))
	for _, e := range f.mu.catalog {
		entries = append(entries, e)
	}
	f.mu.Unlock()
	for _, e := range entries {
		live = append(live, alloc.Extent{Off: int64(e.HeaderAddr), Size: int64(e.HeaderSize)})
		s, err := f.loadState(e)
		if err != nil {
			return nil, err
		}
		if live, err = s.store.liveExtents(ctx, live); err != nil {
			return nil, err
		}
	}
	return live, nil
}
