package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/scc-dev/scc/vfd/s3"
)

// HDF5 export and import need the HDF5 C library. scctl stays pure Go (it
// builds with CGO_ENABLED=0), so the work is done by scc-hdf5, a separate
// binary built from the cgo module interop/hdf5 (`make hdf5`), which this
// command runs with the same arguments:
//
//	scctl hdf5 export [-force] [flags] FILE.scc OUT.h5
//	scctl hdf5 import [-force] [-strict] [flags] IN.h5 FILE.scc
//
// Both are all or nothing (scc-hdf5 writes a temporary file beside the
// destination and renames it into place when complete); -force replaces
// an existing destination, and an import skips (and names) datasets scc
// cannot take unless -strict.
//
// runHDF5 is also what `scctl export --format hdf5` and `scctl import` of
// an HDF5 file call, with the arguments hdf5ExportArgs and hdf5ImportArgs
// build.

func init() {
	register("hdf5", "export to / import from HDF5 (runs scc-hdf5, built by make hdf5)", cmdHDF5)
}

// hdf5Usage is hdf5's help. Its flags are scc-hdf5's, which this command
// passes on unread, so they are named here rather than by a FlagSet.
const hdf5Usage = `usage: scctl hdf5 export [-force] [flags] FILE.scc OUT.h5
       scctl hdf5 import [-force] [-strict] [flags] IN.h5 FILE.scc

Runs scc-hdf5 (built by make hdf5; found through $SCC_HDF5, next to scctl,
or on PATH) with these arguments. Both are all or nothing; -force replaces
an existing destination; an import skips (and names) the datasets scc
cannot hold unless -strict. OUT.h5 and IN.h5 are local paths; FILE.scc is
the FILE below.
`

func cmdHDF5(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stderr, hdf5Usage+"\n"+fileHelp+"\n")
		return flag.ErrHelp
	}
	if len(args) < 3 || (args[0] != "export" && args[0] != "import") {
		return usageErr("want: scctl hdf5 export [flags] FILE.scc OUT.h5 | scctl hdf5 import [flags] IN.h5 FILE.scc (scctl hdf5 --help)")
	}
	// scc-hdf5 (libhdf5) works on local files: an s3:// FILE.scc is
	// copied down for an export, and an import writes a local file that
	// is uploaded in one commit once scc-hdf5 succeeded.
	n := len(args)
	switch {
	case args[0] == "export" && s3.IsURL(args[n-2]):
		local, cleanup, err := localCopy(ctx, args[n-2])
		if err != nil {
			return err
		}
		defer cleanup()
		args = slices.Clone(args)
		args[n-2] = local
	case args[0] == "import" && s3.IsURL(args[n-1]):
		flags := args[1 : n-2]
		out, err := newOutput(ctx, args[n-1], slices.Contains(flags, "-force") || slices.Contains(flags, "--force"))
		if err != nil {
			return err
		}
		defer out.Discard()
		args = slices.Clone(args)
		args[n-1] = out.Tmp
		if err := runHDF5(ctx, args, stdout, stderr); err != nil {
			return err
		}
		return out.Commit(ctx)
	}
	return runHDF5(ctx, args, stdout, stderr)
}

// errNoHDF5 reports that scc-hdf5 is not installed.
var errNoHDF5 = errors.New("scc-hdf5 not found: HDF5 export/import needs it; build it with `make hdf5` (needs libhdf5-dev; `make interop-hdf5-deps` installs it) and put bin/scc-hdf5 on PATH, next to scctl, or in $SCC_HDF5")

// findHDF5 locates scc-hdf5: $SCC_HDF5, then next to the running scctl,
// then PATH.
func findHDF5() (string, error) {
	if p := os.Getenv("SCC_HDF5"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w (SCC_HDF5=%s: %v)", errNoHDF5, p, err)
		}
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "scc-hdf5")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("scc-hdf5"); err == nil {
		return p, nil
	}
	return "", errNoHDF5
}

// runHDF5 runs scc-hdf5 with args (its verb first) and passes its output
// through; its exit status becomes scctl's.
func runHDF5(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	bin, err := findHDF5()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		// scc-hdf5 printed why.
		return &exitError{code: ee.ExitCode()}
	}
	return err
}

// hdf5ImportArgs are scc-hdf5's arguments for an import: force replaces
// dst (scc-hdf5 would otherwise add to an existing file), strict refuses a
// file with a dataset scc cannot take. `scctl import` passes a fresh
// temporary dst, so it never needs force.
func hdf5ImportArgs(src, dst string, workers int, verify, force, strict bool) []string {
	args := []string{"import", "-workers", strconv.Itoa(workers)}
	if verify {
		args = append(args, "-verify")
	}
	if force {
		args = append(args, "-force")
	}
	if strict {
		args = append(args, "-strict")
	}
	return append(args, src, dst)
}

// hdf5ExportArgs are scc-hdf5's arguments for `scctl export --format hdf5`.
func hdf5ExportArgs(src, dst string, force bool) []string {
	args := []string{"export"}
	if force {
		args = append(args, "-force")
	}
	return append(args, src, dst)
}
