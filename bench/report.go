package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Markdown writes the report as a Markdown table, followed by the machine,
// the missing peers and any errors.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| scenario | figure | scc | peer | peer value | ratio | target | status |\n")
	b.WriteString("| --- | --- | ---: | --- | ---: | ---: | --- | --- |\n")
	for _, f := range r.Figures {
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
		switch status {
		case "met":
			status = "**met**"
		case "not met":
			status = "not met"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s | %s | %s | %s |\n",
			f.Scenario, mdEscape(f.Metric), trimFloat(f.SCC), f.Unit, mdEscape(f.Peer), pv, ratio, tgt, status)
	}
	b.WriteString("\nratio = how many times better scc is (scc/peer for throughput, peer/scc for memory).\n")
	notes := map[string]bool{}
	for _, f := range r.Figures {
		if f.Note != "" && !notes[f.Scenario+f.Note] {
			notes[f.Scenario+f.Note] = true
			fmt.Fprintf(&b, "- %s: %s\n", f.Scenario, f.Note)
		}
	}
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
