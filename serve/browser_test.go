package serve

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The web page in a real browser: Debian's chromium, headless, given time
// to run the page's script (--virtual-time-budget). A missing chromium
// skips, saying how to install it.

func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("the web page's browser tests need Debian chromium (make interop-deps)")
	return ""
}

// chromium runs a headless chromium with args and returns its stdout.
func chromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	return out
}

// TestBrowserTree: the page, run by chromium, lists every dataset of the
// file, those the Zarr view leaves out too, and shows the file's summary.
func TestBrowserTree(t *testing.T) {
	bin := needChromium(t)
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	dom := string(chromium(t, bin, "--dump-dom", srv.URL+"/"))
	require.Contains(t, dom, `data-ready="1"`, "the script ran and drew the tree:\n%s", dom)
	for _, name := range append(append([]string{}, fx.served...), fx.skipped...) {
		assert.Contains(t, dom, `data-name="`+html.EscapeString(name)+`"`, "the tree lists %s", name)
	}
	assert.Contains(t, dom, fmt.Sprintf("%d datasets", len(fx.served)+len(fx.skipped)))
	assert.Contains(t, dom, `data-path="g/h"`, "nested groups")
}

// TestBrowserSlice: the page opened on one dataset's slice shows it as the
// data says: frame 1 of img is dark on the left and bright on the right,
// frame 0 the other way round, so a screenshot tells whether the page drew
// the frame it was asked for with the contrast it was given. The pixels of
// the image itself are checked exactly by TestWebSlice; here a row of the
// screenshot must hold the gradient.
func TestBrowserSlice(t *testing.T) {
	bin := needChromium(t)
	_, s, _ := open(t, imageFile(t), Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	// SCC_SHOT_DIR keeps the screenshots there, to look at.
	shot := func(i string) image.Image {
		file := filepath.Join(t.TempDir(), "shot.png")
		if d := os.Getenv("SCC_SHOT_DIR"); d != "" {
			file = filepath.Join(d, "shot"+i+".png")
		}
		chromium(t, bin, "--window-size=1200,900", "--screenshot="+file, srv.URL+"/?ds=img&cmap=gray&min=0&max=255&i="+i)
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err)
		return img
	}
	up, down := gradientRun(shot("1,0,0"))
	assert.GreaterOrEqual(t, up, 400, "frame 1: a row rising from black to white over the 512 pixels the image is drawn on")
	assert.Less(t, down, 100, "frame 1: no falling gradient")
	up, down = gradientRun(shot("0,0,0"))
	assert.GreaterOrEqual(t, down, 400, "frame 0: a row falling from white to black")
	assert.Less(t, up, 100, "frame 0: no rising gradient")
}

// gradientRun returns the longest runs of grey pixels in one row of img
// that rise (up) and fall (down) steadily, by at most 8 levels a pixel,
// and span from under 16 to over 239.
func gradientRun(img image.Image) (up, down int) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for _, sign := range []int{1, -1} {
			n, lo, hi := 0, 0, 0
			prev := -1
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bb, _ := img.At(x, y).RGBA()
				v := int(r >> 8)
				grey := abs(int(r>>8)-int(g>>8)) <= 2 && abs(int(g>>8)-int(bb>>8)) <= 2
				d := (v - prev) * sign
				if grey && prev >= 0 && d >= 0 && d <= 8 {
					n++
					lo, hi = min(lo, v), max(hi, v)
				} else {
					n, lo, hi = 0, v, v
				}
				prev = v
				if !grey {
					prev = -1
				}
				if lo < 16 && hi > 239 {
					if sign > 0 {
						up = max(up, n)
					} else {
						down = max(down, n)
					}
				}
			}
		}
	}
	return up, down
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
