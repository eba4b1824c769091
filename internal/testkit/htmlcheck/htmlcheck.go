// Package htmlcheck is the tests' oracle for "nothing in this HTML can run
// code or load anything": it tokenizes HTML as a browser would, and every
// test of HTML output uses it, so that a rule added here applies to all.
package htmlcheck

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// Options say what a page of the archive's own may contain beyond a
// sanitized mail fragment; the zero value allows nothing.
type Options struct {
	Stylesheet   string // the one <link href> allowed (and with ArchiveLinks, rel="canonical")
	Script       string // the one <script src> allowed
	Chart        bool   // <svg class="chart">, a chart the page draws
	FormAction   string // the one <form action> allowed, with its inputs
	ArchiveLinks bool   // href="/..."
}

// banned elements run code, load content or change how the page is read.
var banned = map[string]bool{
	"script": true, "style": true, "img": true, "iframe": true, "frame": true, "object": true,
	"embed": true, "applet": true, "svg": true, "math": true, "video": true, "audio": true,
	"source": true, "template": true, "noscript": true, "base": true,
}

// svgBanned elements load content, link or animate inside an <svg> (a
// chart the page draws may hold shapes and titles).
var svgBanned = map[string]bool{
	"use": true, "image": true, "feimage": true, "foreignobject": true, "a": true,
	"animate": true, "set": true, "animatemotion": true, "animatetransform": true, "handler": true, "listener": true,
}

// Check returns nil when s holds nothing executable or remote, or an error
// naming the first thing that is.
func Check(s string, o Options) error {
	z := html.NewTokenizer(strings.NewReader(s))
	inSVG := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			if errors.Is(z.Err(), io.EOF) {
				return nil
			}
			return z.Err()
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if inSVG > 0 && svgBanned[tok.Data] {
				return fmt.Errorf("element <%s> in <svg>", tok.Data)
			}
			if err := checkTag(tok, o); err != nil {
				return err
			}
			if tok.Data == "svg" && tok.Type == html.StartTagToken {
				inSVG++
			}
		case html.EndTagToken:
			if z.Token().Data == "svg" && inSVG > 0 {
				inSVG--
			}
		}
	}
}

func checkTag(tok html.Token, o Options) error {
	switch tok.Data {
	case "link":
		// A page's canonical URL, on the archive, loads nothing.
		canonical := o.ArchiveLinks && attr(tok, "rel") == "canonical" && strings.HasPrefix(attr(tok, "href"), "/") && !strings.HasPrefix(attr(tok, "href"), "//")
		if !canonical && (o.Stylesheet == "" || attr(tok, "href") != o.Stylesheet) {
			return fmt.Errorf("<link href=%q>", attr(tok, "href"))
		}
	case "svg":
		if !o.Chart || attr(tok, "class") != "chart" {
			return fmt.Errorf("element <svg>")
		}
	case "script":
		if o.Script == "" || attr(tok, "src") != o.Script {
			return fmt.Errorf("<script src=%q>", attr(tok, "src"))
		}
	case "form":
		if o.FormAction == "" || attr(tok, "action") != o.FormAction {
			return fmt.Errorf("<form action=%q>", attr(tok, "action"))
		}
	case "input", "button":
		if o.FormAction == "" {
			return fmt.Errorf("element <%s>", tok.Data)
		}
	case "meta":
		if attr(tok, "http-equiv") != "" {
			return fmt.Errorf("<meta http-equiv=%q>", attr(tok, "http-equiv"))
		}
	default:
		if banned[tok.Data] {
			return fmt.Errorf("element <%s>", tok.Data)
		}
	}
	for _, a := range tok.Attr {
		key := strings.ToLower(a.Key)
		// Browsers ignore white space and case in a URL's scheme.
		val := strings.ToLower(strings.Join(strings.Fields(a.Val), ""))
		// The text in the archive's own search box (the search typed) is
		// data, never a URL.
		if tok.Data == "input" && key == "value" && o.FormAction != "" {
			continue
		}
		if tok.Data == "script" && key == "src" {
			continue // checked above
		}
		switch {
		case strings.HasPrefix(key, "on"), key == "style", key == "src", key == "srcset",
			key == "background", key == "poster", key == "formaction":
			return fmt.Errorf("attribute %s=%q on <%s>", a.Key, a.Val, tok.Data)
		case strings.Contains(val, "javascript:"), strings.Contains(val, "vbscript:"),
			strings.HasPrefix(val, "data:") && key != "content":
			return fmt.Errorf("script or data URL %s=%q on <%s>", a.Key, a.Val, tok.Data)
		case key == "href" && tok.Data != "link":
			if !linkOK(val, o.ArchiveLinks) {
				return fmt.Errorf("href=%q on <%s>", a.Val, tok.Data)
			}
		}
	}
	return nil
}

// linkOK accepts mailto: and http(s) URLs that name a host ("https:path"
// resolves into the page's own site), and with archive, archive paths.
func linkOK(v string, archive bool) bool {
	switch {
	case strings.HasPrefix(v, "mailto:"):
		return true
	case strings.HasPrefix(v, "http://"), strings.HasPrefix(v, "https://"):
		_, rest, _ := strings.Cut(v, "//")
		return rest != "" && rest[0] != '/'
	case strings.HasPrefix(v, "//"):
		return false
	case strings.HasPrefix(v, "/"):
		return archive
	}
	return false
}

func attr(tok html.Token, key string) string {
	for _, a := range tok.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}
