package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
)

// DeleteOptions adjust Group.Delete. Nil (or the zero value) deletes a
// dataset or an empty group.
type DeleteOptions struct {
	// Recursive lets Delete remove a group that is not empty, with
	// everything inside it.
	Recursive bool
}

// errRetry: the names a Delete or Move planned for changed while it
// waited; it plans again.
var errRetry = errors.New("retry")

// subtree lists what path names: the dataset of that name, or the group
// with every dataset and group inside it (groups sorted by path). Caller
// holds f.mu.
func (f *File) subtreeLocked(p string) (ds []format.CatalogEntry, groups []string, err error) {
	if e, ok := f.mu.catalog[p]; ok {
		return []format.CatalogEntry{e}, nil, nil
	}
	if _, ok := f.mu.groups[p]; !ok || !f.mu.explicit {
		return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, p)
	}
	pre := p + "/"
	for n, e := range f.mu.catalog {
		if strings.HasPrefix(n, pre) {
			ds = append(ds, e)
		}
	}
	groups = append(groups, p)
	for g := range f.mu.groups {
		if strings.HasPrefix(g, pre) {
			groups = append(groups, g)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
	sort.Strings(groups)
	return ds, groups, nil
}

// objectPath is the catalog name or group path a Delete or Move names.
func (f *File) objectPath(path string) (string, error) {
	if _, ok := f.lookupDataset(path); ok {
		return path, nil // a flat name of an older file, or canonical already
	}
	p, err := cleanPath(path)
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", fmt.Errorf("%w: the root group cannot be deleted or moved", ErrInvalid)
	}
	return p, nil
}

// Delete removes the dataset or group at path (inside g; from the root when
// it starts with '/'). A group that is not empty goes only with
// DeleteOptions.Recursive, and then with everything inside it. It is
// durable after the next Flush.
//
// The deleted datasets' chunks, index blocks and headers go back to the
// allocator as frees made before the next commit: the committed state
// still names them, so they become reusable only once that commit, which
// no longer does, is durable (space.go). Their cached chunks, dirty ones
// included, are dropped unwritten, and every open handle's next call
// fails with ErrDeleted.
func (g *Group) Delete(ctx context.Context, path string, opts *DeleteOptions) error {
	f := g.f
	if err := f.writeCheck(ctx); err != nil {
		return err
	}
	var o DeleteOptions
	if opts != nil {
		o = *opts
	}
	path, err := g.join(path)
	if err != nil {
		return err
	}
	p, err := f.objectPath(path)
	if err != nil {
		return err
	}
	for {
		f.mu.Lock()
		ds, groups, err := f.subtreeLocked(p)
		f.mu.Unlock()
		if err != nil {
			return err
		}
		if len(groups) > 0 && (len(ds) > 0 || len(groups) > 1) && !o.Recursive {
			return fmt.Errorf("%w: group %q is not empty (delete it with DeleteOptions.Recursive)", ErrInvalid, p)
		}
		err = f.deleteDrained(ctx, p, ds, groups)
		if errors.Is(err, errRetry) {
			continue
		}
		return classify(err)
	}
}

// deleteDrained holds every dataset of ds exclusively in the serializer
// (no request of theirs runs), then deletes under commitMu.
func (f *File) deleteDrained(ctx context.Context, p string, ds []format.CatalogEntry, groups []string) error {
	for _, e := range ds { // in ID order
		release, err := f.ser.AcquireExclusive(ctx, e.ID)
		if err != nil {
			return err
		}
		defer release()
	}
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	if perr := f.failed.Load(); perr != nil {
		return *perr
	}
	// What each dataset occupies, read before anything changes, so that a
	// failed read leaves the file as it was.
	states := make([]*dsState, len(ds))
	extents := make([][]alloc.Extent, len(ds))
	for i, e := range ds {
		f.mu.Lock()
		s := f.mu.open[e.Name]
		f.mu.Unlock()
		if s == nil {
			var err error
			if s, err = f.loadState(e); err != nil {
				return err
			}
		}
		ext, err := s.occupied(ctx)
		if err != nil {
			return err
		}
		states[i], extents[i] = s, ext
	}
	f.mu.Lock()
	ds2, groups2, err := f.subtreeLocked(p)
	if err != nil || !slices.Equal(ds, ds2) || !slices.Equal(groups, groups2) {
		f.mu.Unlock()
		return errRetry // a create or delete got in meanwhile
	}
	for i, e := range ds {
		if s := f.mu.open[e.Name]; s != nil && s != states[i] {
			f.mu.Unlock()
			return errRetry // opened meanwhile
		}
	}
	for i, e := range ds {
		states[i].deleted.Store(true)
		delete(f.mu.catalog, e.Name)
		delete(f.mu.open, e.Name)
	}
	for _, g := range groups {
		f.mu.groups[g].deleted = true
		delete(f.mu.groups, g)
	}
	f.mu.Unlock()

	var first error
	for i, s := range states {
		s.mu.Lock()
		cds := s.mu.cds
		s.mu.Unlock()
		if cds != nil {
			// A chunk an eviction wrote back before the drop is in the
			// index now: look again once no chunk of the dataset is left.
			if err := cds.Discard(context.WithoutCancel(ctx)); err != nil && first == nil {
				first = classify(err)
			}
			if ext, err := s.occupied(ctx); err == nil {
				extents[i] = ext
			}
		}
		for _, x := range extents[i] {
			f.space.free(x.Off, x.Size)
		}
		if s.idx != nil {
			s.idx.chargeBytes(0)
		}
		if sh := s.shards(); sh != nil {
			sh.dropKept()
		}
	}
	return first
}

// occupied is the space the dataset's state names: its stored data and
// index blocks (including what was written since the last commit) and its
// committed header.
func (s *dsState) occupied(ctx context.Context) ([]alloc.Extent, error) {
	s.extent.RLock()
	defer s.extent.RUnlock()
	ext, err := s.store.liveExtents(ctx, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.mu.headerSize != 0 {
		ext = append(ext, alloc.Extent{Off: int64(s.mu.headerAddr), Size: int64(s.mu.headerSize)})
	}
	s.mu.Unlock()
	return ext, nil
}

// Move renames the dataset or group at from to to (both inside g; from
// the root when they start with '/'); a group moves with everything inside
// it; to obeys the name rule
// (ValidateName). The parent of to must be a group (ErrNotFound), to
// must be free (ErrExists), and a group cannot move into itself
// (ErrInvalid). Open handles follow what they opened.
// It is durable after the next Flush.
func (g *Group) Move(ctx context.Context, from, to string) error {
	f := g.f
	if err := f.writeCheck(ctx); err != nil {
		return err
	}
	from, err := g.join(from)
	if err != nil {
		return err
	}
	pf, err := f.objectPath(from)
	if err != nil {
		return err
	}
	if to == "" || to == "/" {
		return fmt.Errorf("%w: cannot move onto the root group", ErrExists)
	}
	pt, err := g.newPath(to) // the new name obeys the name rule (names.go)
	if err != nil {
		return err
	}
	if pt == pf || strings.HasPrefix(pt, pf+"/") {
		return fmt.Errorf("%w: cannot move %q into itself (%q)", ErrInvalid, pf, pt)
	}
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	for {
		f.mu.Lock()
		err := f.moveLocked(pf, pt)
		var load []format.CatalogEntry
		var need *needStates
		if errors.As(err, &need) {
			load = need.entries
		}
		f.mu.Unlock()
		if load == nil {
			return err
		}
		// The headers must be rewritten under the new names: the states
		// of datasets not open are loaded first (I/O, outside f.mu).
		for _, e := range load {
			s, err := f.loadState(e)
			if err != nil {
				return err
			}
			f.mu.Lock()
			if f.mu.open[e.Name] == nil && f.mu.catalog[e.Name] == e {
				f.mu.open[e.Name] = s
			}
			f.mu.Unlock()
		}
	}
}

// needStates asks Move to load these datasets' states and try again.
type needStates struct{ entries []format.CatalogEntry }

func (n *needStates) Error() string { return "states to load" }

// moveLocked renames under f.mu, or asks for states to load first.
func (f *File) moveLocked(pf, pt string) error {
	if !f.mu.explicit {
		return fmt.Errorf("%w: the file's dataset names are not paths; it takes no moves", ErrInvalid)
	}
	ds, groups, err := f.subtreeLocked(pf)
	if err != nil {
		return err
	}
	if err := f.checkNewLocked(pt, false); err != nil {
		return err
	}
	var load []format.CatalogEntry
	for _, e := range ds {
		if f.mu.open[e.Name] == nil {
			load = append(load, e)
		}
	}
	if load != nil {
		return &needStates{load}
	}
	rename := func(n string) string { return pt + n[len(pf):] }
	for _, e := range ds {
		if err := format.ValidPath(rename(e.Name)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	for _, e := range ds {
		s := f.mu.open[e.Name]
		delete(f.mu.catalog, e.Name)
		delete(f.mu.open, e.Name)
		n := rename(e.Name)
		s.setPath(n)
		s.dirty.Store(true) // the header records the name
		f.mu.open[n] = s
		f.mu.catalog[n] = s.catalogEntry()
	}
	gs := make([]*groupState, len(groups))
	for i, g := range groups {
		gs[i] = f.mu.groups[g]
		delete(f.mu.groups, g)
	}
	for _, g := range gs {
		g.path = rename(g.path)
		f.mu.groups[g.path] = g
	}
	return nil
}
