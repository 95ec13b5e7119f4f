package cache

// Cut exports cut, the cache's copy of resource.Cut, to the external test
// that compares the two.
func Cut(budget int64, n int, size func(i int) int64) int { return cut(budget, n, size) }
