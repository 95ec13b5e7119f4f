package engine

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/engine/internal/index"
)

// lazyIndex is a dataset's chunk index, opened on first use: an open
// dataset that is never read or written costs no index memory, which keeps
// thousands of idle open datasets cheap (HDF5 gives each open dataset its
// own 1 MiB chunk cache; here an idle one costs about a kilobyte).
//
// The fast path is one atomic load. Opening is serialized by mu; reset (a
// read-only file adopting a newer commit) happens while the dataset's I/O is
// drained, so no caller holds the old index across it.
type lazyIndex struct {
	store index.Store
	p     atomic.Pointer[indexBox]
	// charge adds a difference of the index's memory to the shared cache's
	// budget (cache.File.ChargeMetadata); nil charges nothing.
	charge func(delta int64)

	// chargeMu orders charges: charged is the figure charged so far, and
	// each charge replaces it and sends the difference under this lock, so
	// the cache receives the differences in the order their figures were
	// taken. Sent outside it, an uncharge could overtake the charge it
	// undoes and take the cache's resident total below zero. The cache's
	// side (ChargeMetadata) never calls back into the engine, so holding
	// it there cannot deadlock.
	chargeMu sync.Mutex
	charged  int64 // guarded by chargeMu

	mu struct {
		sync.Mutex
		kind index.Kind
		g    index.Geometry
		root []byte // the committed root to open from; nil once opened
	}
}

type indexBox struct{ index.Index }

func newLazyIndex(store index.Store, kind index.Kind, g index.Geometry, root []byte, charge func(int64)) *lazyIndex {
	li := &lazyIndex{store: store, charge: charge}
	li.mu.kind, li.mu.g, li.mu.root = kind, g, root
	return li
}

// get returns the index, opening it from its root on first use.
func (li *lazyIndex) get(ctx context.Context) (index.Index, error) {
	if b := li.p.Load(); b != nil {
		return b.Index, nil
	}
	li.mu.Lock()
	defer li.mu.Unlock()
	if b := li.p.Load(); b != nil {
		return b.Index, nil
	}
	x, err := index.Open(ctx, li.mu.kind, li.mu.g, li.mu.root, li.store)
	if err != nil {
		return nil, classify(err)
	}
	li.p.Store(&indexBox{x})
	li.mu.root = nil
	li.account(x)
	return x, nil
}

// set installs an index created in memory (a new dataset).
func (li *lazyIndex) set(x index.Index) {
	li.mu.Lock()
	defer li.mu.Unlock()
	li.mu.kind, li.mu.root = x.Kind(), nil
	li.p.Store(&indexBox{x})
	li.account(x)
}

// reset points the index at another committed root, to be opened on next
// use.
func (li *lazyIndex) reset(kind index.Kind, g index.Geometry, root []byte) {
	li.mu.Lock()
	defer li.mu.Unlock()
	li.mu.kind, li.mu.g, li.mu.root = kind, g, root
	li.p.Store(nil)
	li.chargeBytes(0) // the old index's blocks are garbage now
}

// account charges the index's current memory to the cache. Callers call it
// after anything that can load, create or drop index blocks (lookups,
// publishes, deletes, resizes, flushes); it walks the index's block slots,
// not its entries.
func (li *lazyIndex) account(x index.Index) {
	if li.charge == nil || x == nil {
		return
	}
	li.chargeBytes(x.MemBytes())
}

func (li *lazyIndex) chargeBytes(n int64) {
	if li.charge == nil {
		return
	}
	li.chargeMu.Lock()
	defer li.chargeMu.Unlock()
	if d := n - li.charged; d != 0 {
		li.charged = n
		li.charge(d)
	}
}

// chargedBytes is the index memory charged to the cache so far.
func (li *lazyIndex) chargedBytes() int64 {
	li.chargeMu.Lock()
	defer li.chargeMu.Unlock()
	return li.charged
}

// kind reports the index kind without opening it.
func (li *lazyIndex) kind() index.Kind {
	li.mu.Lock()
	defer li.mu.Unlock()
	return li.mu.kind
}

// flush returns the root to record in the header: the opened index's new
// root, or the unchanged committed root of an index never opened.
func (li *lazyIndex) flush(ctx context.Context) ([]byte, error) {
	if b := li.p.Load(); b != nil {
		root, err := b.Flush(ctx)
		li.account(b.Index)
		return root, classify(err)
	}
	li.mu.Lock()
	defer li.mu.Unlock()
	if b := li.p.Load(); b != nil {
		root, err := b.Flush(ctx)
		li.account(b.Index)
		return root, classify(err)
	}
	return li.mu.root, nil
}

// dropClean gives back the memory of the index's clean leaf blocks
// (index.Index.DropClean) and uncharges it; an index never opened holds
// none.
func (li *lazyIndex) dropClean() {
	if b := li.p.Load(); b != nil {
		b.DropClean()
		li.account(b.Index)
	}
}
