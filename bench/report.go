package bench

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/template"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Markdown writes the report as a Markdown table, followed by the machine,
// the missing peers and any errors.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	writeTable(&b, r.Figures, true)
	b.WriteString("\nratio = how many times better scc is (scc/peer for throughput, peer/scc for memory).\n")
	writeNotes(&b, r.Figures, true)
	m := r.Machine
	fmt.Fprintf(&b, "\nMachine: %s/%s, %s, %d CPUs (GOMAXPROCS %d), %s RAM, %s, inflater %s. Run: %s, %s, %.0f s.\n",
		m.OS, m.Arch, orDash(m.CPU), m.NumCPU, m.GOMAXPROCS, orDash(m.MemTotal), m.GoVersion, orDash(m.Inflater),
		r.sizeName(), r.Started.Format("2006-01-02 15:04 UTC"), r.Seconds)
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, "\nMissing peers (install with `make bench-peers`): %s.\n", strings.Join(r.Missing, "; "))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "\nerror: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes figs as a Markdown table, each figure beside its
// peer's and the ratio between them; withScenario adds the scenario
// column (one table for a whole run).
func writeTable(b *strings.Builder, figs []Figure, withScenario bool) {
	if withScenario {
		b.WriteString("| scenario | figure | scc | peer | peer value | ratio | target | status |\n")
		b.WriteString("| --- | --- | ---: | --- | ---: | ---: | --- | --- |\n")
	} else {
		b.WriteString("| figure | scc | peer | peer value | ratio | target | status |\n")
		b.WriteString("| --- | ---: | --- | ---: | ---: | --- | --- |\n")
	}
	for _, f := range figs {
		pv, ratio := "missing", "–"
		if f.PeerValue != nil {
			pv = trimFloat(*f.PeerValue) + " " + f.Unit
		}
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.2f×", *f.Ratio)
		}
		tgt := ""
		if f.Target != nil {
			tgt = f.Target.String()
			if f.Target.Kind == "max" {
				tgt += " " + f.Unit
			}
		}
		status := f.Status
		if status == "met" {
			status = "**met**"
		}
		if withScenario {
			fmt.Fprintf(b, "| %s ", f.Scenario)
		}
		fmt.Fprintf(b, "| %s | %s %s | %s | %s | %s | %s | %s |\n",
			mdEscape(f.Metric), trimFloat(f.SCC), f.Unit, mdEscape(f.Peer), pv, ratio, tgt, status)
	}
}

// writeNotes lists the figures' notes once each, as Markdown bullets.
func writeNotes(b *strings.Builder, figs []Figure, withScenario bool) {
	seen := map[string]bool{}
	for _, f := range figs {
		if f.Note == "" || seen[f.Scenario+"\x00"+f.Note] {
			continue
		}
		seen[f.Scenario+"\x00"+f.Note] = true
		if withScenario {
			fmt.Fprintf(b, "- %s: %s\n", f.Scenario, f.Note)
		} else {
			fmt.Fprintf(b, "- %s\n", f.Note)
		}
	}
}

// The BENCHMARKS.md page is a template (benchmarks.md.tmpl) with two
// parts: a generated one (the machine, the date, the command and one
// table per scenario, from the Report) and a static one (what the figures
// mean and what limits them), kept in the template so that it is written
// and reviewed as text while the numbers above it always come from the
// run that wrote the page.
//
//go:embed benchmarks.md.tmpl
var benchmarksTemplate string

var benchmarksPage = template.Must(template.New("BENCHMARKS.md").Parse(benchmarksTemplate))

// Page is what the BENCHMARKS.md page records beside the Report.
type Page struct {
	// Command is the command line that produced the report, shown in the
	// page's header so that a reader can run it again.
	Command string
}

// pageData is the template's view of a run.
type pageData struct {
	Command   string
	Date      string
	Machine   Machine
	Kernel    string
	Size      string
	Seconds   string
	Scenarios []pageScenario
	Missing   []string
	Errors    []string
}

type pageScenario struct {
	Name, Description string
	// Table is the scenario's figures as a Markdown table, Notes their
	// notes as Markdown bullets; both empty when it printed no figure.
	Table, Notes string
}

// WriteBenchmarks writes the report as the BENCHMARKS.md page: a header
// with the machine (CPU model, cores, memory, kernel, Go version), the
// date and p.Command, then each scenario's figures as the scenario prints
// them, each beside its baseline, then the template's static analysis.
func (r *Report) WriteBenchmarks(w io.Writer, p Page) error {
	d := pageData{
		Command: p.Command,
		Date:    r.Started.Format("2006-01-02 15:04 UTC"),
		Machine: r.Machine,
		Kernel:  kernelRelease(),
		Size:    r.sizeName(),
		Seconds: fmt.Sprintf("%.0f s", r.Seconds),
		Missing: r.Missing,
		Errors:  r.Errors,
	}
	if d.Command == "" {
		d.Command = "scctl bench " + strings.Join(r.Scenario, " ")
	}
	d.Machine.CPU = orDash(d.Machine.CPU)
	d.Machine.MemTotal = orDash(d.Machine.MemTotal)
	d.Machine.Inflater = orDash(d.Machine.Inflater)
	desc := map[string]string{}
	for _, s := range Scenarios() {
		desc[s.Name] = s.Description
	}
	for _, name := range r.Scenario {
		var figs []Figure
		for _, f := range r.Figures {
			if f.Scenario == name {
				figs = append(figs, f)
			}
		}
		ps := pageScenario{Name: name, Description: desc[name]}
		if len(figs) > 0 {
			var t, n strings.Builder
			writeTable(&t, figs, false)
			writeNotes(&n, figs, false)
			ps.Table, ps.Notes = t.String(), n.String()
		}
		d.Scenarios = append(d.Scenarios, ps)
	}
	var b bytes.Buffer
	if err := benchmarksPage.Execute(&b, d); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteBenchmarksFile writes the BENCHMARKS.md page to path.
func (r *Report) WriteBenchmarksFile(path string, p Page) error {
	var b bytes.Buffer
	if err := r.WriteBenchmarks(&b, p); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// kernelRelease names the running kernel ("Linux 6.1.0-18-amd64"), or the
// OS alone where it cannot be read.
func kernelRelease() string {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		if v := strings.TrimSpace(string(b)); v != "" {
			return "Linux " + v
		}
	}
	return runtime.GOOS
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFiles writes report.md, report.json and one PNG per series into
// dir (created if needed) and returns the paths written.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := fn(fh); err != nil {
			fh.Close()
			return err
		}
		paths = append(paths, p)
		return fh.Close()
	}
	if err := write("report.md", r.Markdown); err != nil {
		return paths, err
	}
	if err := write("report.json", r.JSON); err != nil {
		return paths, err
	}
	for _, s := range r.Series {
		p := filepath.Join(dir, s.File)
		if err := s.PNG(p); err != nil {
			return paths, fmt.Errorf("plot %s: %w", s.File, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// PNG draws the series as a line plot with points.
func (s Series) PNG(path string) error {
	p := plot.New()
	p.Title.Text = s.Title
	p.X.Label.Text = s.XLabel
	p.Y.Label.Text = s.YLabel
	p.Y.Min = 0
	// Bottom right: throughput curves sit high and hit-ratio curves rise
	// from the bottom left, so this corner is the one most often empty.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	p.Add(plotter.NewGrid())
	for i, l := range s.Lines {
		if len(l.X) == 0 || len(l.X) != len(l.Y) {
			continue
		}
		pts := make(plotter.XYs, len(l.X))
		for j := range l.X {
			pts[j].X, pts[j].Y = l.X[j], l.Y[j]
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		line.Color = c
		line.Width = vg.Points(1.5)
		points.Color = c
		points.Shape = plotutil.Shape(i)
		if i > 0 {
			line.Dashes = plotutil.Dashes(i)
		}
		p.Add(line, points)
		p.Legend.Add(l.Label, line, points)
	}
	p.BackgroundColor = color.White
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

func (r *Report) sizeName() string {
	switch {
	case r.Tiny:
		return "--tiny"
	case r.Quick:
		return "--quick"
	}
	return "full size"
}
