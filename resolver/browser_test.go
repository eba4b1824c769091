package resolver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chibrary/chibrary/internal/testcorpus"
	"github.com/chibrary/chibrary/mailview"
)

// chromium returns the path of a Chromium binary, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHIBRARY_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("Chromium is not installed (apt-get install chromium, or set CHIBRARY_CHROMIUM): skipping the browser test")
	return ""
}

// browser starts a headless Chromium that reaches nothing but loopback.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions"),
		// Every name resolves to nothing, so no request leaves the machine
		// even if a page asked for one; the test server is an IP literal.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		// Loopback bypasses the proxy; anything else goes to a closed port.
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.WindowSize(1000, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("cannot start Chromium: %v", err)
	}
	return bctx
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestBrowser(t *testing.T) {
	ctx := browser(t)
	fa := newFixtureArchive(t)

	// A real message: the first of the shared corpus with a subject and a
	// plain-text body, or a fixture when the corpus is absent.
	raw := readFixture(t, "latin1.eml")
	if testcorpus.Find() != "" {
		for _, m := range readCorpus(t, 50) {
			v := mailview.Parse(m, mailview.Options{})
			if v.Subject != "" && len(v.Parts) > 0 && v.Parts[0].Text != "" && len(v.Attachments) == 0 {
				raw = m
				break
			}
		}
	} else {
		t.Logf("shared corpus absent: using fixtures/web/latin1.eml")
	}
	n := fa.put(t, raw, "linux-mips")
	view := mailview.Parse(raw, mailview.Options{})
	var firstLine string
	for _, l := range strings.Split(view.Parts[0].Text, "\n") {
		if len(strings.TrimSpace(l)) > 10 {
			firstLine = normalize(l)
			break
		}
	}

	t.Run("message page", func(t *testing.T) {
		shots := t.TempDir()
		for _, vp := range []struct {
			name          string
			width, height int64
			mobile        bool
		}{{"desktop", 1000, 900, false}, {"phone", 390, 844, true}} {
			t.Run(vp.name, func(t *testing.T) {
				emulate := []chromedp.EmulateViewportOption{}
				if vp.mobile {
					emulate = append(emulate, chromedp.EmulateMobile, chromedp.EmulateScale(2))
				}
				if err := chromedp.Do(ctx,
					chromedp.EmulateViewport(vp.width, vp.height, emulate...),
					chromedp.Navigate(fa.srv.URL+"/"+n.String()),
					chromedp.WaitVisible(chromedp.CSS("pre.text")),
				); err != nil {
					t.Fatalf("cannot load the page: %v", err)
				}
				title, err := chromedp.Run(ctx, chromedp.Title())
				if err != nil || title != view.Subject {
					t.Errorf("title = %q (%v), want %q", title, err, view.Subject)
				}
				h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
				if err != nil || normalize(h1) != normalize(view.Subject) {
					t.Errorf("visible h1 = %q (%v), want %q", h1, err, view.Subject)
				}
				body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("section.body")))
				if err != nil || !strings.Contains(normalize(body), firstLine) {
					t.Errorf("visible body does not contain %q (%v):\n%s", firstLine, err, body)
				}
				// The stylesheet loaded under the CSP: main is width-limited.
				maxWidth, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("main")).maxWidth`))
				if err != nil || maxWidth == "none" {
					t.Errorf("main max-width = %q (%v): the stylesheet did not apply", maxWidth, err)
				}
				// Nothing is wider than the viewport (readable on a phone).
				overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
				if err != nil || overflow {
					t.Errorf("page scrolls sideways at %dpx (%v)", vp.width, err)
				}
				png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
				if err != nil {
					t.Fatalf("screenshot: %v", err)
				}
				path := filepath.Join(shots, vp.name+".png")
				if err := os.WriteFile(path, png, 0o644); err != nil {
					t.Fatal(err)
				}
				if out := os.Getenv("CHIBRARY_SCREENSHOT_DIR"); out != "" {
					os.WriteFile(filepath.Join(out, "resolver-"+vp.name+".png"), png, 0o644)
				}
			})
		}
	})

	// The control: the same browser does run a page's script, so the
	// checks below can fail.
	t.Run("control", func(t *testing.T) {
		ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!doctype html><title>x</title><body><script>document.title='pwned-control'</script>`)
		}))
		defer ctl.Close()
		if err := chromedp.Do(ctx, chromedp.Navigate(ctl.URL)); err != nil {
			t.Fatal(err)
		}
		if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || title != "pwned-control" {
			t.Fatalf("control page title = %q (%v), want pwned-control: this browser runs no script, the test proves nothing", title, err)
		}
	})

	t.Run("hostile messages run no script", func(t *testing.T) {
		for _, file := range []string{"hostile.eml", "hostile-plain.eml"} {
			t.Run(file, func(t *testing.T) {
				if err := chromedp.Do(ctx,
					chromedp.Navigate(fa.srv.URL+"/"+fa.numbers[file].String()),
					chromedp.WaitVisible(chromedp.CSS("section.body")),
					chromedp.Sleep(300*time.Millisecond), // let onload/onerror handlers fire, if any survived
				); err != nil {
					t.Fatalf("cannot load the page: %v", err)
				}
				title, err := chromedp.Run(ctx, chromedp.Title())
				if err != nil || strings.HasPrefix(title, "pwned") {
					t.Errorf("document.title = %q (%v): a hostile script ran", title, err)
				}
				want := mailview.Parse(readFixture(t, file), mailview.Options{}).Subject
				if title != want {
					t.Errorf("document.title = %q, want the subject as text %q", title, want)
				}
				count, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script, img, iframe, svg, object, embed, form:not([action='/go']), [onerror], [onload], [style]").length`))
				if err != nil || count != 0 {
					t.Errorf("%d active elements in the DOM (%v), want 0", count, err)
				}
				js, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("a[href]")).filter(a => a.protocol === "javascript:").length`))
				if err != nil || js != 0 {
					t.Errorf("%d javascript: links (%v), want 0", js, err)
				}
				text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
				if err != nil || !strings.Contains(text, "document.title") && file == "hostile-plain.eml" {
					t.Errorf("the markup of the plain message is not shown as text (%v):\n%s", err, text)
				}
			})
		}
	})
}
