package discordtest

import (
	"net/http"
	"net/url"
	"strings"
)

// Client is an HTTP client for a discordgo session that sends every
// request to this server, whatever URL discordgo built it for: use it as
// the session's Client.
//
// discordgo keeps its REST endpoints in package variables, computed at init
// from https://discord.com/api/v9/: the client sends them to this server's
// /api/v10/, the version the server models (as a listener's api_url does).
// Nothing
// process-wide is touched, so a session left over from one test can never
// reach another test's server. The Gateway URL comes from GET /gateway,
// so the WebSocket reaches this server too. discordgo puts its package
// variable APIVersion ("9" unless a program sets it) in the Gateway URL;
// a program sets it once, before its first session (the listener does).
func (s *Server) Client() *http.Client {
	u, _ := url.Parse(s.http.URL)
	return &http.Client{Transport: &toServer{host: u.Host, next: http.DefaultTransport}}
}

// toServer sends every request to host over plain HTTP, v9 paths to v10.
type toServer struct {
	host string
	next http.RoundTripper
}

func (t *toServer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper leaves its request as it was
	req.URL.Scheme, req.URL.Host, req.Host = "http", t.host, t.host
	if rest, ok := strings.CutPrefix(req.URL.Path, "/api/v9/"); ok {
		req.URL.Path = "/api/v10/" + rest
		if raw, ok := strings.CutPrefix(req.URL.RawPath, "/api/v9/"); ok {
			req.URL.RawPath = "/api/v10/" + raw
		}
	}
	return t.next.RoundTrip(req)
}
