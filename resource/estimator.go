package resource

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// EstimatorOptions configures an Estimator. The zero value selects every
// default.
type EstimatorOptions struct {
	// Weight is the share of a new observation in the moving average, in
	// (0, 1]. Default (0): 1/8, which follows a drift in chunk sizes (a
	// sparse dataset filling up, a compressible one changing content)
	// within a few dozen chunks while smoothing single outliers.
	Weight float64
}

// Validate reports whether o is usable.
func (o EstimatorOptions) Validate() error {
	if o.Weight < 0 || o.Weight > 1 || math.IsNaN(o.Weight) {
		return fmt.Errorf("%w: Weight %v must be in (0, 1]", ErrInvalid, o.Weight)
	}
	return nil
}

// Estimator keeps, per dataset, an exponentially weighted moving average of
// the in-memory size of a chunk, so that a request's memory can be
// estimated as chunks touched × average chunk size before any chunk is
// loaded (SCC design §5.2: "we must estimate I/O request resource
// requirements"). It is safe for concurrent use: the map is a sync.Map (one
// entry per dataset, written once, read on every request) and each average
// is updated by compare-and-swap, without locks.
type Estimator struct {
	weight float64
	m      sync.Map // uint64 dataset -> *average
}

// average holds math.Float64bits of the current mean, or noSample.
type average struct{ bits atomic.Uint64 }

// noSample marks an average without observations. It is a NaN, which no
// real mean can be.
var noSample = math.Float64bits(math.NaN())

// NewEstimator returns an empty Estimator.
func NewEstimator(o EstimatorOptions) (*Estimator, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Weight == 0 {
		o.Weight = 1.0 / 8
	}
	return &Estimator{weight: o.Weight}, nil
}

func (e *Estimator) avg(dataset uint64, create bool) *average {
	if v, ok := e.m.Load(dataset); ok {
		return v.(*average)
	}
	if !create {
		return nil
	}
	a := &average{}
	a.bits.Store(noSample)
	v, _ := e.m.LoadOrStore(dataset, a)
	return v.(*average)
}

// Observe records the in-memory size of one chunk of dataset. Negative
// sizes are ignored.
func (e *Estimator) Observe(dataset uint64, chunkBytes int64) {
	if chunkBytes < 0 {
		return
	}
	a := e.avg(dataset, true)
	x := float64(chunkBytes)
	for {
		old := a.bits.Load()
		next := x // the first observation is the average
		if old != noSample {
			m := math.Float64frombits(old)
			next = m + e.weight*(x-m)
		}
		if a.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// ChunkBytes returns the average chunk size of dataset, rounded up, and
// whether any chunk has been observed.
func (e *Estimator) ChunkBytes(dataset uint64) (int64, bool) {
	a := e.avg(dataset, false)
	if a == nil {
		return 0, false
	}
	bits := a.bits.Load()
	if bits == noSample {
		return 0, false
	}
	m := math.Ceil(math.Float64frombits(bits))
	if m >= math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(m), true
}

// Estimate returns the memory a request touching chunks chunks of dataset
// will need: chunks × the average chunk size, or chunks × fallback when no
// chunk of dataset has been observed yet (the caller passes the nominal
// size, e.g. chunk elements × element size). The product saturates at
// math.MaxInt64 instead of overflowing; negative inputs count as zero.
func (e *Estimator) Estimate(dataset uint64, chunks, fallback int64) int64 {
	per, ok := e.ChunkBytes(dataset)
	if !ok {
		per = fallback
	}
	if chunks <= 0 || per <= 0 {
		return 0
	}
	if per > math.MaxInt64/chunks {
		return math.MaxInt64
	}
	return chunks * per
}

// Forget drops dataset's history (when the dataset is closed or deleted).
func (e *Estimator) Forget(dataset uint64) { e.m.Delete(dataset) }
