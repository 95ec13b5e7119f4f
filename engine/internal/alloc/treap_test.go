package alloc

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTreapAgainstSortedSlice checks every ordered operation against a
// sorted slice, through growth and shrinkage (so recycled nodes are used).
func TestTreapAgainstSortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tr := newTreap[int64, int64](cmp.Compare[int64])
	var ref []int64 // sorted keys; value = key*3
	for step := 0; step < 20000; step++ {
		k := rng.Int64N(2000)
		i, found := slices.BinarySearch(ref, k)
		grow := step%4000 < 2500 // phases of growth and shrinkage
		switch op := rng.IntN(10); {
		case op < 5 && grow || op < 2:
			tr.set(k, k*3)
			if !found {
				ref = slices.Insert(ref, i, k)
			}
		case op < 8:
			v, ok := tr.take(k)
			if ok != found || (ok && v != k*3) {
				t.Fatalf("take(%d) = %d,%v; want present=%v", k, v, ok, found)
			}
			if found {
				ref = slices.Delete(ref, i, i+1)
			}
		default:
			fl, ce := tr.floor(k), tr.ceil(k)
			j, _ := slices.BinarySearch(ref, k+1)
			if (fl == nil) != (j == 0) || (fl != nil && (fl.key != ref[j-1] || fl.val != fl.key*3)) {
				t.Fatalf("floor(%d) wrong", k)
			}
			if (ce == nil) != (i == len(ref)) || (ce != nil && ce.key != ref[i]) {
				t.Fatalf("ceil(%d) wrong", k)
			}
		}
		if tr.n != len(ref) || tr.nspare > maxSpare {
			t.Fatalf("size %d want %d, spares %d", tr.n, len(ref), tr.nspare)
		}
		if step%997 == 0 {
			var got []int64
			tr.ascend(-1, func(k, v int64) bool { got = append(got, k); return true })
			if !slices.Equal(got, ref) {
				t.Fatalf("ascend order differs at step %d", step)
			}
			if mx := tr.max(); (mx == nil) != (len(ref) == 0) || (mx != nil && mx.key != ref[len(ref)-1]) {
				t.Fatal("max wrong")
			}
		}
	}
}
