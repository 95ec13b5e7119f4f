package cache

import (
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/lockfree"
)

// Replaying access records off the reading goroutine.
//
// A hit appends its entry to the lossy striped buffer (Cache.access.buf,
// lockfree.Buffer.Record) and returns: it never applies records to the
// policy itself. A background goroutine, the replayer, takes the policy
// lock and drains every stripe into the policy (touchLocked). Evictions
// drain too, under the same lock, before they choose victims, so the order
// they see holds every record not dropped; between drains it is stale by
// at most the records still buffered, as in otter and Caffeine.
//
// Why: the replay is a list move per record (the entry's, its two
// neighbours' and the list head's lines), and done by the goroutine whose
// record filled a stripe it was about a tenth of a hit's cost at one
// goroutine (as a profile of resident reads showed), paid by whichever reader was unlucky.
//
// How the replayer is paced. It sleeps until a stripe reaches its mark
// (half of accessStripe), then drains every replayPoll while the drains
// find records, and sleeps again after one finds none. A reader wakes it
// only when it sleeps, so a busy cache costs its readers no wake-ups at
// all. That matters: waking a goroutine from a reader queues it on the
// reader's own P, and with a wake-up per half stripe BenchmarkLookup's
// readers were slower than with the replay done inline (about a third at
// one goroutine, in runs of a variant not kept here: the woken replayer
// displaced them and they migrated between cores, losing their cached
// lines); paced by a timer, the replayer runs on the idle P.
//
// accessStripe is the capacity of one stripe: it must hold what a P
// records during one poll (the runtime's timers fire about every
// millisecond at the finest here, and a P records a few million hits a
// second): with 1024 BenchmarkLookup dropped 38 % of its records at one
// goroutine, with 4096 none. Each P that records holds two arrays of it
// (32 KiB each); a stripe that fills anyway drops records (Record's
// "full") instead of making a reader wait or replay. (A variable only so
// that tests can use stripes a few chunks fill; read by New.)
var accessStripe = 4096

// replayPoll is the replayer's period while records keep coming.
const replayPoll = 500 * time.Microsecond

// replayState is the replayer's.
type replayState struct {
	// kick wakes a sleeping replayer: capacity 1, sent without blocking
	// by kickReplay. Never nil, never closed.
	kick chan struct{}
	// sleeping is set while the replayer waits on kick (or is about to).
	// Readers read it only when their stripe reaches its mark.
	sleeping atomic.Bool
	// rounds counts the replayer's drains that found records (tests).
	rounds atomic.Int64
}

// kickReplay wakes the replayer if it sleeps. Called after the record that
// brought a stripe to its mark was appended.
func (a *accessRecording) kickReplay() {
	if !a.replay.sleeping.Load() {
		return // polling: its next drain takes the stripe
	}
	select {
	case a.replay.kick <- struct{}{}:
	default:
	}
}

// accessRecording is how hits reach the replacement order without the
// policy lock: lossy striped buffers and read slots hold their records
// until the replay goroutine applies them under Cache.mu.
type accessRecording struct {
	buf *lockfree.Buffer[*entry]
	// slots publish the entries that read hits copy from without pinning
	// them, and hold those hits' counts and access records (latch.go).
	slots readSlots
	// slotDrops counts the access records read slots dropped (folded in
	// by foldSlots).
	slotDrops atomic.Int64
	replay    replayState // the goroutine that applies accesses
}

// record notes a hit that took a pin (a write, or a read that found
// its P's read slots taken) for the policy without taking the policy lock
// (see policy.go): it appends e to its stripe of the shared access buffer
// and, if that brought the stripe to its mark, wakes the replayer
// (replay.go), which applies the records on its own goroutine. Read hits
// that hold a read slot record in the slot instead (slotHit).
func (a *accessRecording) record(e *entry) {
	if _, ready := a.buf.Record(e); ready {
		a.kickReplay()
	}
}

// drainLocked calls f with the buffered access records: the read slots'
// (latch.go) and the shared buffer's (hits that took a pin), waiting for
// the readers that hold slots. Caller holds Cache.mu.
func (a *accessRecording) drainLocked(f func([]*entry)) {
	a.drainSome(f, true)
}

// drainSome is drainLocked; without wait it passes by the slots their
// readers keep (readSlots.drain) and reports whether it did.
func (a *accessRecording) drainSome(f func([]*entry), wait bool) (skipped bool) {
	skipped = a.slots.drain(f, wait)
	a.buf.Drain(f)
	return skipped
}

// replayOnce drains the recorded accesses into the order p and returns
// the records it replayed. Without wait it passes by the read slots
// their readers keep, and skipped reports that it did.
func (a *accessRecording) replayOnce(p *policyLock, wait bool) (n int, skipped bool) {
	p.Lock()
	skipped = a.drainSome(func(batch []*entry) {
		n += len(batch)
		p.touchLocked(batch)
	}, wait)
	p.Unlock()
	if n > 0 {
		a.replay.rounds.Add(1)
	}
	return n, skipped
}

// replayer applies buffered access records to the order p (see above)
// until jobs end.
func (a *accessRecording) replayer(jobs *background, p *policyLock) {
	defer jobs.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		// Polls pass by the slots readers hold: a reader busy enough to
		// be found in its slot again and again records more soon, and
		// the next poll, or the waiting drain before a sleep, takes them.
		if n, skipped := a.replayOnce(p, false); n > 0 || skipped {
			t.Reset(replayPoll)
			select {
			case <-jobs.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		// Going to sleep. A reader whose stripe reached its mark while we
		// were polling saw sleeping clear and sent nothing; its record was
		// appended before it looked, so the drain after the store below,
		// which waits for the slots' readers, finds it (or the reader sees
		// sleeping set and kicks).
		a.replay.sleeping.Store(true)
		if n, _ := a.replayOnce(p, true); n == 0 {
			select {
			case <-jobs.ctx.Done():
				return
			case <-a.replay.kick:
			}
		}
		a.replay.sleeping.Store(false)
	}
}
