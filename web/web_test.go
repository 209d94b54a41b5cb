package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/web"
)

func get(t *testing.T, h http.Handler, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesTheDemoPageAndWidget(t *testing.T) {
	h := web.Handler()
	for _, c := range []struct {
		path, ctype, contains string
	}{
		{"/", "text/html", `<script src="/widget.js"`},
		{"/widget.js", "text/javascript", `customElements.define("switchboard-chat"`},
	} {
		resp := get(t, h, c.path, nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(body), c.contains) {
			t.Errorf("GET %s = %d %s, want %s containing %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.ctype, c.contains)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: ETag %q, Cache-Control %q; want revalidation with an ETag", c.path, etag, resp.Header.Get("Cache-Control"))
			continue
		}
		if again := get(t, h, c.path, http.Header{"If-None-Match": {etag}}); again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag = %d, want 304", c.path, again.StatusCode)
		}
	}
	if resp := get(t, h, "/widget.js", nil); resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Error("widget.js must be loadable from any site")
	}
	for _, path := range []string{"/nope", "/static/widget.js", "/web.go", "/../go.mod"} {
		if resp := get(t, h, path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, resp.StatusCode)
		}
	}
}

// Everything is served by the gateway: no CDN, no web fonts, no address
// of another host in the page or the script.
func TestNothingIsLoadedFromElsewhere(t *testing.T) {
	h := web.Handler()
	url := regexp.MustCompile(`(?i)(https?://|["'(]//)[a-z0-9.-]+\.[a-z]{2,}`)
	for _, path := range []string{"/", "/widget.js"} {
		body, _ := io.ReadAll(get(t, h, path, nil).Body)
		for _, m := range url.FindAllString(string(body), -1) {
			// The embed snippet shown to readers names a placeholder host;
			// SVG's namespace is a name, never fetched.
			if strings.Contains(m, "YOUR-GATEWAY") || strings.HasSuffix(m, "example.com") || m == "http://www.w3.org" {
				continue
			}
			t.Errorf("%s refers to another host: %s", path, m)
		}
		if strings.Contains(string(body), "@import") || strings.Contains(string(body), "@font-face") {
			t.Errorf("%s loads styles or fonts", path)
		}
	}
}

// The demo page holds the Approve button: other sites may not frame it.
// Its images come from itself, data: and the configured image hosts only.
func TestDemoPageHeaders(t *testing.T) {
	resp := get(t, web.HandlerWith(web.Options{ImageHosts: []string{"images.example.com"}}), "/", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'self'", "img-src 'self' data: images.example.com;"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "https:;") || strings.Contains(csp, "img-src *") {
		t.Errorf("CSP %q allows images from anywhere", csp)
	}
	if xfo := resp.Header.Get("X-Frame-Options"); xfo != "SAMEORIGIN" {
		t.Errorf("X-Frame-Options %q, want SAMEORIGIN", xfo)
	}
}
