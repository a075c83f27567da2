package qualify_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// ReportPNGEnv names a file the browser test copies its screenshot of a
// run's report.html to (`make report-png` sets it to docs/report.png).
const ReportPNGEnv = "QUALBOX_REPORT_PNG"

// chromium returns the headless Chromium the page test renders with:
// $QUALBOX_CHROMIUM, else Debian's chromium-headless-shell or chromium.
// Without one the test skips, or fails under QUALBOX_REQUIRE_ENGINE=1
// (make test, where every test of real parts must run).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("QUALBOX_CHROMIUM"), "chromium-headless-shell", "chromium"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no headless Chromium (apt-get install chromium-headless-shell, or set QUALBOX_CHROMIUM)"
	if os.Getenv(testengine.RequireEnv) == "1" {
		t.Fatalf("%s, and %s=1 requires this test to run", why, testengine.RequireEnv)
	}
	t.Skip(why)
	return ""
}

// browse runs Chromium headless on the file at page with args (a
// throwaway profile, no sandbox: the test may run as root) and returns
// its stdout.
func browse(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,4000", "--hide-scrollbars"}, args...)
	argv = append(argv, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	assert.NilError(t, err, "%s %s: %s", bin, strings.Join(argv, " "), stderr.String())
	return stdout.Bytes()
}

var (
	plotSVG  = regexp.MustCompile(`<svg[^>]* class="plot"[^>]*aria-label="(memory|PIDs) of [^"]+"`)
	polyline = regexp.MustCompile(`<polyline class="l1" points="([0-9.]+,[0-9.]+ ?){2,}"`)
)

// A real run's report.html and the gate's page over it, opened in a real
// browser: the DOM Chromium builds holds the scenario table, the matrix
// and the series plots (each with a drawn line of at least two points),
// and its screenshot shows the limit line and the usage line in their
// colours, so the SVG was painted, not only parsed.
func TestReportPagesRenderInABrowser(t *testing.T) {
	bin := chromium(t)
	keys := t.TempDir()
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	pub, err := attest.LoadPublicKey(pubPath)
	assert.NilError(t, err)
	run, out := runSignedScenarios(t, key, "memory-exhaustion", "pid-exhaustion")
	assert.Equal(t, run.Verdict.Kind, evidence.Passed)

	signed, err := evidence.VerifyRun(context.Background(), out, pub)
	assert.NilError(t, err, "the run's report.html is what its evidence renders")
	g := evidence.Judge([]*evidence.Signed{signed}, nil, nil)
	gatePage, err := evidence.GateHTML(g, []*evidence.Signed{signed})
	assert.NilError(t, err)
	gatePath := filepath.Join(t.TempDir(), "gate.html")
	assert.NilError(t, os.WriteFile(gatePath, gatePage, 0o644))
	runPath := filepath.Join(out, evidence.HTMLFile)

	for _, page := range []string{runPath, gatePath} {
		dom := string(browse(t, bin, page, "--dump-dom"))
		assert.Check(t, is.Contains(dom, `<table class="scenarios">`), page)
		plots := plotSVG.FindAllStringSubmatch(dom, -1)
		kinds := map[string]int{}
		for _, p := range plots {
			kinds[p[1]]++
		}
		// memory-exhaustion's series has memory and PIDs; so has
		// pid-exhaustion's.
		assert.Check(t, kinds["memory"] >= 2 && kinds["PIDs"] >= 2, "%s: plots %v", page, kinds)
		assert.Check(t, len(polyline.FindAllString(dom, -1)) >= 4, "%s: drawn lines", page)
		assert.Check(t, is.Contains(dom, `class="limit"`), page)
		assert.Check(t, is.Contains(dom, `>OOM kill</text>`), page)
		assert.Check(t, is.Contains(dom, `>fork refused</text>`), page)
		if page == gatePath {
			assert.Check(t, is.Contains(dom, `<table class="matrix">`))
			assert.Check(t, is.Contains(dom, `<th>memory-exhaustion</th>`))
			assert.Check(t, is.Contains(dom, `id="gate-line"`))
		}
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	browse(t, bin, runPath, "--screenshot="+shot)
	data, err := os.ReadFile(shot)
	assert.NilError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	assert.NilError(t, err)
	// The limit line (#cf222e) and the usage line (#0969da) as painted.
	limit, usage := countNear(img, 0xcf, 0x22, 0x2e), countNear(img, 0x09, 0x69, 0xda)
	assert.Check(t, limit >= 200, "limit-line pixels: %d", limit)
	assert.Check(t, usage >= 200, "usage-line pixels: %d", usage)
	t.Logf("screenshot %dx%d: %d limit-line and %d usage-line pixels", img.Bounds().Dx(), img.Bounds().Dy(), limit, usage)
	if dst := os.Getenv(ReportPNGEnv); dst != "" {
		assert.NilError(t, os.WriteFile(dst, data, 0o644))
		t.Logf("wrote %s", dst)
	}
}

// countNear counts the pixels of img within 24 of (r, g, b) per channel.
func countNear(img image.Image, r, g, b uint8) int {
	n := 0
	bounds := img.Bounds()
	near := func(a uint32, want uint8) bool {
		d := int(a>>8) - int(want)
		return d >= -24 && d <= 24
	}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, r) && near(pg, g) && near(pb, b) {
				n++
			}
		}
	}
	return n
}
