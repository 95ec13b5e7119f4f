// Command scctl is scc's command-line tool: the ingest demo (the main job),
// inspection of files (ls, dump), the offline consistency checker (check),
// cache-image removal (clear-image), Zarr and HDF5 export and import, the
// benchmark suite beside HDF5, Zarr and Go caches (bench), and the race
// stress suite (stress).
//
//	scctl ingest [flags]                  concurrent ingest, read back and verify
//	scctl ls [--json] FILE                datasets, like h5ls -v
//	scctl dump [flags] FILE               values of a selection, like h5dump
//	scctl check [--json] FILE             offline consistency check (exit 1 on problems)
//	scctl clear-image FILE                remove a file's cache image, like h5clear --image
//	scctl export [flags] FILE DIR         to a Zarr v2/v3 store (or HDF5)
//	scctl import [flags] STORE|FILE.h5 FILE   from a Zarr store or an HDF5 file
//	scctl serve [flags] FILE              live over HTTP as a read-only Zarr v2/v3 store
//	scctl hdf5 export|import [flags] ...  HDF5 conversion through scc-hdf5
//	scctl bench NAME|all [flags]          benchmarks beside their peers
//	scctl stress [flags]                  the race stress suite
//
// scctl --help lists the commands; scctl COMMAND --help shows one's flags.
// Every FILE may be an s3://bucket/key URL (see fileHelp).
//
// Each command lives in its own file, with its test beside it, as a
// function that takes its arguments and output streams, so tests run it
// in-process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(context.Context, []string, io.Writer, io.Writer) error) {
	commands[name] = command{summary, run}
}

// exitError carries an exit status other than 1 (or 1 without a message,
// when the command already printed why).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// errUsage marks bad arguments: exit status 2.
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and turns its error into an exit status:
// 0 success, 1 failure (or problems found), 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "scctl: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(stderr, "scctl %s: %s\n", args[0], ee.msg)
		}
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "scctl %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "scctl %s: %v\n", args[0], err)
		return 1
	}
}

// isHelp reports whether arg asks for help rather than naming a command.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// usage lists every registered command, one line each, its name padded to
// the longest so that the summaries line up.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: scctl COMMAND [flags] [args]\n\ncommands:")
	var names []string
	width := 0
	for n := range commands {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nscctl COMMAND --help shows a command's flags. Every FILE may be an\ns3://bucket/key URL.")
}

// fileHelp is the paragraph the help of every command that takes a file
// ends with: the S3 driver is chosen by the path alone, so a user has no
// flag to find and needs to be told.
const fileHelp = `FILE is a local path or an s3://bucket/key URL. The endpoint, region and
credentials come from the URL's query (?endpoint=host:port&region=R&insecure=1)
or the AWS_* environment (AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); see package vfd/s3.`

// newFlags makes a FlagSet that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("scctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: scctl %s %s\n", name, synopsis)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(stderr, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags that may come before or after positional arguments
// (scctl bench all --quick) and returns the positionals.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// oneFile returns the single FILE positional, once it names a regular
// file: every command that takes FILE opens it with a plain open(2), which
// never returns on a FIFO with no writer, and reads it as a container,
// which makes a directory or a device look like corrupt data.
func oneFile(pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usageErr("want one FILE argument, got %d (%s)", len(pos), strings.Join(pos, " "))
	}
	if err := regularFile(pos[0]); err != nil {
		return "", err
	}
	return pos[0], nil
}

// errNotRegular is returned for a FILE argument that is not a regular file.
var errNotRegular = errors.New("not a regular file")

// regularFile refuses paths that are not regular files (after symlinks),
// using stat(2), which does not open and so cannot block. A path stat
// cannot see is left to the command's open, which reports it as usual.
func regularFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", path, errNotRegular, fileKind(fi.Mode()))
	}
	return nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
