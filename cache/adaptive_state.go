package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"
)

// ErrAdaptiveState is returned (wrapped) for an adaptive sizing state that
// cannot be decoded or restored: wrong length, magic or checksum, an
// unknown version, or values out of range.
var ErrAdaptiveState = errors.New("cache: invalid adaptive sizing state")

// AdaptiveState is what adaptive sizing needs to resume where it left off
// (Cache image RFC "save resize status"): its configuration with every default
// spelled out (so a cache configured otherwise resumes the same policy),
// the size in force, and the epoch count and the counts of the epoch in
// progress. It is a plain value; MarshalBinary gives a fixed-size,
// versioned, checksummed encoding for storing it in a file.
type AdaptiveState struct {
	// Config is the adaptive configuration in force, defaults resolved.
	// With Config.Enabled false the state says only "adaptive sizing off".
	Config AdaptiveConfig
	// SizeBytes is the quiescent size in force (MinBytes when the hard
	// cap, Config.MaxMemoryBytes, holds it below that).
	SizeBytes int64
	// Epoch is the number of epochs closed.
	Epoch int64
	// OpenAccesses, OpenHits and OpenGains are the accesses, hits and
	// misses on recently evicted chunks counted so far in the epoch in
	// progress.
	OpenAccesses, OpenHits, OpenGains int64
}

// config returns p as an AdaptiveConfig whose every field is explicit.
func (p *adaptiveParams) config() AdaptiveConfig {
	a := AdaptiveConfig{
		Enabled: true, InitialBytes: p.initial, MinBytes: p.min, MaxBytes: p.max,
		EpochAccesses: p.epoch, EpochTimeout: p.timeout,
		LowerHitRate: p.lower, UpperHitRate: p.upper,
		IncrementFactor: p.incr, DecrementFactor: p.decr,
		MaxIncrementBytes: p.maxIncr, MaxDecrementBytes: p.maxDecr,
		MinGain: p.minGain, FlashMultiple: p.flash, AgeOutEpochs: p.ageOut,
	}
	if a.EpochTimeout <= 0 {
		a.EpochTimeout = -1
	}
	if a.MaxIncrementBytes == math.MaxInt64 {
		a.MaxIncrementBytes = 0
	}
	if a.MaxDecrementBytes == math.MaxInt64 {
		a.MaxDecrementBytes = 0
	}
	if a.FlashMultiple == 0 {
		a.FlashMultiple = -1
	}
	if a.AgeOutEpochs == 0 {
		a.AgeOutEpochs = -1
	}
	return a
}

// AdaptiveState returns the adaptive sizing state. It waits only for a
// size decision in progress.
func (c *Cache) AdaptiveState() AdaptiveState { return c.sizes.state() }

// state is AdaptiveState.
func (z *sizer) state() AdaptiveState {
	z.adaptive.mu.Lock()
	defer z.adaptive.mu.Unlock()
	s := z.current()
	st := AdaptiveState{SizeBytes: s.quiescent}
	if s.ad == nil {
		return st
	}
	st.Config = s.ad.config()
	// The hard cap may hold the size below MinBytes; the state records
	// the policy's bounds, and a restore caps again.
	st.SizeBytes = min(max(st.SizeBytes, s.ad.min), s.ad.max)
	st.Epoch = z.adaptive.mu.epoch
	st.OpenHits = max(z.stats.hits(z.access)-z.adaptive.mu.startHits, 0)
	st.OpenAccesses = st.OpenHits + max(z.stats.hot.Load(hotMisses)-z.adaptive.mu.startMisses, 0)
	st.OpenGains = min(max(z.adaptive.ghost.hits.Load()-z.adaptive.mu.startGhost, 0), st.OpenAccesses-st.OpenHits)
	return st
}

// Validate reports whether st could have been produced by AdaptiveState.
func (st AdaptiveState) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrAdaptiveState}, args...)...)
	}
	switch {
	case st.SizeBytes < 1:
		return bad("size %d < 1", st.SizeBytes)
	case st.Epoch < 0 || st.OpenAccesses < 0 || st.OpenHits < 0 || st.OpenGains < 0:
		return bad("negative count")
	case st.OpenHits > st.OpenAccesses || st.OpenGains > st.OpenAccesses-st.OpenHits:
		return bad("epoch counts %d hits, %d gains of %d accesses", st.OpenHits, st.OpenGains, st.OpenAccesses)
	}
	if !st.Config.Enabled {
		if st.Config != (AdaptiveConfig{}) || st.Epoch != 0 || st.OpenAccesses != 0 {
			return bad("disabled state with settings")
		}
		return nil
	}
	a := st.Config
	if a.InitialBytes == 0 || a.MinBytes == 0 || a.MaxBytes == 0 || a.EpochAccesses == 0 || a.EpochTimeout == 0 ||
		a.LowerHitRate == 0 || a.UpperHitRate == 0 || a.IncrementFactor == 0 || a.DecrementFactor == 0 ||
		a.MinGain == 0 || a.FlashMultiple == 0 || a.AgeOutEpochs == 0 {
		return bad("configuration with unresolved defaults")
	}
	if err := a.validate(a.InitialBytes); err != nil {
		return fmt.Errorf("%w: %w", ErrAdaptiveState, err)
	}
	if st.SizeBytes < a.MinBytes || st.SizeBytes > a.MaxBytes {
		return bad("size %d not in [%d, %d]", st.SizeBytes, a.MinBytes, a.MaxBytes)
	}
	return nil
}

// RestoreAdaptiveState resumes adaptive sizing from st (taken by
// AdaptiveState, perhaps by another process): it sets the adaptive
// configuration, the size (capped by MaxMemoryBytes) and the epoch counts.
// A state with adaptive sizing off turns it off and returns the cache to
// its QuiescentBytes. An invalid st returns ErrAdaptiveState and changes
// nothing. A smaller size is reached through the normal eviction path
// (the background trimmer, then every reservation).
func (c *Cache) RestoreAdaptiveState(st AdaptiveState) error { return c.sizes.restore(st) }

// restore is RestoreAdaptiveState.
func (z *sizer) restore(st AdaptiveState) error {
	if z.closed.Load() {
		return ErrClosed
	}
	if err := st.Validate(); err != nil {
		return err
	}
	z.adaptive.mu.Lock()
	defer z.adaptive.mu.Unlock()
	old := z.current()
	raw := old.raw
	raw.Adaptive = st.Config
	if err := raw.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrAdaptiveState, err)
	}
	size := int64(-1)
	if st.Config.Enabled {
		size = st.SizeBytes
	}
	s := z.newSizing(raw, size)
	z.publishLocked(s, ResizeDecision{
		Epoch: st.Epoch, OldBytes: old.quiescent, NewBytes: s.quiescent, Reason: ReasonConfig,
	}, old.quiescent != s.quiescent)
	z.reset(s)
	z.adaptive.mu.epoch = st.Epoch
	z.adaptive.mu.startHits -= st.OpenHits
	z.adaptive.mu.startMisses -= st.OpenAccesses - st.OpenHits
	z.adaptive.mu.startGhost -= st.OpenGains
	z.adaptive.wakeAdaptor()
	return nil
}

// The encoding, version 1, little endian:
//
//	magic "SCAD" | version u16 | flags u16 (bit 0: enabled)
//	InitialBytes MinBytes MaxBytes EpochAccesses EpochTimeout(ns)
//	  MaxIncrementBytes MaxDecrementBytes AgeOutEpochs     8 × i64
//	LowerHitRate UpperHitRate IncrementFactor DecrementFactor
//	  MinGain FlashMultiple                                6 × f64 bits
//	SizeBytes Epoch OpenAccesses OpenHits OpenGains         5 × i64
//	CRC-32C of everything before                            u32
const (
	adaptiveStateMagic   = "SCAD"
	adaptiveStateVersion = 1
	// AdaptiveStateSize is the length of the encoding.
	AdaptiveStateSize = 4 + 2 + 2 + 8*8 + 6*8 + 5*8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarshalBinary encodes st (AdaptiveStateSize bytes). It fails only for
// an invalid st.
func (st AdaptiveState) MarshalBinary() ([]byte, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, AdaptiveStateSize)
	b = append(b, adaptiveStateMagic...)
	b = binary.LittleEndian.AppendUint16(b, adaptiveStateVersion)
	var flags uint16
	if st.Config.Enabled {
		flags = 1
	}
	b = binary.LittleEndian.AppendUint16(b, flags)
	a := st.Config
	for _, v := range []int64{a.InitialBytes, a.MinBytes, a.MaxBytes, a.EpochAccesses, int64(a.EpochTimeout),
		a.MaxIncrementBytes, a.MaxDecrementBytes, int64(a.AgeOutEpochs)} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, f := range []float64{a.LowerHitRate, a.UpperHitRate, a.IncrementFactor, a.DecrementFactor, a.MinGain, a.FlashMultiple} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	for _, v := range []int64{st.SizeBytes, st.Epoch, st.OpenAccesses, st.OpenHits, st.OpenGains} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// UnmarshalBinary decodes an encoding made by MarshalBinary. Anything else
// (wrong length, magic, version or checksum, or values MarshalBinary would
// refuse) returns ErrAdaptiveState and leaves st unchanged.
func (st *AdaptiveState) UnmarshalBinary(b []byte) error {
	if len(b) != AdaptiveStateSize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrAdaptiveState, len(b), AdaptiveStateSize)
	}
	if string(b[:4]) != adaptiveStateMagic {
		return fmt.Errorf("%w: bad magic", ErrAdaptiveState)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != adaptiveStateVersion {
		return fmt.Errorf("%w: version %d, this build reads %d", ErrAdaptiveState, v, adaptiveStateVersion)
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return fmt.Errorf("%w: checksum %08x, stored %08x", ErrAdaptiveState, got, want)
	}
	flags := binary.LittleEndian.Uint16(b[6:])
	if flags&^1 != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrAdaptiveState, flags)
	}
	off := 8
	i64 := func() int64 {
		v := int64(binary.LittleEndian.Uint64(b[off:]))
		off += 8
		return v
	}
	f64 := func() float64 { return math.Float64frombits(uint64(i64())) }
	var n AdaptiveState
	a := &n.Config
	a.Enabled = flags&1 != 0
	a.InitialBytes, a.MinBytes, a.MaxBytes, a.EpochAccesses = i64(), i64(), i64(), i64()
	a.EpochTimeout = time.Duration(i64())
	a.MaxIncrementBytes, a.MaxDecrementBytes = i64(), i64()
	age := i64()
	if age < math.MinInt32 || age > math.MaxInt32 {
		return fmt.Errorf("%w: AgeOutEpochs %d", ErrAdaptiveState, age)
	}
	a.AgeOutEpochs = int(age)
	a.LowerHitRate, a.UpperHitRate, a.IncrementFactor, a.DecrementFactor, a.MinGain, a.FlashMultiple = f64(), f64(), f64(), f64(), f64(), f64()
	n.SizeBytes, n.Epoch, n.OpenAccesses, n.OpenHits, n.OpenGains = i64(), i64(), i64(), i64(), i64()
	if err := n.Validate(); err != nil {
		return err
	}
	*st = n
	return nil
}
