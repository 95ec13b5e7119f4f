package cache

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Sizing state in a cache image (seed 004 §2 step 8 and open step 6: "the
// adaptive cache resizing configuration and status"). The image carries it
// as opaque bytes whose first byte is their version; this file owns the
// encoding. Version 1 records the cache's current limits, which is all the
// sizing state a cache has until adaptive sizing exists; adaptive sizing's
// own state is meant to become version 2 of these bytes (its
// MarshalBinary output behind the version byte), decoded here beside
// version 1.

// SizingState is a cache's sizing configuration as an image records it.
type SizingState struct {
	QuiescentBytes   int64
	ActiveMultiplier float64
}

const (
	sizingV1    = 1
	sizingV1Len = 1 + 8 + 8
)

// SizingState reports the cache's current sizing state.
func (c *Cache) SizingState() SizingState {
	return SizingState{QuiescentBytes: c.quiescent, ActiveMultiplier: c.cfg.ActiveMultiplier}
}

// MarshalBinary encodes s, version byte first.
func (s SizingState) MarshalBinary() ([]byte, error) {
	b := make([]byte, sizingV1Len)
	b[0] = sizingV1
	binary.LittleEndian.PutUint64(b[1:], uint64(s.QuiescentBytes))
	binary.LittleEndian.PutUint64(b[9:], math.Float64bits(s.ActiveMultiplier))
	return b, nil
}

// UnmarshalBinary decodes bytes MarshalBinary wrote. Unknown versions and
// values Config.Validate would refuse are errors wrapping
// ErrInvalidConfig; the caller then ignores the section.
func (s *SizingState) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != sizingV1 {
		return fmt.Errorf("%w: sizing state of %d bytes, version byte %v", ErrInvalidConfig, len(b), b[:min(len(b), 1)])
	}
	if len(b) != sizingV1Len {
		return fmt.Errorf("%w: sizing state v1 of %d bytes, want %d", ErrInvalidConfig, len(b), sizingV1Len)
	}
	v := SizingState{
		QuiescentBytes:   int64(binary.LittleEndian.Uint64(b[1:])),
		ActiveMultiplier: math.Float64frombits(binary.LittleEndian.Uint64(b[9:])),
	}
	if v.QuiescentBytes <= 0 || math.IsNaN(v.ActiveMultiplier) || v.ActiveMultiplier < 1 || v.ActiveMultiplier > 1<<20 {
		return fmt.Errorf("%w: sizing state %+v", ErrInvalidConfig, v)
	}
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
	return cfg
}
