package vfd

import (
	"slices"
	"testing"
)

func TestAdvance(t *testing.T) {
	mk := func() [][]byte { return [][]byte{make([]byte, 3), {}, make([]byte, 2), make([]byte, 4)} }
	lens := func(b [][]byte) []int {
		var l []int
		for _, x := range b {
			l = append(l, len(x))
		}
		return l
	}
	for _, c := range []struct {
		n    int
		want []int
	}{
		{0, []int{3, 0, 2, 4}},
		{1, []int{2, 0, 2, 4}},
		{3, []int{0, 2, 4}}, // the empty buffer is left for dropEmpty
		{4, []int{1, 4}},
		{5, []int{4}},
		{8, []int{1}},
		{9, nil},
	} {
		got := advance(mk(), c.n)
		if !slices.Equal(lens(got), c.want) {
			t.Errorf("advance(%d) lens = %v, want %v", c.n, lens(got), c.want)
		}
	}
	if got := dropEmpty([][]byte{{}, {}, {1}}); len(got) != 1 {
		t.Errorf("dropEmpty left %d buffers", len(got))
	}
}
