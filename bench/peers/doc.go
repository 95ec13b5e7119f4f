// Package peers holds the Go-cache comparisons of scc's bench suite
// (scenario cachemap): resident-chunk lookup in scc's shared chunk cache
// beside Get in otter v2 and ristretto on the same keys.
//
// It is a separate module (github.com/scc-dev/scc/bench/peers) so that the
// engine never depends on otter or ristretto. Run it with
//
//	cd bench/peers && go test -run '^$' -bench Lookup
//
// or through `scctl bench cachemap`, which parses this output.
package peers
