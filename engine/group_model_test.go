package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// modelNode is one node of the reference tree.
type modelNode struct {
	group bool
	attrs map[string]string
	data  byte // a dataset's every element
}

type treeModel map[string]*modelNode // by canonical path; the root is ""

func (m treeModel) children(p string) []Member {
	var ms []Member
	for q, n := range m {
		if q == "" || parentOf(q) != p {
			continue
		}
		k := MemberDataset
		if n.group {
			k = MemberGroup
		}
		ms = append(ms, Member{Name: q[strings.LastIndexByte(q, '/')+1:], Kind: k})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func join(g, n string) string {
	if g == "" {
		return n
	}
	return g + "/" + n
}

func (m treeModel) paths(group bool) []string {
	var ps []string
	for p, n := range m {
		if n.group == group {
			ps = append(ps, p)
		}
	}
	sort.Strings(ps)
	return ps
}

func inside(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

var modelSpec = DatasetSpec{Type: Uint8, Shape: []uint64{16}, Chunk: []uint64{16}}

// verify walks the file's tree from the root and compares it, with the
// group attributes and the datasets' data, to the model.
func (m treeModel) verify(t *testing.T, f *File, step int) {
	t.Helper()
	for _, p := range m.paths(true) {
		g, err := f.OpenGroup(context.Background(), p)
		if err != nil {
			t.Fatalf("step %d: open group %q: %v", step, p, err)
		}
		got, err := collectMembers(g)
		if err != nil {
			t.Fatalf("step %d: members of %q: %v", step, p, err)
		}
		if want := m.children(p); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: members of %q: %v, want %v", step, p, got, want)
		}
		attrs, err := g.Attrs()
		if err != nil {
			t.Fatal(err)
		}
		if len(attrs) != len(m[p].attrs) {
			t.Fatalf("step %d: group %q has %d attributes, want %d", step, p, len(attrs), len(m[p].attrs))
		}
		for k, v := range m[p].attrs {
			if a, err := g.Attr(k); err != nil || !a.Equal(StringAttr(v)) {
				t.Fatalf("step %d: group %q attribute %q: %v %v, want %q", step, p, k, a, err, v)
			}
		}
	}
	for _, p := range m.paths(false) {
		d, err := f.OpenDataset(context.Background(), p, nil)
		if err != nil {
			t.Fatalf("step %d: open dataset %q: %v", step, p, err)
		}
		buf := make([]byte, 16)
		if err := d.Read(t.Context(), All([]uint64{16}), buf); err != nil {
			t.Fatalf("step %d: read %q: %v", step, p, err)
		}
		if !bytes.Equal(buf, bytes.Repeat([]byte{m[p].data}, 16)) {
			t.Fatalf("step %d: dataset %q reads %v, want all %d", step, p, buf, m[p].data)
		}
		d.Close(context.Background())
	}
	if got, want := len(f.datasetNames()), len(m.paths(false)); got != want {
		t.Fatalf("step %d: %d datasets, want %d", step, got, want)
	}
}

// TestGroupModel drives random creates, writes, attribute changes,
// deletes, moves, flushes and reopens against a reference tree, checking
// the whole tree after each step, while a reader goroutine walks the tree
// and reads datasets concurrently: it may find names gone (ErrNotFound,
// ErrDeleted) but never a dataset whose elements are not one written
// value. Check runs on the file at cleanup.
func TestGroupModel(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { groupModelRun(t, seed, 250) })
	}
}

func groupModelRun(t *testing.T, seed uint64, steps int) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 7))
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	var cur atomic.Pointer[File]
	cur.Store(f)
	m := treeModel{"": {group: true, attrs: map[string]string{}}}
	var handles []*Dataset // open handles, some on deleted or moved datasets
	handleOf := map[*Dataset]string{}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readerErr atomic.Pointer[error]
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr := rand.New(rand.NewPCG(seed, 9))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := readerPass(cur.Load(), rr); err != nil {
				readerErr.CompareAndSwap(nil, &err)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
		if p := readerErr.Load(); p != nil {
			t.Fatalf("reader: %v", *p)
		}
	}()

	name := func() string { return fmt.Sprintf("n%d", rng.IntN(4)) }
	pick := func(ps []string) string { return ps[rng.IntN(len(ps))] }
	for step := 0; step < steps; step++ {
		groups, dsets := m.paths(true), m.paths(false)
		op := rng.IntN(10)
		switch {
		case op == 0: // create group
			p := join(pick(groups), name())
			_, err := f.CreateGroup(ctx, p)
			if _, taken := m[p]; taken {
				if !errors.Is(err, ErrExists) {
					t.Fatalf("step %d: create group %q over a member: %v", step, p, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: create group %q: %v", step, p, err)
			}
			m[p] = &modelNode{group: true, attrs: map[string]string{}}
		case op == 1: // create dataset and write it
			g := pick(groups)
			p := join(g, name())
			gh, err := f.OpenGroup(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			d, err := gh.CreateDataset(ctx, lastComponent(p), modelSpec)
			if _, taken := m[p]; taken {
				if !errors.Is(err, ErrExists) {
					t.Fatalf("step %d: create dataset %q over a member: %v", step, p, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: create dataset %q: %v", step, p, err)
			}
			v := byte(rng.IntN(250) + 1)
			if err := d.Write(ctx, All([]uint64{16}), bytes.Repeat([]byte{v}, 16)); err != nil {
				t.Fatal(err)
			}
			m[p] = &modelNode{data: v}
			handles = append(handles, d)
			handleOf[d] = p
		case op == 2 || op == 3: // write through a handle (maybe deleted)
			if len(handles) == 0 {
				break
			}
			d := handles[rng.IntN(len(handles))]
			v := byte(rng.IntN(250) + 1)
			err := d.Write(ctx, All([]uint64{16}), bytes.Repeat([]byte{v}, 16))
			p, live := handleOf[d]
			if !live {
				if !errors.Is(err, ErrDeleted) {
					t.Fatalf("step %d: write to a deleted dataset: %v", step, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: write %q: %v", step, p, err)
			}
			m[p].data = v
		case op == 4: // group attribute
			g := pick(groups)
			gh, err := f.OpenGroup(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			k, v := name(), fmt.Sprint(rng.IntN(100))
			if err := gh.SetAttr(ctx, k, StringAttr(v)); err != nil {
				t.Fatal(err)
			}
			m[g].attrs[k] = v
		case op == 5: // delete
			all := append(groups[1:], dsets...)
			if len(all) == 0 {
				break
			}
			p := pick(all)
			rec := rng.IntN(2) == 0
			err := f.Delete(ctx, p, &DeleteOptions{Recursive: rec})
			if m[p].group && len(m.children(p)) > 0 && !rec {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("step %d: delete non-empty %q: %v", step, p, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: delete %q: %v", step, p, err)
			}
			for q := range m {
				if inside(q, p) {
					delete(m, q)
				}
			}
			for d, q := range handleOf {
				if inside(q, p) {
					delete(handleOf, d)
				}
			}
		case op == 6: // move
			all := append(groups[1:], dsets...)
			if len(all) == 0 {
				break
			}
			from := pick(all)
			to := join(pick(groups), name())
			err := f.Move(ctx, from, to)
			_, taken := m[to]
			switch {
			case inside(to, from):
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("step %d: move %q into itself (%q): %v", step, from, to, err)
				}
			case taken:
				if !errors.Is(err, ErrExists) {
					t.Fatalf("step %d: move %q onto %q: %v", step, from, to, err)
				}
			default:
				if err != nil {
					t.Fatalf("step %d: move %q to %q: %v", step, from, to, err)
				}
				moved := treeModel{}
				for q, n := range m {
					if inside(q, from) {
						moved[to+q[len(from):]] = n
						delete(m, q)
					}
				}
				for q, n := range moved {
					m[q] = n
				}
				for d, q := range handleOf {
					if inside(q, from) {
						handleOf[d] = to + q[len(from):]
						if d.Path() != "/"+handleOf[d] {
							t.Fatalf("step %d: moved handle names %q, want %q", step, d.Path(), handleOf[d])
						}
					}
				}
			}
		case op == 7 || op == 8:
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		default: // reopen
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			f = tOpen(t, drv, nil)
			cur.Store(f)
			handles, handleOf = nil, map[*Dataset]string{}
		}
		m.verify(t, f, step)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, drv, &Options{ReadOnly: true})
	cur.Store(f)
	m.verify(t, f, steps)
}

// readerPass walks the tree once and reads every dataset it meets. Names
// may go while it walks; data may not be torn or foreign.
func readerPass(f *File, rng *rand.Rand) error {
	gone := func(err error) bool {
		return errors.Is(err, ErrNotFound) || errors.Is(err, ErrDeleted) || errors.Is(err, ErrClosed)
	}
	queue := []string{""}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		g, err := f.OpenGroup(context.Background(), p)
		if err != nil {
			if gone(err) || errors.Is(err, ErrInvalid) { // a dataset moved in
				continue
			}
			return fmt.Errorf("open group %q: %w", p, err)
		}
		ms, err := collectMembers(g)
		if err != nil {
			if gone(err) {
				continue
			}
			return fmt.Errorf("members of %q: %w", p, err)
		}
		for _, mb := range ms {
			q := join(p, mb.Name)
			if mb.Kind == MemberGroup {
				queue = append(queue, q)
				continue
			}
			if rng.IntN(2) == 0 {
				continue
			}
			d, err := f.OpenDataset(context.Background(), q, nil)
			if err != nil {
				if gone(err) {
					continue
				}
				return fmt.Errorf("open %q: %w", q, err)
			}
			buf := make([]byte, 16)
			err = d.Read(context.Background(), All([]uint64{16}), buf)
			d.Close(context.Background())
			if err != nil {
				if gone(err) {
					continue
				}
				return fmt.Errorf("read %q (file closed %v): %w", q, f.closed.Load(), err)
			}
			if !bytes.Equal(buf, bytes.Repeat(buf[:1], 16)) {
				return fmt.Errorf("dataset %q reads torn or foreign data %v", q, buf)
			}
		}
	}
	return nil
}
