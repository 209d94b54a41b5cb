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
	"regexp"
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
//
// It also serves the invite links /share makes, /s/<code>: the demo page
// with the widget open and set to join with that code. The page only
// carries the code; the widget's hello redeems it, so a link preview or a
// crawler that fetches the page spends nothing.
func Handler() http.Handler { return HandlerWith(Options{}) }

// InvitePrefix is the path of invite links: InvitePrefix + code.
const InvitePrefix = "/s/"

// inviteCode is a well-formed invite code: 128 bits in lower-case base32
// without padding (sessions.newInviteCode).
var inviteCode = regexp.MustCompile(`^[a-z2-7]{26}$`)

// The demo page's widget tag, which the link page gives the code.
const (
	widgetTag     = `<script src="/widget.js" data-title="Switchboard demo" data-open></script>`
	invitedMarker = `<p class="lead">An open-source multi-channel AI chat gateway.</p>`
	invitedNote   = invitedMarker + "\n  <p><strong>You were invited to a conversation.</strong> It is open in the chat,\n  with everything said so far.</p>"
)

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
	invitePage := invitePage(assets["/"].body)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, ok := strings.CutPrefix(r.URL.Path, InvitePrefix); ok {
			serveInvite(w, r, code, csp, invitePage)
			return
		}
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
			// The widget also asks for it (HEAD, with CORS) to tell a
			// gateway that refuses its page's origin from one that is
			// down: only the gateway itself answers with this header.
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

// invitePage splits the demo page around its widget's attributes, for
// the link page to put the code in between.
func invitePage(demo []byte) [2][]byte {
	page := string(demo)
	if !strings.Contains(page, widgetTag) || !strings.Contains(page, invitedMarker) {
		panic("web: the demo page lacks its widget tag or lead") // fixed at build time, and tested
	}
	page = strings.Replace(page, invitedMarker, invitedNote, 1)
	before, after, _ := strings.Cut(page, widgetTag)
	return [2][]byte{
		[]byte(before + `<script src="/widget.js" data-title="Switchboard demo" data-invite="`),
		[]byte(`" data-open></script>` + after),
	}
}

// serveInvite serves the link page of an invite code. The code is a
// secret: the page is not stored by caches, and neither it nor what it
// loads tells other sites its address (Referrer-Policy).
func serveInvite(w http.ResponseWriter, r *http.Request, code, csp string, page [2][]byte) {
	if !inviteCode.MatchString(code) { // also keeps anything but the code out of the page
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Robots-Tag", "noindex")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "SAMEORIGIN")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(page[0])
	_, _ = w.Write([]byte(code))
	_, _ = w.Write(page[1])
}
