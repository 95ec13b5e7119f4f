package bench

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// The Python peers' scripts are embedded so that a scctl binary copied
// anywhere can still run them; they are written to the scenario's temporary
// directory before use.
//
//go:embed scripts/*.py scripts/*.mjs
var scripts embed.FS

// Peers says which comparison systems are installed where the benchmarks
// run.
type Peers struct {
	// H5perf is the path of h5perf_serial (Debian hdf5-tools), "" if absent.
	H5perf string
	// Python is an interpreter that imports numpy; "" if none does.
	Python string
	// H5py and Zarr are the versions the interpreter imports, "" if absent.
	H5py, Zarr string
	// Go is the go command, and PeersDir the bench/peers module directory
	// (the Go peers otter v2 and ristretto); either "" if not found.
	Go, PeersDir string
	// Node is the node command and Zarrita a directory whose
	// node_modules holds zarrita (interop/zarr/testdata/node, installed
	// by make interop-deps); either "" if not found.
	Node, Zarrita string
}

// NoPeers is a Peers value with every peer missing.
func NoPeers() *Peers { return &Peers{} }

// FindPeers looks for every peer. Python interpreters are tried in order
// "python3" on PATH, then Debian's /usr/bin/python3, because Debian's
// python3-h5py and python3-zarr install into the system interpreter while a
// developer's PATH may point at another one.
func FindPeers(ctx context.Context) *Peers {
	p := &Peers{}
	if path, err := exec.LookPath("h5perf_serial"); err == nil {
		p.H5perf = path
	}
	seen := map[string]bool{}
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(cand)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(path); err == nil && seen[real] {
			continue
		} else if err == nil {
			seen[real] = true
		}
		h5, zr, np := pythonModules(ctx, path)
		if !np {
			continue
		}
		// Prefer the interpreter that has the most peers.
		score := func(a, b string) int {
			n := 0
			if a != "" {
				n++
			}
			if b != "" {
				n++
			}
			return n
		}
		if p.Python == "" || score(h5, zr) > score(p.H5py, p.Zarr) {
			p.Python, p.H5py, p.Zarr = path, h5, zr
		}
	}
	if path, err := exec.LookPath("go"); err == nil {
		p.Go = path
	}
	p.PeersDir = findPeersDir()
	if path, err := exec.LookPath("node"); err == nil {
		p.Node = path
		p.Zarrita = findZarrita()
	}
	return p
}

// findZarrita finds interop/zarr/testdata/node with zarrita installed,
// under the roots findPeersDir searches.
func findZarrita() string {
	for _, r := range searchRoots() {
		dir := filepath.Join(r, "interop", "zarr", "testdata", "node")
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "zarrita", "package.json")); err == nil {
			return dir
		}
	}
	return ""
}

// pythonModules reports the h5py and zarr versions python imports and
// whether it has numpy at all.
func pythonModules(ctx context.Context, python string) (h5py, zarr string, numpy bool) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	const probe = `
import json
out = {}
for m in ("numpy", "h5py", "zarr"):
    try:
        out[m] = __import__(m).__version__
    except Exception:
        pass
print(json.dumps(out))
`
	b, err := exec.CommandContext(ctx, python, "-c", probe).Output()
	if err != nil {
		return "", "", false
	}
	var v map[string]string
	if json.Unmarshal(bytes.TrimSpace(b), &v) != nil {
		return "", "", false
	}
	return v["h5py"], v["zarr"], v["numpy"] != ""
}

// findPeersDir finds bench/peers: under $SCC_ROOT, then in the module root
// above the working directory, then beside this source file (go run and go
// test from a checkout).
func findPeersDir() string {
	for _, r := range searchRoots() {
		dir := filepath.Join(r, "bench", "peers")
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/scc-dev/scc/bench/peers") {
			return dir
		}
	}
	return ""
}

// searchRoots are the directories a checkout of the repository may be
// at: $SCC_ROOT, the working directory and its parents, and the module
// root beside this source file.
func searchRoots() []string {
	var roots []string
	if r := os.Getenv("SCC_ROOT"); r != "" {
		roots = append(roots, r)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			roots = append(roots, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		roots = append(roots, filepath.Dir(filepath.Dir(file)))
	}
	return roots
}

// runScript runs the embedded Python script name with args and decodes the
// JSON object it prints last on stdout into out.
func runScript(ctx context.Context, p *Peers, dir, name string, out any, args ...string) error {
	src, err := scripts.ReadFile("scripts/" + name)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, p.Python, append([]string{path}, args...)...)
	cmd.Dir = dir
	return runJSON(cmd, name, out)
}

// runJSON runs a peer's command and decodes the last line it prints.
func runJSON(cmd *exec.Cmd, name string, out any) error {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(cmd.Path), name, err, lastLines(stderr.String(), 5))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), out); err != nil {
		return fmt.Errorf("%s: bad output %q: %w", name, last, err)
	}
	return nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// pythonPeers lists the Python peers (h5py, zarr) present, and records the
// missing ones in r.
func (p *Peers) pythonPeers(r *Report) []string {
	if p.Python == "" {
		r.missing("python3 with numpy (needed by h5py and zarr peers)")
		return nil
	}
	var want []string
	if p.H5py != "" {
		want = append(want, "h5py")
	} else {
		r.missing("h5py (python3-h5py)")
	}
	if p.Zarr != "" {
		want = append(want, "zarr")
	} else {
		r.missing("zarr (python3-zarr)")
	}
	return want
}
