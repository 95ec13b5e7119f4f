package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/scc-dev/scc/cache"
)

// SizeSample is the cache's size at one moment of a run.
type SizeSample struct {
	Elapsed  time.Duration `json:"elapsed_ns"`
	Size     int64         `json:"quiescent_bytes"` // the size in force (adaptive sizing moves it)
	Resident int64         `json:"resident_bytes"`
}

// maxSizeSamples bounds a run's samples: past it every other sample is
// dropped (and the sampling thins out the same way), so a long run keeps
// an evenly spaced record in bounded memory.
const maxSizeSamples = 256

// sizeSampler records SizeSamples, thinning them out as the run grows.
// Not safe for concurrent use (one reporting goroutine owns it).
type sizeSampler struct {
	samples []SizeSample
	every   int // keep one call in every
	calls   int
}

func (s *sizeSampler) add(el time.Duration, st cache.Stats) {
	if s.every == 0 {
		s.every = 1
	}
	s.calls++
	if (s.calls-1)%s.every != 0 {
		return
	}
	s.samples = append(s.samples, SizeSample{Elapsed: el, Size: st.QuiescentLimit, Resident: st.ResidentBytes})
	if len(s.samples) >= maxSizeSamples {
		kept := s.samples[:0]
		for i := 0; i < len(s.samples); i += 2 {
			kept = append(kept, s.samples[i])
		}
		s.samples = kept
		s.every *= 2
	}
}

// SizeTimeline renders samples as at most n evenly spaced
// "time size/resident" points on one line, for a summary.
func SizeTimeline(samples []SizeSample, n int) string {
	if len(samples) == 0 || n < 1 {
		return ""
	}
	var parts []string
	step := (len(samples) + n - 1) / n
	for i := 0; i < len(samples); i += step {
		p := samples[i]
		parts = append(parts, fmt.Sprintf("%.1fs %s/%s", p.Elapsed.Seconds(), HumanBytes(p.Size), HumanBytes(p.Resident)))
	}
	if last := samples[len(samples)-1]; (len(samples)-1)%step != 0 {
		parts = append(parts, fmt.Sprintf("%.1fs %s/%s", last.Elapsed.Seconds(), HumanBytes(last.Size), HumanBytes(last.Resident)))
	}
	return strings.Join(parts, "  ")
}
