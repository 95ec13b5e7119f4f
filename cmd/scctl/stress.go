package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/stress"
)

func init() {
	register("stress", "the race stress suite: reference-model and linearizability checks (exit 1 on failure)", cmdStress)
}

// cmdStress runs stress.RunSuite. Its seed is printed so that a failure
// replays with --seed. Build scctl with -race to run it under the race
// detector (make stress runs the long suite through go test).
func cmdStress(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stress", "[flags]", stderr)
	var cfg stress.Config
	seed := fs.Uint64("seed", 0, "seed (default: a random one, printed)")
	fs.IntVar(&cfg.Goroutines, "goroutines", 0, "goroutines at once (0: the suite's 1, 4, 16 and 64)")
	fs.IntVar(&cfg.Files, "files", 0, "files sharing the cache (0: default 1)")
	fs.IntVar(&cfg.Datasets, "datasets", 0, "datasets per file (0: default 3)")
	fs.IntVar(&cfg.Ops, "ops", 0, "operations per goroutine (0: default 300)")
	fs.IntVar(&cfg.Phases, "phases", 0, "phases (0: default 3)")
	cacheSize := fs.String("cache", "", "shared cache budget (default: the suite's tiny 8 KiB)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "delay one driver operation in eight by this much")
	noLin := fs.Bool("no-lin", false, "skip the linearizability workloads")
	noCrash := fs.Bool("no-crash-check", false, "skip the crash-image checks at phase ends")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErr("unexpected arguments %q", pos)
	}
	cfg.Seed = *seed
	if !flagSet(fs, "seed") {
		cfg.Seed = rand.Uint64()
	}
	if *cacheSize != "" {
		if cfg.CacheBytes, err = bench.ParseBytes(*cacheSize); err != nil || cfg.CacheBytes == 0 {
			return usageErr("--cache %q: want a size such as 64KiB", *cacheSize)
		}
	}
	if *noLin {
		cfg.SharedRegions = -1
	}
	cfg.NoCrashCheck = *noCrash
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	var log io.Writer = stderr
	if *quiet {
		log = nil
	}
	fmt.Fprintf(stderr, "scctl stress: seed %d (replay with --seed %d)\n", cfg.Seed, cfg.Seed)
	t0 := time.Now()
	rep, runErr := stress.RunSuite(ctx, cfg, log)
	if *asJSON {
		out := struct {
			stress.Report
			OK    bool   `json:"ok"`
			Error string `json:"error,omitempty"`
		}{Report: rep, OK: runErr == nil && len(rep.Failures) == 0}
		if runErr != nil {
			out.Error = runErr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		fmt.Fprint(stdout, rep.String())
		fmt.Fprintf(stdout, "wall time %s\n", time.Since(t0).Round(time.Millisecond))
	}
	if runErr != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("%v (seed %d)", runErr, cfg.Seed)}
	}
	if len(rep.Failures) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d failure(s) (seed %d)", len(rep.Failures), cfg.Seed)}
	}
	if !*asJSON {
		fmt.Fprintln(stdout, "OK")
	}
	return nil
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}
