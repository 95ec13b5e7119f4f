package cache

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Sizing state in a cache image (Cache image RFC §2 step 8 and open step 6: "the
// adaptive cache resizing configuration and status"). The image carries it
// as opaque bytes whose first byte is their version; this file owns the
// encoding. Version 1 records the cache's current limits; version 2, written
// when adaptive sizing is on, adds the adaptive state (AdaptiveState's
// MarshalBinary, checksummed on its own) after them.

// SizingState is a cache's sizing configuration as an image records it.
type SizingState struct {
	QuiescentBytes   int64
	ActiveMultiplier float64
	// Adaptive is the adaptive sizing state, nil when adaptive sizing is
	// off.
	Adaptive *AdaptiveState
}

const (
	sizingV1    = 1
	sizingV2    = 2
	sizingV1Len = 1 + 8 + 8
	sizingV2Len = sizingV1Len + AdaptiveStateSize
)

// SizingState reports the cache's current sizing state.
func (c *Cache) SizingState() SizingState {
	sz := c.sizes.current()
	st := SizingState{QuiescentBytes: sz.quiescent, ActiveMultiplier: c.cfg.ActiveMultiplier}
	if sz.ad != nil {
		a := c.AdaptiveState()
		st.Adaptive = &a
	}
	return st
}

// MarshalBinary encodes s, version byte first.
func (s SizingState) MarshalBinary() ([]byte, error) {
	b := make([]byte, sizingV1Len, sizingV2Len)
	b[0] = sizingV1
	binary.LittleEndian.PutUint64(b[1:], uint64(s.QuiescentBytes))
	binary.LittleEndian.PutUint64(b[9:], math.Float64bits(s.ActiveMultiplier))
	if s.Adaptive != nil {
		a, err := s.Adaptive.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b[0] = sizingV2
		b = append(b, a...)
	}
	return b, nil
}

// UnmarshalBinary decodes bytes MarshalBinary wrote. Unknown versions and
// values Config.Validate would refuse are errors wrapping
// ErrInvalidConfig; the caller then ignores the section.
func (s *SizingState) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != sizingV1 && b[0] != sizingV2 {
		return fmt.Errorf("%w: sizing state of %d bytes, version byte %v", ErrInvalidConfig, len(b), b[:min(len(b), 1)])
	}
	want := map[byte]int{sizingV1: sizingV1Len, sizingV2: sizingV2Len}[b[0]]
	if len(b) != want {
		return fmt.Errorf("%w: sizing state v%d of %d bytes, want %d", ErrInvalidConfig, b[0], len(b), want)
	}
	var ad *AdaptiveState
	if b[0] == sizingV2 {
		ad = new(AdaptiveState)
		if err := ad.UnmarshalBinary(b[sizingV1Len:]); err != nil {
			return fmt.Errorf("%w: sizing state v2: %w", ErrInvalidConfig, err)
		}
	}
	v := SizingState{
		QuiescentBytes:   int64(binary.LittleEndian.Uint64(b[1:])),
		ActiveMultiplier: math.Float64frombits(binary.LittleEndian.Uint64(b[9:])),
	}
	if v.QuiescentBytes <= 0 || math.IsNaN(v.ActiveMultiplier) || v.ActiveMultiplier < 1 || v.ActiveMultiplier > 1<<20 {
		return fmt.Errorf("%w: sizing state %+v", ErrInvalidConfig, v)
	}
	v.Adaptive = ad
	*s = v
	return nil
}

// Apply returns cfg with the recorded limits in place of the ones cfg
// leaves at their defaults: a configuration the caller set explicitly wins
// over a restored one.
func (s SizingState) Apply(cfg Config) Config {
	if cfg.QuiescentBytes == 0 {
		cfg.QuiescentBytes = s.QuiescentBytes
	}
	if cfg.ActiveMultiplier == 0 {
		cfg.ActiveMultiplier = s.ActiveMultiplier
	}
	if s.Adaptive != nil && cfg.Adaptive == (AdaptiveConfig{}) {
		cfg.Adaptive = s.Adaptive.Config
	}
	return cfg
}

// Restore resumes the recorded adaptive state (size, epoch and the counts
// of the epoch in progress) on c, whose configuration Apply produced. It
// does nothing without a recorded adaptive state, or when c's adaptive
// configuration is not the recorded one (the caller set its own, which
// wins).
func (s SizingState) Restore(c *Cache) error {
	if s.Adaptive == nil {
		return nil
	}
	if cur := c.AdaptiveState(); cur.Config != s.Adaptive.Config {
		return nil
	}
	return c.RestoreAdaptiveState(*s.Adaptive)
}
