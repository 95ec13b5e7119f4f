package bench

import (
	"errors"
	"testing"
)

// The parsers of peer output and of command-line values must never panic,
// whatever they are given.

func FuzzParseH5perf(f *testing.F) {
	f.Add(h5perfSample)
	f.Add("IO API = HDF5\nWrite (1 iteration(s)):\nAverage Throughput: 1e400 MB/s\n")
	f.Add("Average Throughput:\n")
	f.Fuzz(func(t *testing.T, s string) {
		figs, err := ParseH5perf(s)
		if err == nil && len(figs) == 0 {
			t.Fatal("no error and no figures")
		}
		if err != nil && !errors.Is(err, ErrPeerOutput) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

func FuzzParseLookupBench(f *testing.F) {
	f.Add(lookupSample)
	f.Add("BenchmarkLookup/a/g=-1 1 x ns/op\n")
	f.Add("BenchmarkLookup/a/b/c 1 2 ns/op\n")
	f.Fuzz(func(t *testing.T, s string) {
		figs, err := ParseLookupBench(s)
		if err == nil && len(figs) == 0 {
			t.Fatal("no error and no figures")
		}
	})
}

func FuzzParseValues(f *testing.F) {
	f.Add("64MiB")
	f.Add("1.5g")
	f.Add("-0")
	f.Fuzz(func(t *testing.T, size string) {
		if n, err := ParseBytes(size); err == nil && n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", size, n)
		}
	})
}
