package websocket

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// perIP bounds what one client address may hold and start: open
// connections, and new sessions a minute. Behind a reverse proxy every
// client shares the proxy's address, so raise the bounds there (or set
// them to -1) and let the proxy limit.
type perIP struct {
	maxConns   int // < 0: no bound
	newPerMin  int // < 0: no bound
	mu         sync.Mutex
	conns      map[string]int
	newSession map[string]*rate.Limiter
}

func newPerIP(maxConns, newPerMin int) *perIP {
	return &perIP{maxConns: maxConns, newPerMin: newPerMin, conns: map[string]int{}, newSession: map[string]*rate.Limiter{}}
}

// remoteIP is the address a request came from, without its port.
func remoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// connect counts a connection from ip in, unless ip holds as many as it
// may; done counts it out.
func (p *perIP) connect(ip string) (done func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxConns >= 0 && p.conns[ip] >= p.maxConns {
		return nil, false
	}
	p.conns[ip]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.conns[ip]--; p.conns[ip] <= 0 {
			delete(p.conns, ip)
		}
	}, true
}

// mayStartSession spends one of ip's new-session tokens.
func (p *perIP) mayStartSession(ip string) bool {
	if p.newPerMin < 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.newSession[ip]
	if l == nil {
		if len(p.newSession) >= 10_000 {
			clear(p.newSession) // bounded memory; forgetting grants a fresh allowance
		}
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(max(p.newPerMin, 1))), p.newPerMin)
		p.newSession[ip] = l
	}
	return l.Allow()
}
