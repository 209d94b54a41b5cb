package main

// Reloading without a restart (docs/operating.md, "Reloading guides and
// config"). The guides are read again when their files change and on
// SIGHUP; SIGHUP also reads config.yaml (and the environment and --set
// flags, as at start-up) again and puts in force what can change while
// connections stay open. A reload is Caddy's: every part that changes is
// built and checked first (prepare), and only if all of them are good is
// any put in force (apply); a bad configuration changes nothing and says
// why. Keys that need a restart are named in a warning.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools/mcp"
)

// A reloadHook takes its part of a new configuration. Handed the running
// configuration and the new one (valid, as Load checks it), it builds and
// checks what it needs without changing anything, and returns the
// function that puts it in force (nil: nothing to do for it); an error
// leaves the whole configuration as it was. apply runs only once every
// hook has prepared, in the order the hooks were added, and must not fail.
type reloadHook func(old, next config.Config) (apply func(), err error)

// sessionsReloader is what a reload changes in the sessions: the
// providers the next model calls go to, the limits, and the prices and
// budgets (sessions.Manager).
type sessionsReloader interface {
	SetProviders(byName map[string]*providers.Resilient, def string)
	SetLimits(sessions.Limits)
	SetSpending(*sessions.Spending)
}

// reloader reloads a running gateway's guides and configuration. Reloads
// run one at a time (mu): a SIGHUP during a guides reload waits for it.
type reloader struct {
	file    string
	sets    []string
	environ []string
	log     *slog.Logger
	catalog *guides.Catalog
	tb      *toolbox
	mgr     sessionsReloader
	parts   *health.Registry
	mets    *metrics.Metrics
	count   func(what, result string)
	// configPart and guidesPart show the last reload's failure on /readyz
	// (degraded, never required: the gateway runs on what it had).
	configPart, guidesPart *health.Reporter

	mu  sync.Mutex
	ctx context.Context // the gateway's: what a reload starts runs under it
	cfg config.Config
	// provs are the providers in force, by name (cfg.Providers has the
	// settings each was built from).
	provs  map[string]*providers.Resilient
	hooks  []reloadHook
	owned  []string // key prefixes the hooks reload
	guideD string   // guides.default, which a reload never retires
}

// newReloader is the reloader of a gateway started with cfg (from file,
// sets and environ) whose providers are provs.
func newReloader(file string, sets, environ []string, cfg config.Config, catalog *guides.Catalog, tb *toolbox,
	mgr sessionsReloader, provs map[string]*providers.Resilient, parts *health.Registry, mets *metrics.Metrics, log *slog.Logger) *reloader {
	r := &reloader{
		file: file, sets: sets, environ: environ, log: log, catalog: catalog, tb: tb,
		mgr: mgr, parts: parts, mets: mets,
		count:      mets.ReloadCounter(),
		configPart: parts.Add("config", "reload", false),
		guidesPart: parts.Add("guides", "reload", false),
		cfg:        cfg, provs: provs, guideD: cfg.Guides.Default,
	}
	r.configPart.Up()
	r.guidesPart.Up()
	r.handle(sessionLimits(mgr))
	r.handle(spending(mgr))
	return r
}

// handle adds a hook for the keys under prefixes ("providers",
// "listeners.slack.approvers"): they reload, and a change to them is not
// reported as needing a restart.
func (r *reloader) handle(prefixes []string, hook reloadHook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned = append(r.owned, prefixes...)
	r.hooks = append(r.hooks, hook)
}

// needs is what the guides may name: the providers given, the tools and
// the MCP servers given (groups).
func (r *reloader) needs(provs map[string]*providers.Resilient, groups []string) guides.Needs {
	return guides.Needs{Providers: slices.Sorted(maps.Keys(provs)), Tools: r.tb.registry.Names(), Groups: groups}
}

// reloadGuides reads the guides again (reload.go's caller: their files
// changed, or SIGHUP). Each good guide is in force for the next turns; a
// broken one keeps its running version, with an ERROR naming its file and
// line.
func (r *reloader) reloadGuides() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloadGuidesLocked()
}

func (r *reloader) reloadGuidesLocked() {
	res, err := r.catalog.Reload(r.guideD, r.needs(r.provs, r.tb.groups()).Check)
	if err != nil {
		r.count("guides", "error")
		r.log.Error("guides not reloaded: the folder cannot be read; the guides in force run on", "dir", r.catalog.Dir(), "err", err,
			"fix", "make guides.dir readable again; a change of guides.dir itself needs a restart")
		r.guidesPart.Degraded(err.Error(), "make guides.dir readable again")
		return
	}
	if res.Any() {
		r.log.Info("guides reloaded: new turns use them", "added", res.Added, "changed", res.Changed, "removed", res.Removed)
	}
	if len(res.Removed) > 0 {
		r.log.Warn("guides deleted: no longer offered; conversations using them keep their last version until a restart, then take guides.default",
			"removed", res.Removed)
	}
	if len(res.Problems) == 0 {
		r.count("guides", "ok")
		r.guidesPart.Up()
		return
	}
	r.count("guides", "error")
	for _, p := range res.Problems {
		r.log.Error("guide not reloaded: its version in force runs on", "err", p,
			"fix", "correct the file at the line named (gateway doctor shows the same); it is read again when saved")
	}
	r.guidesPart.Degraded(errors.Join(res.Problems...).Error(), "correct the files at the lines named; they are read again when saved")
}

// reloadAll is SIGHUP's: config.yaml, then the guides (against the
// providers now in force).
func (r *reloader) reloadAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloadConfigLocked()
	r.reloadGuidesLocked()
}

// reloadConfigLocked reads the configuration again and puts in force
// what changed, all of it or, if anything is wrong, none of it.
func (r *reloader) reloadConfigLocked() {
	next, err := config.Load(r.file, r.sets, r.environ)
	if err != nil {
		r.configFailed(err)
		return
	}
	old := r.cfg
	changed := changedKeys(old, next)
	if len(changed) == 0 {
		r.count("config", "ok")
		r.configPart.Up()
		r.log.Info("config reloaded: nothing changed", "file", r.file)
		return
	}
	// Prepare every part; apply none unless all are good.
	provs, applyProviders, err := r.prepareProviders(old, next)
	if err != nil {
		r.configFailed(err)
		return
	}
	var groups []string
	for _, s := range next.Tools.MCP {
		groups = append(groups, s.Name)
	}
	n := r.needs(provs, groups)
	if err := r.catalog.Check(n.Providers, n.Tools, n.Groups); err != nil {
		r.configFailed(fmt.Errorf("the guides would name what the new configuration lacks: %w", err))
		return
	}
	applyMCP, err := r.prepareMCP(old, next)
	if err != nil {
		r.configFailed(err)
		return
	}
	applies := []func(){applyProviders, applyMCP}
	for _, hook := range r.hooks {
		apply, err := hook(old, next)
		if err != nil {
			r.configFailed(err)
			return
		}
		if apply != nil {
			applies = append(applies, apply)
		}
	}
	for _, apply := range applies {
		apply()
	}
	r.cfg, r.provs = next, provs
	var reloaded, restart []string
	for _, key := range changed {
		if r.reloads(key) {
			reloaded = append(reloaded, key)
		} else {
			restart = append(restart, key)
		}
	}
	r.count("config", "ok")
	r.configPart.Up()
	r.log.Info("config reloaded", "file", r.file, "applied", strings.Join(collapse(reloaded), ", "))
	if len(restart) > 0 {
		r.log.Warn("config keys changed, take effect after a restart: "+strings.Join(collapse(restart), ", "), "file", r.file)
	}
}

// configFailed says why a configuration was not taken: the running one
// is unchanged.
func (r *reloader) configFailed(err error) {
	r.count("config", "error")
	r.log.Error("config not reloaded: the running configuration is unchanged", "file", r.file, "err", err,
		"fix", "correct what is named (gateway doctor checks the file) and send SIGHUP again")
	r.configPart.Degraded("the last reload failed: "+err.Error(), "correct "+r.file+" and send SIGHUP again; the gateway runs on its previous configuration")
}

// reloadable are the keys reload.go puts in force itself (the hooks add
// theirs with handle).
var reloadable = []string{"providers", "tools.mcp"}

// reloads reports whether a changed key is put in force by a reload.
func (r *reloader) reloads(key string) bool {
	for _, p := range append(slices.Clone(reloadable), r.owned...) {
		if key == p || strings.HasPrefix(key, p+".") || strings.HasPrefix(key, p+"[") {
			return true
		}
	}
	return false
}

// prepareProviders builds the providers of next: a provider whose
// settings did not change is kept as it is (its connections and its
// circuit breaker's state), the others are built new. apply swaps them
// in for the next model calls and drops the health of those gone.
func (r *reloader) prepareProviders(old, next config.Config) (map[string]*providers.Resilient, func(), error) {
	built, def, err := buildProviders(next, r.environ, r.log)
	if err != nil {
		return nil, nil, err
	}
	before := map[string]config.Provider{}
	for _, pc := range old.Providers {
		before[pc.Name] = pc
	}
	var fresh []*providers.Resilient
	for _, pc := range next.Providers {
		if prev, ok := before[pc.Name]; ok && reflect.DeepEqual(prev, pc) && r.provs[pc.Name] != nil {
			built[pc.Name] = r.provs[pc.Name]
			continue
		}
		fresh = append(fresh, built[pc.Name])
	}
	if len(next.Providers) == 0 && len(old.Providers) == 0 {
		built[def] = r.provs[def] // the demo model alone, as it was
	}
	apply := func() {
		for _, p := range fresh {
			superviseProvider(p, r.parts, r.mets)
		}
		for name := range r.provs {
			if _, ok := built[name]; !ok {
				r.parts.Remove("provider " + name)
			}
		}
		r.mgr.SetProviders(built, def)
	}
	return built, apply, nil
}

// prepareMCP makes the MCP servers tools.mcp adds or changes (their
// ${VAR}s resolved, nothing started); apply starts them, stops those
// removed or replaced, and takes their tools out of the registry. Servers
// whose settings are the same run on, connections and all.
func (r *reloader) prepareMCP(old, next config.Config) (func(), error) {
	if reflect.DeepEqual(old.Tools.MCP, next.Tools.MCP) {
		return func() {}, nil
	}
	tb, servers := r.tb, mcpServers(next.Tools.MCP)
	if m := tb.mcpManager(); m != nil {
		apply, err := m.Prepare(servers, r.environ)
		if err != nil {
			return nil, err
		}
		return func() {
			ch := apply()
			for _, name := range append(ch.Removed, ch.Replaced...) {
				_ = tb.registry.SetGroup(name, nil) // its tools, until the new version lists them
			}
			tb.syncMCP(m)
			r.log.Info("mcp servers reloaded", "added", ch.Added, "removed", ch.Removed, "replaced", ch.Replaced)
		}, nil
	}
	// The first servers: a manager of their own, started as at start-up.
	m, err := mcp.New(servers, r.environ, r.log)
	if err != nil {
		return nil, err
	}
	return func() {
		tb.mcpMu.Lock()
		tb.mcp = m
		tb.mcpMu.Unlock()
		go tb.startMCP(r.ctx, m)
		go followMCP(r.ctx, m, r.parts)
		r.log.Info("mcp servers reloaded", "added", m.Servers())
	}, nil
}

// changedKeys are the configuration's keys whose values differ between a
// and b, dotted as in config.yaml, list entries by index
// ("providers[0].model"), sorted.
func changedKeys(a, b config.Config) []string {
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", reflect.ValueOf(a), fa)
	flatten("", reflect.ValueOf(b), fb)
	var out []string
	for k, v := range fa {
		if w, ok := fb[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// flatten writes v's leaves under their keys. A list's length is a key of
// its own ("providers.len"), so a list emptied is a change too.
func flatten(key string, v reflect.Value, out map[string]string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			tag := v.Type().Field(i).Tag.Get("koanf")
			if tag == "" {
				continue
			}
			flatten(join(key, tag), v.Field(i), out)
		}
	case reflect.Slice:
		out[key+".len"] = fmt.Sprint(v.Len())
		for i := range v.Len() {
			flatten(fmt.Sprintf("%s[%d]", key, i), v.Index(i), out)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			flatten(join(key, fmt.Sprint(k.Interface())), v.MapIndex(k), out)
		}
	default:
		out[key] = fmt.Sprint(v.Interface())
	}
}

func join(key, field string) string {
	if key == "" {
		return field
	}
	return key + "." + field
}

// collapse names each changed list by its key ("providers" for
// "providers[0].model" and "providers.len"), once.
func collapse(keys []string) []string {
	var out []string
	for _, k := range keys {
		if i := strings.IndexByte(k, '['); i >= 0 {
			k = k[:i]
		}
		k = strings.TrimSuffix(k, ".len")
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// sessionLimits reloads the sessions' limits that apply to what comes
// next: sessions loaded or created, approvals asked for, tools run.
func sessionLimits(m sessionsReloader) ([]string, reloadHook) {
	keys := []string{"sessions.max_live", "sessions.new_per_minute", "sessions.approval_timeout", "sessions.tool_timeout"}
	return keys, func(old, next config.Config) (func(), error) {
		s := next.Sessions
		return func() {
			m.SetLimits(sessions.Limits{MaxLive: s.MaxLive, NewPerMinute: s.NewPerMinute,
				ApprovalTimeout: time.Duration(s.ApprovalTimeout), ToolTimeout: time.Duration(s.ToolTimeout)})
		}, nil
	}
}

// spending reloads the prices and budgets (usage.go), in force from the
// next turn's charge and the next budget check; what turns were charged
// before keeps the price it was given.
func spending(m sessionsReloader) ([]string, reloadHook) {
	return []string{"pricing", "budgets"}, func(old, next config.Config) (func(), error) {
		sp := spendingOf(next)
		return func() { m.SetSpending(sp) }, nil
	}
}

// listenerAccess reloads the allow lists and approvers of the Slack and
// Discord listeners that run (nil: not enabled).
func listenerAccess(sl *slack.Listener, dl *discord.Listener) ([]string, reloadHook) {
	keys := []string{
		"listeners.slack.allowed_channels", "listeners.slack.allowed_users", "listeners.slack.approvers",
		"listeners.discord.allowed_guilds", "listeners.discord.allowed_channels", "listeners.discord.approvers",
	}
	return keys, func(old, next config.Config) (func(), error) {
		return func() {
			if sl != nil {
				s := next.Listeners.Slack
				sl.SetAccess(slack.Access{AllowedChannels: s.AllowedChannels, AllowedUsers: s.AllowedUsers, Approvers: s.Approvers})
			}
			if dl != nil {
				d := next.Listeners.Discord
				dl.SetAccess(discord.Access{AllowedGuilds: d.AllowedGuilds, AllowedChannels: d.AllowedChannels, Approvers: d.Approvers})
			}
		}, nil
	}
}

// follow reloads everything on each signal hup brings (SIGHUP), and the
// guides when their files change, until ctx ends. A folder that cannot be
// watched is said once: SIGHUP still reloads it.
func (r *reloader) follow(ctx context.Context, hup <-chan os.Signal) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	if err := guides.Watch(ctx, r.catalog.Dir(), 0, r.reloadGuides, func(err error) {
		r.log.Warn("guides: watching their folder", "err", err)
	}); err != nil {
		r.log.Warn("the guides' folder is not watched: edits take effect on SIGHUP", "err", err)
	}
	go func() {
		for {
			select {
			case <-hup:
				r.log.Info("SIGHUP: reloading config.yaml and the guides", "file", r.file)
				r.reloadAll()
			case <-ctx.Done():
				return
			}
		}
	}()
}
