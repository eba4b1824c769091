package resolver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// axeVersion is the axe-core that scripts/install-test-deps.sh installs.
const axeVersion = "4.14.1"

// axeScript returns the source of axe-core (axe.min.js): the file
// $CHIBRARY_AXE names, else the one scripts/install-test-deps.sh installs
// under the user's cache directory. Without it the test skips, except
// under CI=true, where the install script must have put it there.
func axeScript(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CHIBRARY_AXE")
	if path == "" {
		cache, err := os.UserCacheDir()
		if err == nil {
			path = filepath.Join(cache, "chibrary", "npm", "node_modules", "axe-core", "axe.min.js")
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		msg := fmt.Sprintf("axe-core is not installed (%v; scripts/install-test-deps.sh installs axe-core@%s with npm, or set CHIBRARY_AXE to its axe.min.js)", err, axeVersion)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + ", but CI=true: CI must install it")
		}
		t.Skip(msg + ": skipping the accessibility check")
	}
	return string(b)
}

// axeViolation is the part of an axe-core result the test reports.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// emulateScheme makes the page's prefers-color-scheme light or dark.
func emulateScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// TestAccessibility runs axe-core in headless Chromium on every kind of
// page (front, list, month, thread, message, a patch, a cover letter with
// its versions, search, search help, 404, 410), at 1280 and 390 px, in
// the light and the dark scheme, and
// fails on every serious or critical violation, naming the rule and the
// elements. It saves a screenshot of each in the screenshot directory
// (a11y-PAGE-WIDTH-SCHEME.png) for a person to look at.
func TestAccessibility(t *testing.T) {
	chromium(t)
	axe := axeScript(t)
	ca := newCatalogArchive(t)
	removed := ca.cn(t, "attachments-1")
	n, _, err := Resolve(t.Context(), ca.st, removed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.st.Remove(t.Context(), n, "at the author's request"); err != nil {
		t.Fatal(err)
	}
	// A series in two versions, for a patch page that lists them.
	for _, raw := range readMboxFile(t, filepath.Join("..", "fixtures", "changeid", "series.mbox")) {
		ca.add(t, raw, "series")
	}
	ca.sync(t)
	ctx := browser(t)
	shots := screenshotDir(t)
	t.Logf("screenshots in %s", shots)

	pages := []struct{ name, path string }{
		{"front", "/"},
		{"list", "/l/demo/"},
		{"month", "/l/demo/2024-03/"},
		{"thread", "/t/" + ca.cn(t, "t1.1") + "/"},
		{"thread-flat", "/t/" + ca.cn(t, "s1") + "/?view=flat"},
		{"message", "/" + ca.cn(t, "t1.3")},
		{"patch", "/" + ca.cn(t, "series-3")},
		{"patch-versions", "/" + ca.cn(t, "ralink-v1-0")},
		{"search", "/search?q=archive"},
		{"search-help", "/search"},
		{"404", "/l/no-such-list/"},
		{"410", "/" + removed},
	}
	sizes := []struct {
		width, height int64
		mobile        bool
	}{{1280, 900, false}, {390, 844, true}}
	for _, size := range sizes {
		for _, scheme := range []string{"light", "dark"} {
			for _, p := range pages {
				name := fmt.Sprintf("%s-%d-%s", p.name, size.width, scheme)
				t.Run(name, func(t *testing.T) {
					var opts []chromedp.EmulateViewportOption
					if size.mobile {
						opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateScale(2))
					}
					if err := chromedp.Do(ctx,
						chromedp.EmulateViewport(size.width, size.height, opts...),
						emulateScheme(scheme),
						chromedp.Navigate(ca.srv.URL+p.path),
						chromedp.WaitVisible(chromedp.CSS("main")),
					); err != nil {
						t.Fatalf("cannot load %s: %v", p.path, err)
					}
					dark, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`matchMedia("(prefers-color-scheme: dark)").matches`))
					if err != nil || dark != (scheme == "dark") {
						t.Fatalf("prefers-color-scheme: dark matches %v (%v), want %v", dark, err, scheme == "dark")
					}
					if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](axe+";\ntrue")); err != nil {
						t.Fatalf("cannot load axe-core into %s: %v", p.path, err)
					}
					var violations []axeViolation
					violations, err = chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](
						`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
					if err != nil {
						t.Fatalf("axe.run on %s: %v", p.path, err)
					}
					for _, v := range violations {
						if v.Impact != "serious" && v.Impact != "critical" {
							t.Logf("%s: %s violation %s (%s) on %d elements", p.path, v.Impact, v.ID, v.Help, len(v.Nodes))
							continue
						}
						var where []string
						for _, n := range v.Nodes {
							where = append(where, fmt.Sprintf("%v: %s", n.Target, strings.ReplaceAll(n.Summary, "\n", " ")))
						}
						t.Errorf("%s (%d px, %s): %s violation %s: %s, on:\n  %s", p.path, size.width, scheme, v.Impact, v.ID, v.Help, strings.Join(where, "\n  "))
					}
					overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
					if err != nil || overflow {
						t.Errorf("%s scrolls sideways at %d px (%v)", p.path, size.width, err)
					}
					png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
					if err != nil {
						t.Fatalf("screenshot: %v", err)
					}
					if err := os.WriteFile(filepath.Join(shots, "a11y-"+name+".png"), png, 0o644); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}
