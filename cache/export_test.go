package cache

// CutSubListHints runs cutSubList over groups with the given size hints
// (for the external test that compares it with resource.Cut).
func CutSubListHints(s int64, hints []int64) int {
	gs := make([]*group, len(hints))
	for i, h := range hints {
		gs[i] = &group{loc: Location{SizeHint: h}}
	}
	return cutSubList(s, gs)
}
