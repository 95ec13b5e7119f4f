// Package tree holds the walks of a file's tree that the bridges, the
// served Zarr view and the tests share: the dataset names an export or a
// view maps, and a walk of the groups that can leave a subtree out. Safe
// for concurrent use as the engine's Group calls are.
package tree

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// DatasetNames lists the paths of every dataset of f without the leading
// '/', sorted: the names an export writes and a view serves.
func DatasetNames(f *engine.File) ([]string, error) {
	var names []string
	for m, err := range f.Datasets() {
		if err != nil {
			return nil, err
		}
		names = append(names, m.Path[1:])
	}
	slices.Sort(names)
	return names, nil
}

// Groups calls fn for every group below g, a group before the groups it
// holds, siblings in name order, with its path from the root without the
// leading '/'; fn says whether to visit the groups inside it (an exporter
// leaves out a group whose name its format cannot hold, and what it
// holds). It stops at fn's first error, and when ctx ends.
func Groups(ctx context.Context, g *engine.Group, fn func(sub *engine.Group, path string) (descend bool, err error)) error {
	var pruned []string
	for m, err := range g.Walk() {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p := m.Path[1:]
		if m.Kind != engine.MemberGroup || slices.ContainsFunc(pruned, func(q string) bool { return strings.HasPrefix(p, q+"/") }) {
			continue
		}
		sub, err := g.OpenGroup(ctx, m.Path)
		if err != nil {
			return fmt.Errorf("group %q: %w", p, err)
		}
		descend, err := fn(sub, p)
		if err != nil {
			return err
		}
		if !descend {
			pruned = append(pruned, p)
		}
	}
	return nil
}
