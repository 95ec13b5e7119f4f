// Package policy holds the chunk cache's replacement policies (SCC design
// §4.2, §4.2.1; SCC requirements §2.2 item 4, §3.3): two-stage LRU, LRU,
// MRU, LFU, random, SIEVE and S3-FIFO.
//
// A policy only keeps an order. The cache, not the policy, enforces
// per-dataset minimums (it answers Exhausted) and checks whether an entry
// can be evicted right now (it answers Skip). Every method is called with
// the cache's policy lock held; a policy has no lock of its own.
//
// The policies are intrusive: the links and counters they keep per entry
// (and, for the two-stage LRU, per dataset) are fields of the cache's own
// entry and dataset types, so adding a chunk allocates nothing. A policy
// reaches them through Nodes, which the cache implements.
//
// Adding a policy: implement Policy (and checker, for Contents), add a
// Kind and a case in New, and add it to the policy table tests.
package policy

import "fmt"

// Policy is a replacement order over entries of type E.
type Policy[E comparable] interface {
	// Add: e just became resident (counts as an access).
	Add(e E)
	// Remove: e left the cache. e was added before.
	Remove(e E)
	// Touch: e was accessed. e may already have been removed (a stale
	// access record); Nodes.Linked tells.
	Touch(e E)
	// Nominate offers entries in eviction order to try, until try answers
	// Stop or every entry was offered. An entry answered Take stays
	// linked until the cache calls Remove; it is not offered twice in one
	// call. Nominate terminates even when try always answers Skip. try
	// must not call back into the policy.
	Nominate(try func(e E) Verdict)
}

// Verdict is the cache's answer to a nominated entry.
type Verdict uint8

const (
	Take      Verdict = iota // the cache took e as a victim
	Skip                     // e cannot go now (in use or already going)
	Exhausted                // e's group is at its minimum: offer no more of its entries this round
	Stop                     // enough space nominated
)

// Kind names a policy.
type Kind int

const (
	TwoStageLRU Kind = iota
	LRU
	MRU
	LFU
	Random
	SIEVE
	S3FIFO
)

// Nodes tells a policy where its per-entry state lives in entries of type
// E, and its per-group state in groups of type G (the cache's datasets).
// Its methods are called with the policy lock held.
type Nodes[E, G comparable] interface {
	// Next and Prev are e's links in the List that holds it.
	Next(e E) *E
	Prev(e E) *E
	// Counter is e's policy counter (SCC design §2.2 chunk_counter).
	Counter(e E) *int32
	// Visited is e's SIEVE visited bit.
	Visited(e E) *bool
	// Linked reports whether e is resident and was added (and not
	// removed) — false for the entry of a stale access record.
	Linked(e E) bool
	// Partial reports whether e's chunk was last read or written in part:
	// with second chance such a chunk gets one more pass.
	Partial(e E) bool
	// Key is a hash of e's chunk key: the same for every load of one
	// chunk (S3-FIFO's ghost queue remembers chunks by it).
	Key(e E) uint64
	// Group is e's group; never the zero G.
	Group(e E) G
	// GroupNext and GroupPrev link g in the two-stage LRU's group list;
	// OnList and Exhausted are g's place there; Chunks is g's own chunk
	// list. Only the two-stage LRU uses them.
	GroupNext(g G) *G
	GroupPrev(g G) *G
	OnList(g G) *bool
	Exhausted(g G) *bool
	Chunks(g G) *List[E]
}

// New returns a policy of kind k. With secondChance, the policies that
// support it (two-stage LRU, LRU, S3-FIFO) give a partially used entry
// one more pass before evicting it. An unknown kind is the two-stage LRU.
func New[E, G comparable, N Nodes[E, G]](k Kind, secondChance bool) Policy[E] {
	switch k {
	case LRU:
		return &listPolicy[E, G, N]{secondChance: secondChance}
	case MRU:
		return &listPolicy[E, G, N]{mru: true}
	case LFU:
		return &lfuPolicy[E, G, N]{}
	case Random:
		return &randomPolicy[E, G, N]{}
	case SIEVE:
		return &sievePolicy[E, G, N]{}
	case S3FIFO:
		return &s3fifoPolicy[E, G, N]{secondChance: secondChance}
	default:
		return &twoStageLRU[E, G, N]{secondChance: secondChance}
	}
}

// checker is implemented by every policy, for Contents.
type checker[E comparable] interface {
	contents(limit int) ([]E, error)
}

// Contents returns every entry p holds, each as often as p's structures
// hold it (lists from their heads), and an error when those structures
// disagree with themselves: a list with a cycle or more than limit entries,
// a count or an index that does not match. It is for consistency checks;
// the caller holds the policy lock.
func Contents[E comparable](p Policy[E], limit int) ([]E, error) {
	c, ok := p.(checker[E])
	if !ok {
		return nil, fmt.Errorf("policy %T cannot be checked", p)
	}
	return c.contents(limit)
}

// List is an intrusive doubly linked list over the entries' Next and Prev
// links. The zero value is empty.
type List[E comparable] struct{ head, tail E }

// links is what a List needs of Nodes.
type links[E comparable] interface {
	Next(e E) *E
	Prev(e E) *E
}

func pushFront[E comparable, L links[E]](n L, l *List[E], e E) {
	var none E
	*n.Prev(e), *n.Next(e) = none, l.head
	if l.head != none {
		*n.Prev(l.head) = e
	} else {
		l.tail = e
	}
	l.head = e
}

func unlink[E comparable, L links[E]](n L, l *List[E], e E) {
	var none E
	if p := *n.Prev(e); p != none {
		*n.Next(p) = *n.Next(e)
	} else {
		l.head = *n.Next(e)
	}
	if x := *n.Next(e); x != none {
		*n.Prev(x) = *n.Prev(e)
	} else {
		l.tail = *n.Prev(e)
	}
	*n.Next(e), *n.Prev(e) = none, none
}

func moveFront[E comparable, L links[E]](n L, l *List[E], e E) {
	if l.head == e {
		return
	}
	unlink(n, l, e)
	pushFront(n, l, e)
}

// appendList appends l's entries, head first, to out; it fails on a
// cycle, a broken back link or more than limit entries.
func appendList[E comparable, L links[E]](n L, out []E, l *List[E], limit int) ([]E, error) {
	var none E
	prev, k := none, 0
	for e := l.head; e != none; e = *n.Next(e) {
		if k++; k > limit {
			return out, fmt.Errorf("policy list longer than %d (a cycle?)", limit)
		}
		if *n.Prev(e) != prev {
			return out, fmt.Errorf("policy list: broken back link at entry %d", k)
		}
		out = append(out, e)
		prev = e
	}
	if l.tail != prev {
		return out, fmt.Errorf("policy list: tail is not the last entry")
	}
	return out, nil
}
