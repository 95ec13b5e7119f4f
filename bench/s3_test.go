package bench

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkS3Read runs the s3 scenario (S3Read) on a private MinIO with 10
// ms added per request and prints scc's scan and random-read figures beside
// the naive reader's from the same run. Run it under
// `flock /tmp/scc-bench.lock`.
func BenchmarkS3Read(b *testing.B) {
	for _, page := range []int64{256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("page=%dKiB", page>>10), func(b *testing.B) {
			for range b.N {
				res, err := S3Read(context.Background(), S3Config{Chunks: 64, PageSize: page})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.SCCScanMBps, "scan-scc-MiB/s")
				b.ReportMetric(res.NaiveScanMBps, "scan-naive-MiB/s")
				b.ReportMetric(res.SCCScanMBps/res.NaiveScanMBps, "scan-ratio")
				for i, k := range res.InFlight {
					b.ReportMetric(res.SCCRandMBps[i], fmt.Sprintf("rand-inflight%d-MiB/s", k))
				}
				b.ReportMetric(res.NaiveRandMBps, "rand-naive-MiB/s")
			}
		})
	}
}

func TestS3ConfigValidate(t *testing.T) {
	for _, c := range []S3Config{{Chunks: -1}, {InFlight: []int{8, 0}}, {URL: "http://x/y"}, {Latency: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (S3Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
}
