package alloc

// treap is an ordered map (a randomized balanced binary search tree). The
// allocator needs ordered lookups the standard library lacks: the run that
// contains an offset (floor), and the smallest free run of at least some size
// (ceiling on (size, offset)). Expected depth is O(log n). Not safe for
// concurrent use; the Allocator's mutex protects it.
type treap[K any, V any] struct {
	root *tnode[K, V]
	cmp  func(a, b K) int
	n    int
	rng  uint64 // xorshift state for priorities
	// spare recycles removed nodes (linked through right), so that the
	// steady state of Alloc/Free makes no garbage.
	spare  *tnode[K, V]
	nspare int // INVARIANT: length of the spare list, at most maxSpare
}

// maxSpare bounds the recycled nodes kept for reuse.
const maxSpare = 256

type tnode[K any, V any] struct {
	key         K
	val         V
	prio        uint64
	left, right *tnode[K, V]
}

func newTreap[K any, V any](cmp func(a, b K) int) *treap[K, V] {
	return &treap[K, V]{cmp: cmp, rng: 0x9e3779b97f4a7c15}
}

func (t *treap[K, V]) nextPrio() uint64 {
	t.rng ^= t.rng << 13
	t.rng ^= t.rng >> 7
	t.rng ^= t.rng << 17
	return t.rng
}

// split divides n into keys < k and keys >= k.
func (t *treap[K, V]) split(n *tnode[K, V], k K) (l, r *tnode[K, V]) {
	if n == nil {
		return nil, nil
	}
	if t.cmp(n.key, k) < 0 {
		n.right, r = t.split(n.right, k)
		return n, r
	}
	l, n.left = t.split(n.left, k)
	return l, n
}

// merge joins l and r where every key of l is below every key of r.
func merge[K any, V any](l, r *tnode[K, V]) *tnode[K, V] {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = merge(l.right, r)
		return l
	default:
		r.left = merge(l, r.left)
		return r
	}
}

// set inserts k or replaces its value.
func (t *treap[K, V]) set(k K, v V) {
	if n := t.find(k); n != nil {
		n.val = v
		return
	}
	t.insertNew(k, v)
}

// insertNew inserts k, which must not be present.
func (t *treap[K, V]) insertNew(k K, v V) {
	nn := t.spare
	if nn != nil {
		t.spare = nn.right
		t.nspare--
		*nn = tnode[K, V]{key: k, val: v, prio: t.nextPrio()}
	} else {
		nn = &tnode[K, V]{key: k, val: v, prio: t.nextPrio()}
	}
	t.root = t.insert(t.root, nn)
	t.n++
}

func (t *treap[K, V]) insert(n, nn *tnode[K, V]) *tnode[K, V] {
	if n == nil {
		return nn
	}
	if nn.prio > n.prio {
		nn.left, nn.right = t.split(n, nn.key)
		return nn
	}
	if t.cmp(nn.key, n.key) < 0 {
		n.left = t.insert(n.left, nn)
	} else {
		n.right = t.insert(n.right, nn)
	}
	return n
}

// delete removes k; it reports whether k was present.
func (t *treap[K, V]) delete(k K) bool {
	_, ok := t.take(k)
	return ok
}

// take removes k and returns its value.
func (t *treap[K, V]) take(k K) (V, bool) {
	// Walk down iteratively, remembering the link to rewrite.
	link := &t.root
	for n := *link; n != nil; n = *link {
		switch c := t.cmp(k, n.key); {
		case c < 0:
			link = &n.left
		case c > 0:
			link = &n.right
		default:
			*link = merge(n.left, n.right)
			t.n--
			v := n.val
			if t.nspare < maxSpare {
				var zero tnode[K, V]
				*n = zero
				n.right, t.spare = t.spare, n
				t.nspare++
			}
			return v, true
		}
	}
	var zero V
	return zero, false
}

func (t *treap[K, V]) find(k K) *tnode[K, V] {
	for n := t.root; n != nil; {
		switch c := t.cmp(k, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n
		}
	}
	return nil
}

// floor returns the node with the greatest key <= k, or nil.
func (t *treap[K, V]) floor(k K) *tnode[K, V] {
	var best *tnode[K, V]
	for n := t.root; n != nil; {
		if t.cmp(n.key, k) <= 0 {
			best, n = n, n.right
		} else {
			n = n.left
		}
	}
	return best
}

// ceil returns the node with the smallest key >= k, or nil.
func (t *treap[K, V]) ceil(k K) *tnode[K, V] {
	var best *tnode[K, V]
	for n := t.root; n != nil; {
		if t.cmp(n.key, k) >= 0 {
			best, n = n, n.left
		} else {
			n = n.right
		}
	}
	return best
}

// max returns the node with the greatest key, or nil.
func (t *treap[K, V]) max() *tnode[K, V] {
	n := t.root
	for n != nil && n.right != nil {
		n = n.right
	}
	return n
}

// ascend calls fn for each node with key >= from in key order until fn
// returns false. fn must not modify the treap.
func (t *treap[K, V]) ascend(from K, fn func(k K, v V) bool) {
	t.walk(t.root, from, fn)
}

func (t *treap[K, V]) walk(n *tnode[K, V], from K, fn func(k K, v V) bool) bool {
	if n == nil {
		return true
	}
	if t.cmp(n.key, from) >= 0 {
		if !t.walk(n.left, from, fn) || !fn(n.key, n.val) {
			return false
		}
	}
	return t.walk(n.right, from, fn)
}
