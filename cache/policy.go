package cache

import "github.com/scc-dev/scc/cache/internal/policy"

// Replacement policies (SCC design §4.2, §4.2.1; SCC requirements §2.2 item 4, §3.3).
//
// How accesses reach a policy: a hit never takes the policy lock. It
// records the entry in a lossy buffer (its read slot's, latch.go, or the
// striped lockfree.Buffer for hits that took a pin); the buffers are
// replayed into the policy (Touch) under Cache.mu by the replayer
// goroutine (replay.go), never by a reader, and always before victims are
// chosen. Lost accesses only make the order slightly less exact. A read
// hit on an entry whose record still waits in the same slot adds none
// (pendingFilter), so LFU counts about one access per entry per slot and
// drain (an approximation of frequency, like any sampled LFU). We chose buffers over CLOCK bits
// because the default policy is SCC design's two-stage LRU, which needs real
// recency order per dataset and per chunk; CLOCK would only approximate it.
// (SIEVE is the CLOCK-like option and uses a visited bit; S3-FIFO uses
// 2-bit frequencies that a hit only bumps.)
//
// The policies themselves are in package policy (internal/policy). Adding
// one: add it there, then a PolicyKind constant and a case in newPolicy.
// The cache, not the policy, enforces per-dataset minimums (it answers
// exhausted) and checks whether an entry can be evicted right now (it
// answers skip), so a policy only keeps an order.
//
// Every policy method is called with Cache.mu held, and uses the fields
// of entry and Dataset marked "guarded by Cache.mu" (pnext, pprev,
// counter, visited, dnext, dprev, onList, exhausted, lru) through
// entryNodes.

type (
	// verdict is the cache's answer to a nominated entry.
	verdict = policy.Verdict
	// entryList is a policy's intrusive list of entries (Dataset.lru).
	entryList = policy.List[*entry]
)

const (
	take      = policy.Take      // the cache took e as a victim
	skip      = policy.Skip      // e cannot go now (in use or already going)
	exhausted = policy.Exhausted // e's dataset is at its minimum: offer no more of its chunks this round
	stop      = policy.Stop      // enough space nominated
)

// newPolicy returns the policy k selects, over the cache's entries.
func newPolicy(k PolicyKind, secondChance bool) policy.Policy[*entry] {
	kind := policy.TwoStageLRU
	switch k {
	case PolicyLRU:
		kind = policy.LRU
	case PolicyMRU:
		kind = policy.MRU
	case PolicyLFU:
		kind = policy.LFU
	case PolicyRandom:
		kind = policy.Random
	case PolicySIEVE:
		kind = policy.SIEVE
	case PolicyS3FIFO:
		kind = policy.S3FIFO
	}
	return policy.New[*entry, *Dataset, entryNodes](kind, secondChance)
}

// ghostSeed keys the chunk-key hashes S3-FIFO's ghost queue remembers; any
// fixed value works (a collision only sends one chunk to its main queue
// instead of its small one).
const ghostSeed = 0x9e3779b97f4a7c15

// entryNodes shows the policies their fields in entry and Dataset, all
// guarded by Cache.mu.
type entryNodes struct{}

func (entryNodes) Next(e *entry) **entry          { return &e.pnext }
func (entryNodes) Prev(e *entry) **entry          { return &e.pprev }
func (entryNodes) Counter(e *entry) *int32        { return &e.counter }
func (entryNodes) Visited(e *entry) *bool         { return &e.visited }
func (entryNodes) Linked(e *entry) bool           { return e.linked }
func (entryNodes) Partial(e *entry) bool          { return e.partial().Load() }
func (entryNodes) Key(e *entry) uint64            { return e.key.hash(ghostSeed) }
func (entryNodes) Group(e *entry) *Dataset        { return e.ds }
func (entryNodes) GroupNext(d *Dataset) **Dataset { return &d.dnext }
func (entryNodes) GroupPrev(d *Dataset) **Dataset { return &d.dprev }
func (entryNodes) OnList(d *Dataset) *bool        { return &d.onList }
func (entryNodes) Exhausted(d *Dataset) *bool     { return &d.exhausted }
func (entryNodes) Chunks(d *Dataset) *entryList   { return &d.lru }
