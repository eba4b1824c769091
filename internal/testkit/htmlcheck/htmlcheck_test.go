package htmlcheck

import "testing"

// TestCheck: the oracle can fail, for each kind of danger, and passes what
// the archive's pages legitimately hold.
func TestCheck(t *testing.T) {
	page := Options{Stylesheet: "/static/style.css", Script: "/static/keys.js", Chart: true, FormAction: "/go", ArchiveLinks: true}
	tests := []struct {
		name, html string
		opts       Options
		bad        bool
	}{
		{"escaped", `<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>`, Options{}, false},
		{"link", `<a href="https://example.org/" rel="nofollow">x</a>`, Options{}, false},
		{"mailto", `<a href="mailto:a@example.org">x</a>`, Options{}, false},
		{"page furniture", `<meta charset="utf-8"><meta name="viewport" content="width=device-width"><link rel="stylesheet" href="/static/style.css"><form action="/go"><input name="n"><button>Go</button></form><a href="/00000001">x</a>`, page, false},
		{"script", `<p><script>alert(1)</script></p>`, Options{}, true},
		{"handler", `<b onmouseover="alert(1)">x</b>`, Options{}, true},
		{"javascript url", `<a href=" JaVa	Script:alert(1)">x</a>`, page, true},
		{"data url", `<a href="data:text/html,x">x</a>`, page, true},
		{"remote image", `<img src="https://tracker.example/p.gif">`, page, true},
		{"iframe", `<iframe srcdoc="x"></iframe>`, page, true},
		{"refresh", `<meta http-equiv="Refresh" content="0;url=https://evil.example/">`, page, true},
		{"style attribute", `<div style="background:url(https://evil.example/)">x</div>`, page, true},
		{"another stylesheet", `<link rel="stylesheet" href="https://evil.example/x.css">`, page, true},
		{"the pages' script", `<script src="/static/keys.js" defer></script>`, page, false},
		{"another script", `<script src="/00000001/raw"></script>`, page, true},
		{"an inline script", `<script>alert(1)</script>`, page, true},
		{"the pages' script in mail", `<script src="/static/keys.js"></script>`, Options{}, true},
		{"the page's chart", `<svg class="chart" viewBox="0 0 10 10" role="img" aria-label="x"><rect x="0" y="0" width="1" height="1"><title>x</title></rect></svg>`, page, false},
		{"another svg", `<svg><script>alert(1)</script></svg>`, page, true},
		{"a chart in mail", `<svg class="chart"></svg>`, Options{}, true},
		{"a chart with a handler", `<svg class="chart"><rect onclick="alert(1)"></rect></svg>`, page, true},
		{"canonical link", `<link rel="canonical" href="/t/00000001/?view=flat">`, page, false},
		{"canonical link elsewhere", `<link rel="canonical" href="//evil.example/x.css">`, page, true},
		{"canonical link in mail", `<link rel="canonical" href="/t/00000001/">`, Options{}, true},
		{"another form", `<form action="https://evil.example/"></form>`, page, true},
		{"input without a form", `<input name="x">`, Options{}, true},
		{"search text in the box", `<form action="/go"><input name="n" value="javascript:alert(1)"></form>`, page, false},
		{"script url in another attribute of the box", `<form action="/go"><input name="n" formaction="javascript:alert(1)"></form>`, page, true},
		{"search text in a box of mail", `<input value="javascript:alert(1)">`, Options{}, true},
		{"archive link in mail", `<a href="/00000001">x</a>`, Options{}, true},
		{"scheme-relative", `<a href="//evil.example/">x</a>`, page, true},
		{"host-less https", `<a href="https:0">x</a>`, page, true},
		{"a link in a chart", `<svg class="chart"><a href="https://evil.example/"><rect></rect></a></svg>`, page, true},
		{"use in a chart", `<svg class="chart"><use href="https://evil.example/x.svg#a"/></svg>`, page, true},
		{"foreign object in a chart", `<svg class="chart"><foreignObject><div>x</div></foreignObject></svg>`, page, true},
		{"animation in a chart", `<svg class="chart"><rect><set attributeName="x" to="1"/></rect></svg>`, page, true},
		{"a link after a chart", `<svg class="chart"><rect></rect></svg><a href="/00000001">x</a>`, page, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.html, tt.opts)
			if (err != nil) != tt.bad {
				t.Errorf("Check(%q) = %v, want bad %v", tt.html, err, tt.bad)
			}
		})
	}
}
