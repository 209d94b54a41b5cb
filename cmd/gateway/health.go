package main

// Health: what each listener, provider and MCP server, and on PostgreSQL
// the database, says of itself, on GET /readyz, on
// switchboard_component_up, and through `gateway status`. /healthz stays a
// liveness check (the process answers); /readyz says whether the gateway
// can do its job: it is not ready while a configured listener is down or
// still connecting, nor while a replica cannot renew its leases (its
// conversations move to the others). A provider or an MCP server that is
// down degrades the gateway without making it unready: the guides that
// use it fail over or tell their users, the others go on.

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-gw/switchboard/cluster"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/storage/postgres"
	"github.com/switchboard-gw/switchboard/tools/mcp"
)

// newHealth is the registry of the gateway's parts; every change is set
// on switchboard_component_up.
func newHealth(mets *metrics.Metrics) *health.Registry {
	return health.New(func(s health.Status) {
		if s.State == health.Removed {
			mets.RemoveComponent(s.Name, s.Kind)
			return
		}
		v := 0.0
		switch s.State {
		case health.Up:
			v = 1
		case health.Degraded:
			v = 0.5
		}
		mets.Component(s.Name, s.Kind, v)
	})
}

// superviseProvider gives a provider its circuit breaker, reported on
// /readyz and the metrics. One breaker per provider, shared by every copy
// a guide's fallback makes of it (sessions.provider), so failures count
// across turns.
func superviseProvider(p *providers.Resilient, parts *health.Registry, mets *metrics.Metrics) {
	rep := parts.Add("provider "+p.Name, "provider", false)
	p.Circuit = providers.NewCircuit(p.Name, func(name string, open bool) {
		mets.ProviderCircuit(name, open)
		if open {
			rep.Down("its circuit breaker is open: its last calls failed, so turns skip it (to the guide's fallback, if any) until a trial call succeeds",
				"the provider's ERROR lines in the log say why; gateway doctor checks its key and model")
			return
		}
		rep.Up()
	})
}

// readiness is GET /readyz's answer.
type readiness struct {
	Ready bool            `json:"ready"`
	Parts []health.Status `json:"components"`
}

// readyz answers GET /readyz: 200 with every part's status when the
// gateway is ready, 503 with the same when not. Reasons and fixes (which
// name the configuration's variables and keys) go only to a client on this
// machine, as /metrics does: a probe from elsewhere (a load balancer) gets
// each part's state.
func readyz(reg *health.Registry) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		parts := reg.Snapshot()
		body := readiness{Ready: health.Ready(parts), Parts: parts}
		if host, _, _ := net.SplitHostPort(r.RemoteAddr); !isLoopbackHost(host) {
			for i := range body.Parts {
				body.Parts[i].Reason, body.Parts[i].Fix = "", ""
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !body.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	}
}

// replicasEvery is how often, at most, a scrape asks the database how
// many replicas are live.
const replicasEvery = 5 * time.Second

// watchedCluster is a replica's cluster reporting what it sees: to
// /readyz as the part "database" (kind storage, required: up once the
// store is open, down while the leases cannot be renewed, with why and the
// fix), and to the metrics (the takeovers and losses it counts, the leases
// it holds, the replicas live).
func watchedCluster(cfg cluster.Config, pg *postgres.DB, mets *metrics.Metrics, parts *health.Registry) *cluster.Cluster {
	db := parts.Add("database", "storage", true)
	db.Up() // reached and migrated as the store opened
	cfg.Down, cfg.Up = db.Down, db.Up
	cfg.Metrics = mets
	c := cluster.New(cfg)
	mets.Cluster(replicasEvery, func(ctx context.Context) (int, error) {
		rs, err := pg.Replicas(ctx, cluster.LiveWithin(cfg.Lease))
		return len(rs), err
	}, c.Held)
	return c
}

// followMCP reports each MCP server's state as it changes, until ctx
// ends: a server that keeps failing is down, with its last error.
func followMCP(ctx context.Context, m *mcp.Manager, reg *health.Registry) {
	reporters := map[string]*health.Reporter{}
	for {
		watch := m.Watch()
		// A reload may add and remove servers (reload.go).
		names := m.Servers()
		for _, name := range names {
			if reporters[name] == nil {
				reporters[name] = reg.Add("mcp "+name, "mcp", false)
			}
		}
		for name := range reporters {
			if !slices.Contains(names, name) {
				reg.Remove("mcp " + name)
				delete(reporters, name)
			}
		}
		for _, st := range m.Status() {
			p := reporters[st.Name]
			switch st.State {
			case mcp.StateRunning:
				p.Up()
			case mcp.StateRestarting:
				p.Down(st.LastError, "it is started again with backoff; `gateway doctor` checks it and says why it stops")
			case mcp.StateStopped:
				p.Down("stopped", "")
			}
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return
		}
	}
}

// probeFlags are the flags of the commands that ask a running gateway
// (healthcheck, status): where it is, from its configuration or a URL.
type probeFlags struct {
	url, config *string
	sets        stringList
	timeout     *time.Duration
}

func addProbeFlags(fs *flag.FlagSet, path string) *probeFlags {
	p := &probeFlags{
		url:     fs.String("url", "", "the URL to GET (default: "+path+" on the config's http.addr, reached over loopback)"),
		config:  fs.String("config", "config.yaml", "configuration file (YAML), as for the gateway"),
		timeout: fs.Duration("timeout", 5*time.Second, "how long to wait for the answer"),
	}
	fs.Var(&p.sets, "set", "override a config key, as for the gateway (repeatable)")
	return p
}

// get GETs path of the gateway the flags name, over loopback, and returns
// the status and up to 64 KiB of the body.
func (p *probeFlags) get(ctx context.Context, path string, environ []string) (target string, status int, body []byte, err error) {
	target = *p.url
	if target == "" {
		cfg, err := config.Load(*p.config, p.sets, environ)
		if err != nil {
			return "", 0, nil, err
		}
		host, port, err := net.SplitHostPort(cfg.HTTP.Addr)
		if err != nil || port == "0" {
			return "", 0, nil, fmt.Errorf("http.addr %q has no fixed port: pass --url", cfg.HTTP.Addr)
		}
		target = "http://" + net.JoinHostPort(probeHost(host), port) + path
	}
	ctx, cancel := context.WithTimeout(ctx, *p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return target, 0, nil, err
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return target, 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return target, resp.StatusCode, body, err
}

// runStatus is `gateway status`: what each part of a running gateway says
// of itself (GET /readyz), one line each, with the reason and the fix for
// those that are not up. It exits non-zero when the gateway is not ready.
func runStatus(ctx context.Context, args []string, out, errOut io.Writer, environ []string) error {
	fs := flag.NewFlagSet("gateway status", flag.ContinueOnError)
	fs.SetOutput(errOut)
	p := addProbeFlags(fs, "/readyz")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gateway status [--config FILE] [--set key=value]... [--url URL] [--timeout 5s]")
		fmt.Fprintln(fs.Output(), "Shows what each listener, provider and MCP server of the running gateway says of itself (GET /readyz); exits 1 when it is not ready.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("status: unexpected argument %q", fs.Arg(0))
	}
	target, code, body, err := p.get(ctx, "/readyz", environ)
	if err != nil {
		return fmt.Errorf("status: no gateway answers at %s: %w", cmp.Or(target, "its http.addr"), err)
	}
	var r readiness
	if err := json.Unmarshal(body, &r); err != nil || (code != http.StatusOK && code != http.StatusServiceUnavailable) {
		return fmt.Errorf("status: GET %s: HTTP %d: %q", target, code, providers.Truncate(strings.TrimSpace(string(body)), 200))
	}
	verdict := "ready"
	if !r.Ready {
		verdict = "NOT READY"
	}
	fmt.Fprintf(out, "%s: %s\n", target, verdict)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	var down []string
	for _, s := range r.Parts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\tsince %s\n", s.Kind, s.Name, s.State, s.Since.Local().Format("2006-01-02 15:04:05"))
		if s.Reason != "" {
			fmt.Fprintf(tw, "\t\t\t%s\n", s.Reason)
		}
		if s.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", s.Fix)
		}
		if s.Required && s.State != health.Up && s.State != health.Degraded {
			down = append(down, s.Name+" is "+string(s.State))
		}
	}
	_ = tw.Flush()
	if !r.Ready {
		return fmt.Errorf("status: not ready: %s", strings.Join(down, ", "))
	}
	return nil
}
