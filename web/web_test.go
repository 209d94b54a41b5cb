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
	// The widget asks HEAD /widget.js, with CORS, whether its gateway is up
	// (to tell a refused origin from a gateway that is down).
	head := httptest.NewRecorder()
	h.ServeHTTP(head, httptest.NewRequest("HEAD", "/widget.js", nil))
	if head.Code != http.StatusOK || head.Header().Get("Access-Control-Allow-Origin") != "*" || head.Body.Len() != 0 {
		t.Errorf("HEAD /widget.js = %d, Access-Control-Allow-Origin %q, %d bytes; want 200, *, none",
			head.Code, head.Header().Get("Access-Control-Allow-Origin"), head.Body.Len())
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
	for _, path := range []string{"/", "/widget.js", "/s/4hqzk2m7a5bcdefghijklmnopq"} {
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

// An invite link is the demo page with the widget set to join with its
// code. The code is a secret: no cache keeps the page, and no request it
// makes tells another site its address.
func TestInviteLinkPage(t *testing.T) {
	const code = "4hqzk2m7a5bcdefghijklmnopq"
	h := web.HandlerWith(web.Options{ImageHosts: []string{"images.example.com"}})
	resp := get(t, h, "/s/"+code, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /s/<code> = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	tags := regexp.MustCompile(`<script[^>]*>`).FindAllString(string(body), -1)
	if len(tags) != 1 || !strings.Contains(tags[0], `src="/widget.js"`) || !strings.Contains(tags[0], ` data-invite="`+code+`"`) || !strings.Contains(tags[0], " data-open") {
		t.Fatalf("the page's script tags %q: want the widget, open, with data-invite=%q", tags, code)
	}
	if !strings.Contains(string(body), "You were invited to a conversation.") {
		t.Error("the page does not say what it is")
	}
	for k, want := range map[string]string{
		"Cache-Control":          "no-store",
		"Referrer-Policy":        "no-referrer",
		"X-Frame-Options":        "SAMEORIGIN",
		"X-Content-Type-Options": "nosniff",
		"X-Robots-Tag":           "noindex",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'self'") || !strings.Contains(csp, "img-src 'self' data: images.example.com;") {
		t.Errorf("CSP %q, want the demo page's", csp)
	}
	if resp.Header.Get("ETag") != "" {
		t.Error("an ETag invites caching of a page that must not be kept")
	}
	// The demo page itself has no invite.
	if demo, _ := io.ReadAll(get(t, h, "/", nil).Body); strings.Contains(string(demo), "data-invite") || strings.Contains(string(demo), "You were invited") {
		t.Error("the demo page carries an invite")
	}

	// Only a well-formed code is a page: anything else is not found, and
	// never written into the page.
	for _, path := range []string{
		"/s/", "/s", "/s/" + code[:25], "/s/" + code + "a", "/s/" + strings.ToUpper(code), "/s/" + code + "/",
		"/s/" + code[:25] + "1", "/s/" + code[:25] + "8", "/s/" + code[:20] + `"><b>x`, "/s/" + code + "/x", "/s/x/" + code,
	} {
		if resp := get(t, h, path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, resp.StatusCode)
		}
	}
	req := httptest.NewRequest("POST", "/s/"+code, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /s/<code> = %d, want 405", rec.Code)
	}
}

// The link page answers for the gateway's own names only, like every page
// behind HostGuard (DNS rebinding).
func TestInviteLinkBehindTheHostGuard(t *testing.T) {
	h := web.HostGuard("https://chat.example.com", web.Handler())
	for host, want := range map[string]int{
		"127.0.0.1:8080":               http.StatusOK,
		"localhost":                    http.StatusOK,
		"chat.example.com":             http.StatusOK,
		"rebind.attacker.example:8080": http.StatusMisdirectedRequest,
		"127.0.0.1.attacker.example":   http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest("GET", "/s/4hqzk2m7a5bcdefghijklmnopq", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("GET /s/<code> with Host %s = %d, want %d", host, rec.Code, want)
		}
	}
}
