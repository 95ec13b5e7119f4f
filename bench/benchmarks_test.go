package bench

import (
	"context"
	"strings"
	"testing"
)

// The Go benchmarks run the scenarios at their --quick size (-short: tiny)
// and report every figure beside its peer's from the same run: units
// "scc-KEY-UNIT", "PEER-KEY-UNIT" and the ratio "x-vs-PEER-KEY" (how many
// times better scc is). Missing peers are logged, not failed.

func peerShort(p string) string {
	f := strings.Fields(strings.ToLower(p))
	if len(f) == 0 {
		return "peer"
	}
	return strings.Trim(f[0], "()")
}

func benchScenario(b *testing.B, name string) {
	o := Options{Quick: true, Dir: b.TempDir()}
	if testing.Short() {
		o = Options{Tiny: true, Dir: b.TempDir()}
	}
	var rep *Report
	for i := 0; i < b.N; i++ {
		var err error
		rep, err = Run(context.Background(), []string{name}, o)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Errors) > 0 {
			b.Fatalf("errors: %v", rep.Errors)
		}
	}
	b.StopTimer()
	for _, f := range rep.Figures {
		unit := f.Key + "-" + strings.ReplaceAll(f.Unit, " ", "")
		b.ReportMetric(f.SCC, "scc-"+unit)
		if f.PeerValue != nil {
			ps := peerShort(f.Peer)
			b.ReportMetric(*f.PeerValue, ps+"-"+unit)
			b.ReportMetric(*f.Ratio, "x-vs-"+ps+"-"+f.Key)
		}
	}
	if len(rep.Missing) > 0 {
		b.Logf("missing peers: %s", strings.Join(rep.Missing, "; "))
	}
}

func BenchmarkH5perf(b *testing.B)       { benchScenario(b, "h5perf") }
func BenchmarkIngest(b *testing.B)       { benchScenario(b, "ingest") }
func BenchmarkRandRead(b *testing.B)     { benchScenario(b, "randread") }
func BenchmarkManyDatasets(b *testing.B) { benchScenario(b, "manyds") }
func BenchmarkCacheMap(b *testing.B)     { benchScenario(b, "cachemap") }
func BenchmarkAdaptive(b *testing.B)     { benchScenario(b, "adaptive") }
