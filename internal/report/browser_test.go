package report

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var screenshot = flag.String("screenshot", "", "write a full-page PNG of the sample report (the suite fixtures) to this file")

var screenshotTraces = flag.String("screenshot-traces", "", "with -screenshot: render the traces in this directory (e.g. a suite's --out) instead of the fixtures")

// writeReport renders runs into a file of a temporary directory and
// returns its file:// URL.
func writeReport(t *testing.T, name string, runs []Named) (path, url string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := HTML(f, "", runs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, "file://" + path
}

// domFacts is what the test reads back from the rendered page.
type domFacts struct {
	Timelines, Latencies, Profiles, Compares int
	Bars, Tips, TitlesLeft, TableRows        int
	Ready                                    string
}

const domScript = `(() => {
  const q = (s) => document.querySelectorAll(s).length;
  return {
    Timelines: q("svg.chart.timeline"), Latencies: q("svg.chart.latency"),
    Profiles: q("svg.chart.profile"), Compares: q("svg.chart.compare"),
    Bars: q("svg.chart rect.bar"), Tips: q("svg.chart [data-tip]"),
    TitlesLeft: q("svg.chart rect > title"), TableRows: q("table.compare tbody tr"),
    Ready: document.readyState,
  };
})()`

// TestBrowser loads reports from disk in headless Chromium, offline, and
// checks that the page raises no error, asks for nothing over the
// network, draws the expected charts at a usable size, and that hovering
// a bar shows its tooltip.
func TestBrowser(t *testing.T) {
	chromium := needChromium(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBrowser(t, chromium)

	for _, c := range []struct {
		name                                     string
		runs                                     []Named
		timelines, latencies, profiles, compares int
	}{
		{"suite", loadDir(t, suiteDir), 4, 4, 0, 1},
		{"runs", loadDir(t, runsDir), 5, 4, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, url := writeReport(t, c.name+".html", c.runs)
			p, err := b.openPage(ctx, url, 1280, 900)
			if err != nil {
				t.Fatal(err)
			}
			var f domFacts
			if err := p.eval(ctx, domScript, &f); err != nil {
				t.Fatal(err)
			}
			if f.Ready != "complete" {
				t.Errorf("document %s", f.Ready)
			}
			if f.Timelines != c.timelines || f.Latencies != c.latencies || f.Profiles != c.profiles || f.Compares != c.compares {
				t.Errorf("charts: %d timelines, %d latency histograms, %d profiles, %d comparisons; want %d, %d, %d, %d",
					f.Timelines, f.Latencies, f.Profiles, f.Compares, c.timelines, c.latencies, c.profiles, c.compares)
			}
			if f.TableRows != len(c.runs) {
				t.Errorf("comparison table has %d rows, want %d", f.TableRows, len(c.runs))
			}
			// The script ran: every bar's <title> became a tooltip.
			if f.Bars == 0 || f.Tips < f.Bars || f.TitlesLeft != 0 {
				t.Errorf("%d bars, %d with tooltips, %d titles left: the tooltip script did not run", f.Bars, f.Tips, f.TitlesLeft)
			}
			hoverShowsTooltip(ctx, t, p)
			fitsWidths(ctx, t, p)

			errs, reqs := p.problems(url)
			for _, e := range errs {
				t.Errorf("page: %s", e)
			}
			for _, r := range reqs {
				t.Errorf("network request: %s", r)
			}
		})
	}
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// hoverShowsTooltip moves the mouse onto a bar of the first timeline and
// expects the tooltip with the period's figures.
func hoverShowsTooltip(ctx context.Context, t *testing.T, p *page) {
	t.Helper()
	var pt struct{ X, Y float64 }
	err := p.eval(ctx, `(() => {
  const bar = document.querySelector("svg.chart.timeline rect.bar");
  bar.scrollIntoView({block: "center"});
  const r = bar.getBoundingClientRect();
  return {X: r.x + r.width / 2, Y: r.y + Math.max(1, r.height / 2)};
})()`, &pt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.call(ctx, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": pt.X, "y": pt.Y}); err != nil {
		t.Fatal(err)
	}
	var tip struct {
		Hidden bool
		Text   string
	}
	if err := p.eval(ctx, `(() => { const t = document.getElementById("tooltip"); return {Hidden: t.hidden, Text: t.textContent}; })()`, &tip); err != nil {
		t.Fatal(err)
	}
	if tip.Hidden || !strings.Contains(tip.Text, "period") {
		t.Errorf("hovering a timeline bar: tooltip hidden %v, text %q", tip.Hidden, tip.Text)
	}
}

// fitsWidths: the page is responsive: from a phone to a wide screen it
// never scrolls sideways (a chart or the table may, inside its own box),
// and no chart shrinks below a legible width.
func fitsWidths(ctx context.Context, t *testing.T, p *page) {
	t.Helper()
	for _, w := range []int{1920, 1280, 800, 400} {
		if _, err := p.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
			"width": w, "height": 900, "deviceScaleFactor": 1, "mobile": false,
		}); err != nil {
			t.Fatal(err)
		}
		var got struct{ Scroll, Narrowest float64 }
		if err := p.eval(ctx, `(() => ({
  Scroll: document.documentElement.scrollWidth,
  Narrowest: Math.min(...Array.from(document.querySelectorAll("svg.chart")).map((e) => e.getBoundingClientRect().width)),
}))()`, &got); err != nil {
			t.Fatal(err)
		}
		if got.Scroll > float64(w)+1 {
			t.Errorf("at %d px the page is %.0f px wide", w, got.Scroll)
		}
		if got.Narrowest < 300 {
			t.Errorf("at %d px a chart is only %.0f px wide", w, got.Narrowest)
		}
	}
}

// TestScreenshot writes docs/report.png (make screenshot): the suite
// fixtures' report, full page, 1280 px wide.
func TestScreenshot(t *testing.T) {
	if *screenshot == "" {
		t.Skip("no -screenshot file")
	}
	chromium := needChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBrowser(t, chromium)
	dir := suiteDir
	if *screenshotTraces != "" {
		dir = *screenshotTraces
	}
	_, url := writeReport(t, "report.html", loadDir(t, dir))
	p, err := b.openPage(ctx, url, 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	png, err := p.screenshot(ctx, 1280)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserCatchesProblems: the harness sees what TestBrowser says is
// absent. A page with a console error, an uncaught exception and an
// image from the network must show all three.
func TestBrowserCatchesProblems(t *testing.T) {
	chromium := needChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := startBrowser(t, chromium)
	path := filepath.Join(t.TempDir(), "bad.html")
	bad := `<!DOCTYPE html><html><head><meta charset="utf-8"><title>bad</title></head><body>
<img src="https://example.invalid/x.png" alt="">
<script>console.error("boom"); notDefined();</script></body></html>`
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + path
	p, err := b.openPage(ctx, url, 800, 600)
	if err != nil {
		t.Fatal(err)
	}
	errs, reqs := p.problems(url)
	all := strings.Join(errs, "\n")
	for _, want := range []string{"console.error: boom", "exception:", "notDefined"} {
		if !strings.Contains(all, want) {
			t.Errorf("harness missed %q; it saw:\n%s", want, all)
		}
	}
	if len(reqs) != 1 || reqs[0] != "https://example.invalid/x.png" {
		t.Errorf("harness saw requests %q, want the image", reqs)
	}
}
