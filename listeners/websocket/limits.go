package websocket

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// invitesPerMinute bounds the invite codes one address may try a minute.
// A code is 128 random bits, so guessing is hopeless anyway; the bound
// keeps a scripted guesser from costing the store a lookup per frame, and
// is far above what a person opening links needs. Manager.Join bounds
// each person as well, so where every client has a proxy's address
// (new_sessions_per_ip: -1) this bound is lifted with that one.
const invitesPerMinute = 10

// perIP bounds what one client address may hold and start: open
// connections, new sessions a minute, and invite codes tried a minute.
// Behind a reverse proxy every client shares the proxy's address, so
// raise the bounds there (or set them to -1) and let the proxy limit.
type perIP struct {
	maxConns   int // < 0: no bound
	newPerMin  int // < 0: no bound
	mu         sync.Mutex
	conns      map[string]int
	newSession map[string]*rate.Limiter
	invites    map[string]*rate.Limiter
}

func newPerIP(maxConns, newPerMin int) *perIP {
	return &perIP{maxConns: maxConns, newPerMin: newPerMin, conns: map[string]int{},
		newSession: map[string]*rate.Limiter{}, invites: map[string]*rate.Limiter{}}
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
	return p.allow(p.newSession, ip, p.newPerMin)
}

// mayTryInvite spends one of ip's invite tries.
func (p *perIP) mayTryInvite(ip string) bool {
	if p.newPerMin < 0 {
		return true
	}
	return p.allow(p.invites, ip, invitesPerMinute)
}

// allow spends a token of ip's limiter in limiters, perMin a minute with
// a burst of as many.
func (p *perIP) allow(limiters map[string]*rate.Limiter, ip string, perMin int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := limiters[ip]
	if l == nil {
		if len(limiters) >= 10_000 {
			clear(limiters) // bounded memory; forgetting grants a fresh allowance
		}
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(max(perMin, 1))), perMin)
		limiters[ip] = l
	}
	return l.Allow()
}
