package engine

import (
	"context"
	"testing"

	"github.com/scc-dev/scc/vfd"

	"github.com/stretchr/testify/require"
)

// Collectors of the API's iterators and two-value listings, for tests that
// compare whole lists.

type attrLister interface{ Attrs() ([]Attr, error) }

// attrsOf lists x's attributes, failing the test on an error.
func attrsOf(t testing.TB, x attrLister) []Attr {
	t.Helper()
	as, err := x.Attrs()
	require.NoError(t, err)
	return as
}

// storedChunks collects ds.Chunks.
func storedChunks(ctx context.Context, ds *Dataset) ([]StoredChunk, error) {
	var out []StoredChunk
	for c, err := range ds.Chunks(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// withDriver is opts (nil: the defaults) with Driver set to drv.
func withDriver(opts *Options, drv vfd.Driver) *Options {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Driver = drv
	return &o
}

// collectMembers collects g.Members, names and kinds only (as the models
// hold them).
func collectMembers(g *Group) ([]Member, error) {
	var ms []Member
	for m, err := range g.Members() {
		if err != nil {
			return nil, err
		}
		m.Path = ""
		ms = append(ms, m)
	}
	return ms, nil
}
