package hdf5

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

func f32bytes(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
func f64bytes(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }

// noise is n incompressible bytes.
func noise(n int) []byte {
	r := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
