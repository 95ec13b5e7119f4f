package policy

import "fmt"

// tEntry and tGroup stand in for the cache's entries and datasets: they
// carry the fields a policy keeps, and what the test harnesses need (an
// id, a size and a minimum per group).
type tEntry struct {
	next, prev *tEntry
	counter    int32
	visited    bool
	linked     bool
	partial    bool
	g          *tGroup
	id         uint64
}

type tGroup struct {
	id         int
	next, prev *tGroup
	onList     bool
	exhausted  bool
	chunks     List[*tEntry]
	size, min  int64 // entries held; the minimum the harness enforces
}

type tNodes struct{}

func (tNodes) Next(e *tEntry) **tEntry         { return &e.next }
func (tNodes) Prev(e *tEntry) **tEntry         { return &e.prev }
func (tNodes) Counter(e *tEntry) *int32        { return &e.counter }
func (tNodes) Visited(e *tEntry) *bool         { return &e.visited }
func (tNodes) Linked(e *tEntry) bool           { return e.linked }
func (tNodes) Partial(e *tEntry) bool          { return e.partial }
func (tNodes) Key(e *tEntry) uint64            { return uint64(e.g.id)<<40 ^ e.id }
func (tNodes) Group(e *tEntry) *tGroup         { return e.g }
func (tNodes) GroupNext(g *tGroup) **tGroup    { return &g.next }
func (tNodes) GroupPrev(g *tGroup) **tGroup    { return &g.prev }
func (tNodes) OnList(g *tGroup) *bool          { return &g.onList }
func (tNodes) Exhausted(g *tGroup) *bool       { return &g.exhausted }
func (tNodes) Chunks(g *tGroup) *List[*tEntry] { return &g.chunks }

func newTest(k Kind, second bool) Policy[*tEntry] {
	return New[*tEntry, *tGroup, tNodes](k, second)
}

func name(e *tEntry) string { return fmt.Sprintf("%d/%d", e.g.id, e.id) }

// kinds is every policy, named for subtests.
var kinds = []struct {
	k    Kind
	name string
}{
	{TwoStageLRU, "two-stage-lru"}, {LRU, "lru"}, {MRU, "mru"}, {LFU, "lfu"},
	{Random, "random"}, {SIEVE, "sieve"}, {S3FIFO, "s3fifo"},
}
