// Package web serves the embeddable chat widget and the demo page, both
// compiled into the binary (embed.FS): no CDN, no external fonts, nothing a
// site must host itself.
//
// The widget is one dependency-free script, widget.js, that defines the
// <switchboard-chat> custom element and speaks protocol v1 over /ws. It
// renders no Markdown itself: the gateway sends each Markdown message with
// its HTML, rendered by goldmark and sanitised by bluemonday
// (listeners/websocket/markdown.go), and everything else from the server is
// set as text. One sanitiser, in Go, tested in one place, instead of a
// Markdown library and a sanitiser bundled into every page.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// asset is one served file with its validator.
type asset struct {
	name, contentType, etag string
	body                    []byte
}

// Handler serves / (the demo page) and /widget.js. They are revalidated on
// every load (no-cache, with an ETag of their content), so a gateway
// upgrade reaches every page at once and an unchanged file costs a 304.
func Handler() http.Handler { return HandlerWith(Options{}) }

// Options tune what Handler serves.
type Options struct {
	// ImageHosts may serve images on the demo page
	// (listeners.websocket.image_hosts); its Content-Security-Policy
	// allows images from them, the page's own origin and data: only.
	ImageHosts []string
}

// HandlerWith is Handler with options.
func HandlerWith(o Options) http.Handler {
	imgSrc := "'self' data:"
	for _, h := range o.ImageHosts {
		if h != "" && !strings.ContainsAny(h, " ;,'\"") {
			imgSrc += " " + h
		}
	}
	csp := "default-src 'self'; connect-src 'self' ws: wss:; img-src " + imgSrc + "; style-src 'self' 'unsafe-inline'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'"
	assets := map[string]asset{}
	for path, a := range map[string]asset{
		"/":          {name: "static/index.html", contentType: "text/html; charset=utf-8"},
		"/widget.js": {name: "static/widget.js", contentType: "text/javascript; charset=utf-8"},
	} {
		body, err := static.ReadFile(a.name)
		if err != nil {
			panic(err) // the embedded files are fixed at build time
		}
		sum := sha256.Sum256(body)
		a.body, a.etag = body, `"`+hex.EncodeToString(sum[:8])+`"`
		assets[path] = a
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/widget.js" {
			// Any site may load the script; /ws decides who may talk.
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			// The page holds the Approve button: no other site may frame
			// it (clickjacking); X-Frame-Options for older browsers.
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "SAMEORIGIN")
		}
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}
