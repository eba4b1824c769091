package resolver

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestKeys presses the keyboard shortcuts (static/keys.js) in headless
// Chromium and checks where they lead; then, with JavaScript off, that a
// thread page's views and a message's links still work.
func TestKeys(t *testing.T) {
	chromium(t)
	ca := newCatalogArchive(t)
	ctx := browser(t)
	open := func(t *testing.T, path, wait string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(ca.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(wait))); err != nil {
			t.Fatalf("cannot load %s: %v", path, err)
		}
	}
	press := func(t *testing.T, key string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.KeyEvent(key)); err != nil {
			t.Fatalf("cannot press %q: %v", key, err)
		}
	}
	path := func(t *testing.T) string {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if u.RawQuery != "" {
			return u.Path + "?" + u.RawQuery
		}
		return u.Path
	}
	// pressTo presses key and waits for the browser to show want.
	pressTo := func(t *testing.T, key, want string) {
		t.Helper()
		from := path(t)
		press(t, key)
		deadline := time.Now().Add(10 * time.Second)
		for path(t) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%q on %s led to %s, want %s", key, from, path(t), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatal(err)
		}
	}
	eval := func(t *testing.T, js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	focused := `(document.activeElement && document.activeElement.getAttribute("href")) || (document.activeElement || {}).name || ""`

	t.Run("a message: j, k, n, p, t, u", func(t *testing.T) {
		t3 := "/" + ca.cn(t, "t1.3")
		open(t, t3, "nav.thread")
		pressTo(t, "j", "/"+ca.cn(t, "t1.4"))
		pressTo(t, "k", t3)
		pressTo(t, "k", "/"+ca.cn(t, "t1.2"))
		open(t, t3, "nav.thread")
		next := eval(t, `document.querySelector("a.bydate-next").getAttribute("href")`)
		prev := eval(t, `document.querySelector("a.bydate-prev").getAttribute("href")`)
		if next == t3 || prev == t3 || next == prev {
			t.Fatalf("by date: previous %s, next %s, of %s", prev, next, t3)
		}
		pressTo(t, "n", next)
		pressTo(t, "p", t3)
		pressTo(t, "p", prev)
		open(t, t3, "nav.thread")
		pressTo(t, "t", "/t/"+ca.cn(t, "t1.3")+"/")
		open(t, t3, "nav.thread")
		pressTo(t, "u", "/l/demo/2024-03/")
	})
	t.Run("a list: j and k move between threads, J and K too", func(t *testing.T) {
		open(t, "/l/demo/", "ol.threads")
		rows := func(i int) string {
			return eval(t, `document.querySelectorAll("ol.threads > li")[`+string(rune('0'+i))+`].querySelector("a").getAttribute("href")`)
		}
		press(t, "j")
		if got := eval(t, focused); got != rows(0) {
			t.Errorf("j on a list focuses %q, want the first thread %q", got, rows(0))
		}
		press(t, "j")
		press(t, "J")
		if got := eval(t, focused); got != rows(2) {
			t.Errorf("j, j, J on a list focus %q, want the third thread %q", got, rows(2))
		}
		press(t, "k")
		if got := eval(t, focused); got != rows(1) {
			t.Errorf("then k focuses %q, want the second thread %q", got, rows(1))
		}
		if n := eval(t, `String(document.querySelectorAll("ol.threads > li.kb").length)`); n != "1" {
			t.Errorf("%s rows marked as the one moved to, want 1", n)
		}
		pressTo(t, kb.Enter, rows(1))
	})
	t.Run("a thread: j moves to the next message", func(t *testing.T) {
		open(t, "/t/"+ca.cn(t, "t1.1")+"/", "article.tmsg")
		press(t, "j")
		if got, want := eval(t, focused), "/"+ca.cn(t, "t1.2"); got != want {
			t.Errorf("j on a thread page focuses %q, want the second message's sender %q", got, want)
		}
	})
	t.Run("/ focuses the search box, ? shows the keys", func(t *testing.T) {
		open(t, "/l/demo/", "ol.threads")
		press(t, "/")
		if got := eval(t, `document.activeElement.closest("form") ? document.activeElement.closest("form").className : ""`); got != "search" {
			t.Errorf("/ on a list page focuses a box of form %q, want the list's search", got)
		}
		// j in the box is typed, not a shortcut. (The protocol's key
		// events insert the "/" the page declined, which a person's
		// keyboard does not.)
		press(t, "j")
		if got := eval(t, `document.activeElement.value`); !strings.HasSuffix(got, "j") || path(t) != "/l/demo/" {
			t.Errorf("j typed into the box gives %q on %s, want it typed on /l/demo/", got, path(t))
		}
		press(t, kb.Escape)
		press(t, "?")
		help := eval(t, `(document.querySelector("aside.keyhelp") || {}).innerText || ""`)
		for _, w := range []string{"Keyboard shortcuts", "next message", "search", "show or hide these keys"} {
			if !strings.Contains(help, w) {
				t.Errorf("? shows %q, which lacks %q", help, w)
			}
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(screenshotDir(t), "keys-help.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		press(t, kb.Escape)
		if n := eval(t, `String(document.querySelectorAll("aside.keyhelp").length)`); n != "0" {
			t.Errorf("Escape leaves %s help boxes, want none", n)
		}
		press(t, "?")
		press(t, "?")
		if n := eval(t, `String(document.querySelectorAll("aside.keyhelp").length)`); n != "0" {
			t.Errorf("? twice leaves %s help boxes, want none", n)
		}
	})
	t.Run("without JavaScript", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		})); err != nil {
			t.Fatal(err)
		}
		open(t, "/t/"+ca.cn(t, "s1")+"/", "article.tmsg")
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`nav.views a`))); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.HasSuffix(path(t), "?view=flat") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if got := path(t); got != "/t/"+ca.cn(t, "s1")+"/?view=flat" {
			t.Fatalf("the by-date link led to %s", got)
		}
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("article.tmsg"))); err != nil {
			t.Fatal(err)
		}
		if n := eval(t, `String(document.querySelectorAll("article.tmsg[id]").length)`); n != "5" {
			t.Errorf("%s messages in the flat view without JavaScript, want 5", n)
		}
		press(t, "?")
		if n := eval(t, `String(document.querySelectorAll("aside.keyhelp").length)`); n != "0" {
			t.Errorf("a script ran with JavaScript off: %s help boxes", n)
		}
	})
}
