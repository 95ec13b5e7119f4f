package bench

import (
	"context"
	"testing"
)

func BenchmarkZZImageProf(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_, err := ImageRoundRobin(context.Background(), b.TempDir(), ImageConfig{Files: 4, Datasets: 32, Chunks: 32, Touch: 4, Hot: 2, Cycles: 2000, ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
	}
}
