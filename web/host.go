package web

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// HostGuard serves only requests whose Host is a loopback name (localhost,
// 127.0.0.0/8, ::1; any port) or the host of publicURL (the gateway's
// public origin, optional). Anything else is a page on another name that
// now resolves to this machine (DNS rebinding), which would otherwise be
// taken for the gateway's own origin: it gets 421.
//
// The gateway puts it in front of every route when /ws has no
// authentication, and in front of a loopback metrics listener.
func HostGuard(publicURL string, next http.Handler) http.Handler {
	public := ""
	if u, err := url.Parse(publicURL); err == nil && publicURL != "" {
		public = strings.ToLower(u.Hostname())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, public) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = w.Write([]byte("host not served here: this gateway answers for localhost and http.public_url only\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// HostAllowed reports whether a Host header names this gateway: a
// loopback name, or publicHost (a lowercase host name; "" for none).
func HostAllowed(host, publicHost string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" {
		return false
	}
	if name == "localhost" || (publicHost != "" && name == publicHost) {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
