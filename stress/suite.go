package stress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// SuiteGoroutines are the goroutine counts RunSuite covers when
// Config.Goroutines is 0.
var SuiteGoroutines = []int{1, 4, 16, 64}

// RunSuite is the entry point for `scctl stress`: for each goroutine count
// (cfg.Goroutines, or each of SuiteGoroutines when it is 0) it runs Run and,
// unless cfg.SharedRegions is -1, RunLinearizability and RunLastWriter, all
// with cfg's seed and sizes. Progress lines go to log (nil discards). The
// report sums every run; the error joins every run's error, so a mismatch
// or violation anywhere fails the suite. It stops early only when ctx ends.
func RunSuite(ctx context.Context, cfg Config, log io.Writer) (Report, error) {
	total := Report{Seed: cfg.Seed}
	if err := cfg.Validate(); err != nil {
		return total, err
	}
	lg := WriterLogger(log)
	counts := SuiteGoroutines
	if cfg.Goroutines > 0 {
		counts = []int{cfg.Goroutines}
	}
	lin := cfg.SharedRegions != -1
	if !lin {
		cfg.SharedRegions = 0
	}
	start := time.Now()
	var errs []error
	step := func(name string, g int, fn func(context.Context, Logger, Config) (Report, error)) {
		if ctx.Err() != nil {
			return
		}
		c := cfg
		c.Goroutines = g
		rep, err := fn(ctx, lg, c)
		total.add(rep)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s with %d goroutines: %w", name, g, err))
			lg.Logf("stress: %s with %d goroutines FAILED: %v", name, g, err)
		}
	}
	for _, g := range counts {
		step("model run", g, Run)
		if lin {
			step("linearizability", g, RunLinearizability)
			step("last writer", g, RunLastWriter)
		}
	}
	total.Duration = time.Since(start)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	lg.Logf("stress: suite done\n%s", total)
	return total, errors.Join(errs...)
}
