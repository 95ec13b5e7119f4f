package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"strings"

	"github.com/scc-dev/scc/engine/internal/format"
)

// Groups (HDF5's data model): a tree of named groups whose leaves are
// datasets. A dataset's catalog name is its full path from the root
// ("a/b/d"); the groups other than the root are listed in the catalog's
// Groups part with their attributes (FORMAT.md §5). The root group's
// attributes are the file's.
//
// A file written before groups (no Groups part) has implicit groups: the
// parents of its datasets' '/'-separated names. A writable open makes
// them explicit, so that the next commit lists them, unless some name is
// not a path (an empty component, say): such a file keeps its flat names
// and refuses group changes.

// groupState is one group other than the root; its Group handles share it.
type groupState struct {
	path    string // under File.mu
	attrs   attrHolder
	deleted bool // under File.mu
}

// Group is a handle on a group of an open File: the one type for a node of
// the tree that holds others. The File is its root group. Paths given to
// a Group's calls resolve inside it ("raw/frames"), or from the root when
// they start with '/' ("/raw/frames"); Path and Member.Path are always
// from the root. A moved group's handles follow it; a deleted group's
// calls fail with ErrDeleted. Safe for concurrent use.
type Group struct {
	f *File
	g *groupState // nil for the root
}

// MemberKind tells a group member's kind.
type MemberKind int

// The kinds of group members.
const (
	MemberDataset MemberKind = iota + 1
	MemberGroup
)

func (k MemberKind) String() string {
	switch k {
	case MemberDataset:
		return "dataset"
	case MemberGroup:
		return "group"
	}
	return fmt.Sprintf("MemberKind(%d)", int(k))
}

// Member is one entry of a group: its name inside the group, its path
// from the root and its kind.
type Member struct {
	Name string // "b" for "/a/b"
	Path string // "/a/b"
	Kind MemberKind
}

// cleanPath turns a path that resolves from the root ("a/b", "/a/b")
// into its canonical form ("a/b"; "" for the root). Empty components are
// ErrInvalid. It finds what exists, names older files may hold included;
// what is created obeys the stricter name rule (newPath, names.go).
func cleanPath(p string) (string, error) {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "", nil
	}
	if err := format.ValidPath(p); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return p, nil
}

func (f *File) lookupDataset(name string) (format.CatalogEntry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.mu.catalog[name]
	return e, ok
}

// checkNewLocked checks that a dataset or group may be created at p: the
// name is free, and its parent is a group (or, with parents, every
// ancestor that exists is a group). Caller holds f.mu.
func (f *File) checkNewLocked(p string, parents bool) error {
	if _, ok := f.mu.catalog[p]; ok {
		return fmt.Errorf("%w: dataset %q", ErrExists, p)
	}
	if _, ok := f.mu.groups[p]; ok {
		return fmt.Errorf("%w: group %q", ErrExists, p)
	}
	if !f.mu.explicit {
		return nil
	}
	for a := format.Parent(p); a != ""; a = format.Parent(a) {
		if _, ok := f.mu.catalog[a]; ok {
			return fmt.Errorf("%w: %q is a dataset, not a group", ErrInvalid, a)
		}
		if _, ok := f.mu.groups[a]; ok {
			return nil // its ancestors are groups already
		}
		if !parents {
			return fmt.Errorf("%w: group %q", ErrNotFound, a)
		}
	}
	return nil
}

// addParentsLocked makes every missing ancestor of p a group without
// attributes. Caller holds f.mu and checked p (checkNewLocked).
func (f *File) addParentsLocked(p string) {
	if format.ValidPath(p) != nil {
		return // a flat name of an older file: no groups
	}
	for a := format.Parent(p); a != ""; a = format.Parent(a) {
		if _, ok := f.mu.groups[a]; ok {
			return
		}
		f.mu.groups[a] = &groupState{path: a}
	}
}

// setGroups installs the groups a committed catalog describes: its Groups
// part, or for an older catalog the implicit ones (see above). Existing
// group states are kept for their handles. Caller holds f.mu.
func (f *File) setGroupsLocked(cat []format.CatalogEntry, parts format.CatalogParts) error {
	old := f.mu.groups
	f.mu.groups = make(map[string]*groupState)
	keep := func(p string) *groupState {
		if g, ok := old[p]; ok {
			delete(old, p)
			return g
		}
		return &groupState{path: p}
	}
	if parts.HasGroups {
		f.mu.explicit = true
		for _, ge := range parts.Groups {
			attrs, err := decodeAttrs(ge.Attrs)
			if err != nil {
				f.mu.groups = old
				return fmt.Errorf("group %q: %w", ge.Path, err)
			}
			g := keep(ge.Path)
			g.attrs.set.Store(attrs)
			f.mu.groups[ge.Path] = g
		}
	} else {
		// Paths only: then the next commit can list the groups.
		f.mu.explicit = true
		for _, e := range cat {
			if format.ValidPath(e.Name) != nil {
				f.mu.explicit = false
			}
		}
		for _, e := range cat {
			if format.ValidPath(e.Name) != nil {
				continue
			}
			for a := format.Parent(e.Name); a != ""; a = format.Parent(a) {
				if _, ok := f.mu.groups[a]; ok {
					break
				}
				g := keep(a)
				g.attrs.set.Store(emptyAttrs)
				f.mu.groups[a] = g
			}
		}
	}
	for _, g := range old {
		g.deleted = true
	}
	return nil
}

// groupPartsLocked returns the catalog's Groups part for a commit, first
// making the parent of every dataset a group (every create call made
// them already; this keeps the catalog decodable whatever happened).
// Caller holds f.mu.
func (f *File) groupPartsLocked(entries []format.CatalogEntry) (bool, []format.GroupEntry) {
	if !f.mu.explicit {
		return false, nil
	}
	for _, e := range entries {
		// No create call makes a name that is not a path, or is a
		// group's (the name rule, names.go); should one be in the catalog
		// anyway, a Groups part would make it undecodable, so the file
		// goes on with flat names, as an older writer left it.
		if _, isGroup := f.mu.groups[e.Name]; isGroup || format.ValidPath(e.Name) != nil {
			return false, nil
		}
	}
	for _, e := range entries {
		f.addParentsLocked(e.Name)
	}
	gs := make([]format.GroupEntry, 0, len(f.mu.groups))
	for p, g := range f.mu.groups {
		gs = append(gs, format.GroupEntry{Path: p, Attrs: g.attrs.load().encoding()})
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].Path < gs[j].Path })
	return true, gs
}

// createGroup creates the group at canonical path p, which obeys the name
// rule, and its missing parents, as HDF5's create-intermediate-groups
// property does; an ancestor that is a dataset is ErrInvalid.
func (f *File) createGroup(ctx context.Context, p string) (*Group, error) {
	if err := f.writeCheck(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return nil, ErrClosed
	}
	if !f.mu.explicit {
		return nil, fmt.Errorf("%w: the file's dataset names are not paths; it takes no groups", ErrInvalid)
	}
	if err := f.checkNewLocked(p, true); err != nil {
		return nil, err
	}
	f.addParentsLocked(p)
	g := &groupState{path: p}
	g.attrs.set.Store(emptyAttrs)
	f.mu.groups[p] = g
	return &Group{f: f, g: g}, nil
}

// openGroup opens the group at path from the root ("" or "/" is the
// root).
func (f *File) openGroup(path string) (*Group, error) {
	if err := f.checkOpen(); err != nil {
		return nil, err
	}
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	if p == "" {
		return f.Group, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.mu.groups[p]
	if !ok {
		if _, ds := f.mu.catalog[p]; ds {
			return nil, fmt.Errorf("%w: %q is a dataset, not a group", ErrInvalid, p)
		}
		return nil, fmt.Errorf("%w: group %q", ErrNotFound, p)
	}
	return &Group{f: f, g: g}, nil
}

func (f *File) writeCheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.checkOpen(); err != nil {
		return err
	}
	if f.readOnly {
		return ErrReadOnly
	}
	return nil
}

// Path returns the group's path from the root, "/" for the root.
func (g *Group) Path() string {
	if g.g == nil {
		return "/"
	}
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	return "/" + g.g.path
}

// Name returns the last component of the group's path, "/" for the root.
func (g *Group) Name() string {
	if g.g == nil {
		return "/"
	}
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	return lastComponent(g.g.path)
}

// path is the group's canonical path ("" for the root), or ErrDeleted.
func (g *Group) path() (string, error) {
	if err := g.f.checkOpen(); err != nil {
		return "", err
	}
	if g.g == nil {
		return "", nil
	}
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	if g.g.deleted {
		return "", fmt.Errorf("%w: group %q", ErrDeleted, g.g.path)
	}
	return g.g.path, nil
}

// join resolves name inside the group: a name starting with '/' resolves
// from the root.
func (g *Group) join(name string) (string, error) {
	base, err := g.path()
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(name, "/") || base == "" {
		return name, nil
	}
	return base + "/" + name, nil
}

// newPath resolves the name of a member to create (names.go): the name
// obeys the name rule, and one starting with '/' resolves from the root.
func (g *Group) newPath(name string) (string, error) {
	p, err := newPath(name)
	if err != nil {
		return "", err
	}
	base, err := g.path()
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(name, "/") || base == "" {
		return p, nil
	}
	return base + "/" + p, nil
}

// CreateDataset creates a dataset at path, which obeys the name rule
// (ValidateName); missing parent groups are created, and an ancestor that
// is a dataset is ErrInvalid. The dataset is durable after the next
// Flush. Creating does no I/O today; ctx is checked so that callers treat
// it like every other call that may block.
func (g *Group) CreateDataset(ctx context.Context, path string, spec DatasetSpec) (*Dataset, error) {
	p, err := g.newPath(path)
	if err != nil {
		return nil, err
	}
	if err := g.f.writeCheck(ctx); err != nil {
		return nil, err
	}
	return g.f.createDataset(ctx, p, spec)
}

// OpenDataset opens the dataset at path. opts, when not nil, sets the
// dataset's access options (see DatasetOptions for how long they hold); on
// an error no handle is returned and the dataset's options are as they
// were.
func (g *Group) OpenDataset(ctx context.Context, path string, opts *DatasetOptions) (*Dataset, error) {
	if opts != nil {
		if err := opts.Validate(); err != nil {
			return nil, err
		}
	}
	p, err := g.join(path)
	if err != nil {
		return nil, err
	}
	ds, err := g.f.openDataset(ctx, p, true)
	if err != nil || opts == nil {
		return ds, err
	}
	if err := ds.s.applyOptions(*opts); err != nil {
		_ = ds.Close(ctx)
		return nil, err
	}
	return ds, nil
}

// CreateGroup creates the group at path, which obeys the name rule
// (ValidateName), and its missing parents, as HDF5's
// create-intermediate-groups property does; an ancestor that is a dataset
// is ErrInvalid. It is durable after the next Flush.
func (g *Group) CreateGroup(ctx context.Context, path string) (*Group, error) {
	if err := g.f.writeCheck(ctx); err != nil {
		return nil, err
	}
	if path == "" || path == "/" {
		return nil, fmt.Errorf("%w: group %q: the root exists", ErrExists, path)
	}
	p, err := g.newPath(path)
	if err != nil {
		return nil, err
	}
	return g.f.createGroup(ctx, p)
}

// OpenGroup opens the group at path ("/" is the root). It does no I/O;
// ctx is checked so that callers treat it like every other open.
func (g *Group) OpenGroup(ctx context.Context, path string) (*Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := g.join(path)
	if err != nil {
		return nil, err
	}
	return g.f.openGroup(p)
}

// members lists the group's datasets and groups, sorted by name.
func (g *Group) members() ([]Member, error) {
	base, err := g.path()
	if err != nil {
		return nil, err
	}
	f := g.f
	f.mu.Lock()
	var ms []Member
	for p := range f.mu.groups {
		if format.Parent(p) == base {
			ms = append(ms, Member{Name: lastComponent(p), Path: "/" + p, Kind: MemberGroup})
		}
	}
	for p := range f.mu.catalog {
		if format.ValidPath(p) == nil && format.Parent(p) == base {
			ms = append(ms, Member{Name: lastComponent(p), Path: "/" + p, Kind: MemberDataset})
		} else if base == "" && format.ValidPath(p) != nil {
			ms = append(ms, Member{Name: p, Path: "/" + p, Kind: MemberDataset}) // a flat name
		}
	}
	f.mu.Unlock()
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms, nil
}

// Members yields the group's datasets and groups, sorted by name, from a
// snapshot taken when the iteration starts. An error (the group was
// deleted, the file closed) is yielded once, and ends the iteration:
//
//	for m, err := range g.Members() {
//		if err != nil {
//			return err
//		}
//		fmt.Println(m.Path, m.Kind)
//	}
func (g *Group) Members() iter.Seq2[Member, error] {
	return func(yield func(Member, error) bool) {
		ms, err := g.members()
		if err != nil {
			yield(Member{}, err)
			return
		}
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Walk yields every dataset and group below g, depth first: a group
// before what it holds, siblings in name order (as Members yields them).
// Each group's members are listed when the walk reaches it, so members
// created or deleted meanwhile may or may not be seen. An error is
// yielded once, and ends the walk.
func (g *Group) Walk() iter.Seq2[Member, error] {
	return func(yield func(Member, error) bool) {
		g.walk(yield, nil)
	}
}

// Datasets yields every dataset below g, as Walk does.
func (g *Group) Datasets() iter.Seq2[Member, error] {
	return func(yield func(Member, error) bool) {
		g.walk(yield, func(m Member) bool { return m.Kind == MemberDataset })
	}
}

// walk yields what keep keeps (everything when nil) below g; false when
// the caller stopped or an error ended it.
func (g *Group) walk(yield func(Member, error) bool, keep func(Member) bool) bool {
	ms, err := g.members()
	if err != nil {
		yield(Member{}, err)
		return false
	}
	for _, m := range ms {
		if (keep == nil || keep(m)) && !yield(m, nil) {
			return false
		}
		if m.Kind != MemberGroup {
			continue
		}
		sub, err := g.f.openGroup(m.Path)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			yield(Member{}, err)
			return false
		}
		if !sub.walk(yield, keep) {
			return false
		}
	}
	return true
}

func lastComponent(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

func (g *Group) holder() (*attrHolder, error) {
	if _, err := g.path(); err != nil {
		return nil, err
	}
	if g.g == nil {
		return &g.f.attrs, nil
	}
	return &g.g.attrs, nil
}

// SetAttr sets an attribute of the group (the root's are the file's); it
// is durable after the next Flush.
func (g *Group) SetAttr(ctx context.Context, name string, v AttrValue) error {
	if err := g.f.attrCheck(ctx); err != nil {
		return err
	}
	h, err := g.holder()
	if err != nil {
		return err
	}
	return h.change(name, &v, func() {})
}

// DeleteAttr removes an attribute of the group (ErrNotFound if none).
func (g *Group) DeleteAttr(ctx context.Context, name string) error {
	if err := g.f.attrCheck(ctx); err != nil {
		return err
	}
	h, err := g.holder()
	if err != nil {
		return err
	}
	return h.change(name, nil, func() {})
}

// Attr returns an attribute of the group (ErrNotFound if none).
func (g *Group) Attr(name string) (AttrValue, error) {
	h, err := g.holder()
	if err != nil {
		return AttrValue{}, err
	}
	return h.get(name)
}

// Attrs lists the group's attributes sorted by name.
func (g *Group) Attrs() ([]Attr, error) {
	h, err := g.holder()
	if err != nil {
		return nil, err
	}
	return h.list(), nil
}
