package resolver

import (
	_ "embed"
	"net/http"
	"strconv"
)

// keysJS is the pages' keyboard shortcuts: an enhancement that follows
// the links a page has ("?" lists them), which the CSP's script-src
// 'self' lets run; no page needs it.
//
//go:embed static/keys.js
var keysJS []byte

func (s *Server) keysScript(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("Content-Length", strconv.Itoa(len(keysJS)))
	w.Write(keysJS)
}
