package main

// gateway doctor: the configuration loaded exactly as the gateway loads it,
// then one row per thing a start-up (or the first conversation) depends on,
// each OK, INFO, WARN or PROBLEM with how to fix it. It runs beside a
// gateway that is serving without disturbing it: the database is only read
// (an SQLite file's header, and an immutable read-only open; PostgreSQL
// through read-only transactions, as no replica: doctor_postgres.go), the
// lock is probed without being created, and a port in use is asked
// whether it is a gateway.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/storage/postgres"
	"github.com/switchboard-gw/switchboard/tools/mcp"
	"github.com/switchboard-gw/switchboard/tools/sandbox"
)

// severity orders the outcomes of a check; only PROBLEM fails the run.
type severity int

const (
	sevOK severity = iota
	sevInfo
	sevWarn
	sevProblem
)

func (s severity) String() string {
	return [...]string{"OK", "INFO", "WARN", "PROBLEM"}[s]
}

// checkResult is one row of the table.
type checkResult struct {
	Name   string
	Sev    severity
	Detail string // what was found; may span lines
	Fix    string // what to do about it; empty when there is nothing to do
}

// doctorTimeout bounds each call a check makes (a provider's one-token
// answer, bwrap); a provider's own timeout is used when it is shorter.
const doctorTimeout = 20 * time.Second

type doctor struct {
	cfg     config.Config
	file    string
	environ []string
	timeout time.Duration
	// secrets are never printed: every value a check shows passes scrub.
	secrets []string
	// gatewayPID is the pid holding the database's lock, if any: a
	// gateway is running on this configuration.
	gatewayPID int
	dbHeld     bool
	// On PostgreSQL, the read-only look at the database every row that
	// reads it shares (doctor_postgres.go).
	pgOnce sync.Once
	pg     *postgres.Inspector
	pgErr  error
}

// runDoctor is `gateway doctor [--config F] [--set k=v]... [--timeout D]`.
func runDoctor(ctx context.Context, args []string, out, errOut io.Writer, environ []string) error {
	fs, configFile, setsFlag := commandFlags("doctor", "gateway doctor [--config FILE] [--set key=value]... [--timeout 20s]",
		"Checks the configuration, guides, providers (one real call each), the database, the ports, the listeners, bubblewrap and MCP servers (each started and asked for its tools).", errOut)
	timeout := fs.Duration("timeout", doctorTimeout, "how long one provider call or probe may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("doctor: unexpected argument %q", fs.Arg(0))
	}
	sets := *setsFlag
	fmt.Fprintf(out, "Switchboard gateway %s: doctor\n\n", currentVersion().Version)

	cfg, err := config.Load(*configFile, sets, environ)
	if err != nil {
		res := checkResult{Name: "config", Sev: sevProblem, Detail: err.Error(), Fix: configFix(err)}
		printChecks(out, []checkResult{res})
		return errDoctor(1)
	}
	d := &doctor{cfg: cfg, file: *configFile, environ: environ, timeout: *timeout}
	for _, pc := range cfg.Providers {
		if key, _ := pc.Key(environ); key != "" {
			d.secrets = append(d.secrets, key)
		}
	}
	for _, t := range cfg.Listeners.WebSocket.Auth.Tokens {
		d.secrets = append(d.secrets, t.Secret(environ))
	}
	d.secrets = append(d.secrets, cfg.Listeners.WebSocket.Auth.Secret(environ))
	if config.IsPostgres(cfg.Storage.DSN) {
		d.secrets = append(d.secrets, dsnPassword(cfg.Storage.DSN))
	}

	results := d.run(ctx, sets)
	for i := range results {
		results[i].Detail = d.scrub(results[i].Detail)
		results[i].Fix = d.scrub(results[i].Fix)
	}
	printChecks(out, results)
	problems := 0
	for _, r := range results {
		if r.Sev == sevProblem {
			problems++
		}
	}
	if problems > 0 {
		return errDoctor(problems)
	}
	return nil
}

// errDoctor is what run returns when a check found a problem: main prints
// it and exits with status 1.
func errDoctor(problems int) error {
	if problems == 1 {
		return errors.New("doctor: 1 problem found")
	}
	return fmt.Errorf("doctor: %d problems found", problems)
}

// configFix adds advice to a configuration error where the error alone
// leaves the cause unclear.
func configFix(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "(from "+config.EnvPrefix):
		return "every " + config.EnvPrefix + "* environment variable is read as a config key. Unset it, or, if it holds a secret, " +
			"rename it (e.g. GATEWAY_TOKEN) and name it in the config's *_env key"
	case errors.Is(err, fs.ErrNotExist):
		return "pass the configuration file with --config FILE (config.yaml in the current directory by default)"
	}
	return "fix the key named above, in the file, the " + config.EnvPrefix + "* variable or the --set flag it comes from"
}

func (d *doctor) run(ctx context.Context, sets []string) []checkResult {
	var results []checkResult
	results = append(results, d.checkConfig(sets))

	provs, _, buildErr := buildProviders(d.cfg, d.environ, slog.New(slog.DiscardHandler))
	catalog, guidesResult := d.checkGuides(provs, buildErr)
	results = append(results, guidesResult, d.checkRouting(catalog)) // routing.go

	// Providers answer in parallel; their rows keep the config's order.
	provResults := make([]checkResult, len(d.cfg.Providers))
	var wg sync.WaitGroup
	for i, pc := range d.cfg.Providers {
		wg.Go(func() { provResults[i] = d.checkProvider(ctx, i, pc, catalog) })
	}
	if len(d.cfg.Providers) == 0 {
		provResults = append(provResults, checkResult{Name: "providers", Sev: sevWarn,
			Detail: "no providers are configured: the offline demo model answers",
			Fix:    "add a provider to the config's providers list (see config.yaml)"})
	}

	// MCP servers are started (stdio) or called (HTTP) meanwhile too, and
	// the embedding model is asked for a vector.
	var mcpResults []checkResult
	wg.Go(func() { mcpResults = d.checkMCP(ctx) })
	var embeddings checkResult
	wg.Go(func() { embeddings = d.checkEmbeddings(ctx) })

	// The database's rows come before the ports', which ask them whether
	// a gateway runs on this database.
	var dbRows []checkResult
	if config.IsPostgres(d.cfg.Storage.DSN) {
		defer d.closeInspector()
		dbRows = d.checkPostgres(ctx)
	} else {
		db := d.checkDatabase()
		recall := d.checkRecallIndex(ctx) // after checkDatabase, which finds out whether a gateway holds the file
		dbRows = []checkResult{db, recall}
	}
	httpRes := d.checkPort(ctx, "http.addr", d.cfg.HTTP.Addr, "/healthz")
	var metricsRes checkResult
	if d.cfg.Metrics.Addr == "" {
		metricsRes = checkResult{Name: "metrics.addr", Sev: sevInfo, Detail: "off (empty): no /metrics listener"}
	} else {
		metricsRes = d.checkPort(ctx, "metrics.addr", d.cfg.Metrics.Addr, "/metrics")
	}
	listeners := d.checkListeners(ctx)
	bwrap := d.checkBubblewrap(ctx)
	wg.Wait()

	results = append(results, provResults...)
	results = append(results, embeddings)
	results = append(results, dbRows...)
	results = append(results, httpRes, metricsRes)
	results = append(results, listeners...)
	results = append(results, bwrap)
	results = append(results, mcpResults...)
	results = append(results, d.checkTelemetry(ctx)) // telemetry.go
	return results
}

// scrub replaces every secret the configuration names with [secret].
func (d *doctor) scrub(s string) string {
	for _, v := range d.secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[secret]")
		}
	}
	return providers.RedactText(s)
}

// printChecks writes the table: one row per check, the detail's further
// lines and the fix on rows of their own under it.
func printChecks(out io.Writer, results []checkResult) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	problems, warnings := 0, 0
	for _, r := range results {
		lines := strings.Split(strings.TrimSpace(r.Detail), "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.Sev, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t%s\n", l)
		}
		if r.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", r.Fix)
		}
		switch r.Sev {
		case sevProblem:
			problems++
		case sevWarn:
			warnings++
		}
	}
	tw.Flush()
	fmt.Fprintln(out)
	switch {
	case problems == 0 && warnings == 0:
		fmt.Fprintln(out, "No problems found.")
	case problems == 0:
		fmt.Fprintf(out, "No problems found; %s to look at.\n", plural(warnings, "warning"))
	default:
		fmt.Fprintf(out, "%s, %s.\n", plural(problems, "problem"), plural(warnings, "warning"))
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// ---------------------------------------------------------------------------
// config and guides

func (d *doctor) checkConfig(sets []string) checkResult {
	var env []string
	for _, kv := range d.environ {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix) {
			env = append(env, k) // the name only: a value may be a secret
		}
	}
	slices.Sort(env)
	detail := d.file
	if len(env) > 0 {
		detail += ", with " + strings.Join(env, ", ")
	}
	if len(sets) > 0 {
		detail += fmt.Sprintf(", with %d --set", len(sets))
	}
	return checkResult{Name: "config", Sev: sevOK, Detail: detail}
}

// checkGuides loads the guides and checks them against the providers and
// tools, as start-up does. It returns the catalog (nil when it failed) for
// the providers' checks, which call each model a guide names.
func (d *doctor) checkGuides(provs map[string]*providers.Resilient, buildErr error) (*guides.Catalog, checkResult) {
	res := checkResult{Name: "guides"}
	catalog, err := guides.LoadDir(d.cfg.Guides.Dir)
	if err != nil {
		res.Sev, res.Detail = sevProblem, err.Error()
		res.Fix = "fix the file and line named above; guides.dir is " + absPath(d.cfg.Guides.Dir)
		return nil, res
	}
	// The tools start-up would offer (nothing is started: MCP servers'
	// tools are checked by the server's name only). The servers themselves,
	// an unset ${VAR} of theirs too, are each on a row of their own.
	noMCP := d.cfg
	noMCP.Tools.MCP = nil
	tb, err := buildTools(noMCP, d.environ, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		res.Sev, res.Detail = sevProblem, err.Error()
		return catalog, res
	}
	registry := tb.registry
	providers := slices.Sorted(maps.Keys(provs))
	if buildErr != nil { // the names are still known
		providers = providers[:0]
		for _, p := range d.cfg.Providers {
			providers = append(providers, p.Name)
		}
	}
	var servers []string
	for _, s := range d.cfg.Tools.MCP {
		servers = append(servers, s.Name)
	}
	if err := catalog.Check(providers, registry.Names(), servers); err != nil {
		res.Sev, res.Detail = sevProblem, err.Error()
		res.Fix = "name a provider from the config's providers list and tools the gateway has (" + strings.Join(registry.Names(), ", ") + ")"
		return catalog, res
	}
	if _, ok := catalog.Get(d.cfg.Guides.Default); !ok {
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("guides.default: no guide %q in %s (have: %s)", d.cfg.Guides.Default, d.cfg.Guides.Dir, strings.Join(catalog.Names(), ", "))
		res.Fix = "set guides.default to one of them"
		return catalog, res
	}
	names := catalog.Names()
	res.Sev = sevOK
	res.Detail = fmt.Sprintf("%s in %s (%s); default %s", plural(len(names), "guide"), d.cfg.Guides.Dir, strings.Join(names, ", "), d.cfg.Guides.Default)
	return catalog, res
}

// ---------------------------------------------------------------------------
// providers

// defaultBaseURLs are where each kind goes when base_url is empty, for the
// messages only (the SDKs know them).
var defaultBaseURLs = map[string]string{
	config.KindOpenAI:    "https://api.openai.com/v1",
	config.KindAnthropic: "https://api.anthropic.com",
	config.KindGemini:    "https://generativelanguage.googleapis.com",
	config.KindOllama:    openai.DefaultOllamaBaseURL,
}

// checkProvider makes one real, minimal call (a one-token answer) through
// the adapter the gateway itself builds for the provider, once for each
// model the provider serves: its own and each a guide asks of it.
func (d *doctor) checkProvider(ctx context.Context, i int, pc config.Provider, catalog *guides.Catalog) checkResult {
	res := checkResult{Name: "provider " + pc.Name}
	key, source := pc.Key(d.environ)
	base := cmp.Or(pc.BaseURL, defaultBaseURLs[pc.Kind])
	if u, err := url.Parse(base); err == nil {
		base = providers.RedactURL(u)
	}
	switch {
	case pc.Kind == config.KindDemo:
		res.Sev, res.Detail = sevOK, "the offline demo model (kind demo): nothing to call"
		return res
	case key == "" && needsKey(pc) && pc.Fallback != config.FallbackDemo:
		res.Sev = sevProblem
		res.Detail = "no key: " + credentialHint(i, pc) + " is not set, so the gateway will not start"
		res.Fix = "set it where the gateway runs, or add fallback: demo to this provider (the offline demo model answers until it is set)"
		return res
	case key == "" && needsKey(pc):
		res.Sev = sevWarn
		if pc.APIKeyEnv != "" {
			res.Detail = fmt.Sprintf("no key: %s is not set, so the offline demo model answers meanwhile", pc.APIKeyEnv)
			res.Fix = fmt.Sprintf("export %s=… (providers[%d].api_key_env) where the gateway runs", pc.APIKeyEnv, i)
		} else {
			res.Detail = "no key configured, so the offline demo model answers meanwhile"
			res.Fix = fmt.Sprintf("set providers[%d].api_key_env to the environment variable holding the key (or api_key)", i)
		}
		return res
	}
	// The adapter is built exactly as the gateway builds it.
	one := d.cfg
	one.Providers = []config.Provider{pc}
	provs, _, err := buildProviders(one, d.environ, slog.New(slog.DiscardHandler))
	if err != nil {
		// Reported with this provider's own index (one is a list of one).
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("providers[%d] (%s): %v", i, pc.Name, cmp.Or(errors.Unwrap(err), err))
		res.Fix = fmt.Sprintf("check providers[%d].kind and base_url", i)
		return res
	}
	adapter := provs[pc.Name].Provider

	models := d.modelsOf(pc, catalog)
	if len(models) == 0 {
		res.Sev = sevProblem
		res.Detail = "no model to ask: neither the provider nor any guide names one"
		res.Fix = fmt.Sprintf("set providers[%d].model", i)
		return res
	}
	where := "endpoint " + base
	switch {
	case key == "":
		where += ", no key"
	case source == "api_key":
		where += fmt.Sprintf(", key from providers[%d].api_key", i)
	default:
		where += ", key from " + strings.TrimPrefix(source, "env ")
	}
	timeout := d.timeout
	if pt := time.Duration(pc.Timeout); pt > 0 && pt < timeout {
		timeout = pt
	}
	var answered []string
	for _, model := range models {
		start := time.Now()
		served, err := ping(ctx, adapter, model, timeout)
		if err != nil {
			res.Sev = sevProblem
			res.Detail, res.Fix = explainProviderError(i, pc, model, base, timeout, err)
			res.Detail += "\n" + where
			return res
		}
		answer := fmt.Sprintf("%s answered in %s", model, time.Since(start).Round(time.Millisecond))
		if served != "" && served != model {
			answer += " (as " + served + ")"
		}
		answered = append(answered, answer)
	}
	res.Sev = sevOK
	res.Detail = strings.Join(answered, "; ") + "\n" + where
	return res
}

// modelsOf is the provider's model first, then each other model a guide
// asks of it (a guide without a provider uses the first one).
func (d *doctor) modelsOf(pc config.Provider, catalog *guides.Catalog) []string {
	var models []string
	if pc.Model != "" {
		models = append(models, pc.Model)
	}
	if catalog == nil {
		return models
	}
	for _, name := range catalog.Names() {
		g, _ := catalog.Get(name)
		prov := g.Provider
		if prov == "" && len(d.cfg.Providers) > 0 {
			prov = d.cfg.Providers[0].Name
		}
		if prov == pc.Name && g.Model != "" && !slices.Contains(models, g.Model) {
			models = append(models, g.Model)
		}
	}
	return models
}

// ping asks model for a one-token answer and reads the stream to its end.
// It returns the model the provider says answered.
func ping(ctx context.Context, p providers.Provider, model string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := providers.Request{
		Model:     model,
		Messages:  []switchboard.Message{{Role: switchboard.RoleUser, Content: "Say ok."}},
		MaxTokens: 1,
	}
	served := ""
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		if ev.Kind == providers.EventDone {
			served = ev.Model
		}
	}
	return served, nil
}

// explainProviderError says what a failed call means for the operator:
// the kind of failure as providers.Classify sees it (the same split users
// are told about), and the setting to look at.
func explainProviderError(i int, pc config.Provider, model, base string, timeout time.Duration, err error) (detail, fix string) {
	keySetting := fmt.Sprintf("providers[%d].api_key", i)
	if pc.APIKey == "" && pc.APIKeyEnv != "" {
		keySetting = fmt.Sprintf("%s (providers[%d].api_key_env)", pc.APIKeyEnv, i)
	}
	modelSetting := fmt.Sprintf("the model %q (providers[%d].model or the guide's model)", model, i)
	var pe *providers.Error
	if !errors.As(err, &pe) {
		// Not an answer from the provider: the request could not be made.
		return fmt.Sprintf("the request could not be made: %v", err), "check " + modelSetting
	}
	status := pe.Status
	msg := providerMessage(pe)
	httpStatus := fmt.Sprintf("HTTP %d", status)
	if t := http.StatusText(status); t != "" {
		httpStatus += " " + t
	}
	keyRefused := status == http.StatusUnauthorized ||
		(status == http.StatusBadRequest || status == http.StatusForbidden) &&
			(strings.Contains(msg, "API_KEY_INVALID") || strings.Contains(msg, "API key not valid") || strings.Contains(msg, "API key expired"))

	switch kind := providers.Classify(err); {
	case keyRefused:
		return fmt.Sprintf("the key was refused (%s): %s", httpStatus, msg),
			fmt.Sprintf("check %s: the provider does not accept the key it holds", keySetting)
	case status == http.StatusForbidden:
		return fmt.Sprintf("the key may not use %s (%s): %s", model, httpStatus, msg),
			fmt.Sprintf("check the key's project and permissions (%s), or choose another model", keySetting)
	case status == http.StatusNotFound && pc.Kind == config.KindOllama:
		return fmt.Sprintf("not found (%s): %s", httpStatus, msg),
			fmt.Sprintf("ollama pull %s, or check %s", model, modelSetting)
	case status == http.StatusNotFound:
		return fmt.Sprintf("not found (%s): %s", httpStatus, msg),
			fmt.Sprintf("check %s and providers[%d].base_url (%s): OpenAI-compatible servers end in /v1, Anthropic and Gemini are the host root", modelSetting, i, base)
	case kind == providers.KindRateLimited:
		return fmt.Sprintf("rate-limited or out of quota (%s): %s", httpStatus, msg),
			"check the account's quota and billing; the gateway retries 429s, but a spent quota stays spent"
	case kind == providers.KindTimeout && status == 0:
		return fmt.Sprintf("no answer within %s", timeout),
			fmt.Sprintf("check that providers[%d].base_url (%s) is the model's API and reachable; a local model may still be loading", i, base)
	case kind == providers.KindTimeout:
		return fmt.Sprintf("the provider timed out (%s): %s", httpStatus, msg), "try again later"
	case kind == providers.KindUnavailable && status == 0:
		if pc.Kind == config.KindOllama {
			return "unreachable: " + netCause(err),
				fmt.Sprintf("start Ollama (ollama serve), or check providers[%d].base_url (%s)", i, base)
		}
		if pc.BaseURL == "" {
			return "unreachable: " + netCause(err),
				fmt.Sprintf("check that this machine reaches %s (DNS, firewall; HTTPS_PROXY if it needs a proxy)", base)
		}
		return "unreachable: " + netCause(err),
			fmt.Sprintf("check providers[%d].base_url (%s) and that the server is running and reachable from here (DNS, firewall, proxy)", i, base)
	case kind == providers.KindUnavailable:
		return fmt.Sprintf("the provider is unavailable (%s): %s", httpStatus, msg),
			"try again later; a guide's fallback provider answers while this one fails"
	case kind == providers.KindBroken:
		return fmt.Sprintf("the answer broke off or could not be read: %s", msg),
			fmt.Sprintf("check that providers[%d].base_url (%s) is the model's API and not a proxy's page", i, base)
	}
	return fmt.Sprintf("the provider refused the request (%s): %s", httpStatus, msg),
		fmt.Sprintf("check %s and providers[%d].kind (%s)", modelSetting, i, pc.Kind)
}

// providerMessage is the start of what the provider said, already scrubbed
// and capped by the adapter.
func providerMessage(pe *providers.Error) string {
	msg := "no detail"
	if pe.Err != nil {
		msg = pe.Err.Error()
	}
	return providers.Truncate(msg, 300)
}

// netCause is the innermost network error, e.g. "dial tcp 127.0.0.1:1:
// connect: connection refused", without the request's URL.
func netCause(err error) string {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.Error()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Error()
	}
	return err.Error()
}

// ---------------------------------------------------------------------------
// the database

func (d *doctor) checkDatabase() checkResult {
	res := checkResult{Name: "database"}
	dsn := d.cfg.Storage.DSN
	if dsn == ":memory:" {
		res.Sev = sevWarn
		res.Detail = "storage.dsn is :memory:: every conversation is lost when the gateway stops"
		res.Fix = "set storage.dsn to a file, e.g. data/switchboard.db"
		return res
	}
	path := absPath(dsn)
	dir := filepath.Dir(path)
	fixDir := fmt.Sprintf("make %s writable by the user the gateway runs as (%s), or set storage.dsn elsewhere", dir, whoami())

	// A gateway holding the lock is using the file: read only its header.
	pid, held, err := lockHolder(path + ".lock")
	if err != nil {
		res.Sev, res.Detail = sevProblem, fmt.Sprintf("%s.lock: %v", path, err)
		res.Fix = fixDir
		return res
	}
	if held {
		d.dbHeld, d.gatewayPID = true, pid
		info, err := dbFileInfo(path)
		res.Sev = sevInfo
		res.Detail = fmt.Sprintf("%s is in use by a running gateway%s; only its header was read", path, pidText(pid))
		if err == nil {
			res.Detail += "\n" + info
		}
		return res
	}

	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The gateway creates the directory: its nearest existing parent
		// must be writable.
		parent := dir
		for {
			next := filepath.Dir(parent)
			if next == parent {
				break
			}
			parent = next
			if _, err := os.Stat(parent); err == nil {
				break
			}
		}
		if err := probeWritable(parent); err != nil {
			res.Sev = sevProblem
			res.Detail = fmt.Sprintf("%s does not exist and cannot be created: %s is not writable (%v)", dir, parent, cleanPathErr(err))
			res.Fix = fmt.Sprintf("mkdir -p %s and make it writable by the user the gateway runs as (%s)", dir, whoami())
			return res
		}
		res.Sev = sevOK
		res.Detail = fmt.Sprintf("%s: not created yet; the gateway creates %s and the file at its first start", path, dir)
		return res
	case err != nil:
		res.Sev, res.Detail, res.Fix = sevProblem, cleanPathErr(err).Error(), fixDir
		return res
	case !st.IsDir():
		res.Sev, res.Detail = sevProblem, fmt.Sprintf("%s is not a directory", dir)
		res.Fix = "set storage.dsn to a file in a directory"
		return res
	}
	// A scratch database next to the real one: the directory takes new
	// files, and SQLite can use WAL there (not every file system can).
	mode, err := probeSQLite(dir)
	if err != nil {
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("the directory %s is not writable: %v", dir, cleanPathErr(err))
		res.Fix = fixDir
		return res
	}
	if mode != "wal" {
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("SQLite cannot use WAL in %s (journal_mode is %s): the file system lacks shared memory (a network file system?)", dir, mode)
		res.Fix = "put storage.dsn on a local disk"
		return res
	}

	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		res.Sev = sevOK
		res.Detail = fmt.Sprintf("%s: not created yet; %s is writable and WAL works there", path, dir)
		return res
	}
	// Opening for writing changes nothing, and is what the gateway needs.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("%s is not writable: %v", path, cleanPathErr(err))
		res.Fix = fmt.Sprintf("chown the file (and its -wal, -shm and .lock) to the user the gateway runs as (%s)", whoami())
		return res
	}
	f.Close()
	info, err := dbFileInfo(path)
	if err != nil {
		res.Sev, res.Detail = sevProblem, fmt.Sprintf("%s: %v", path, err)
		res.Fix = "storage.dsn must name the gateway's SQLite file; restore it from a backup, or move it away to start afresh"
		return res
	}
	version, err := schemaVersion(path)
	if err != nil {
		res.Sev, res.Detail = sevProblem, fmt.Sprintf("%s does not open: %v", path, err)
		res.Fix = "restore the file from a backup, or move it away to start afresh"
		return res
	}
	res.Sev = sevOK
	res.Detail = fmt.Sprintf("%s: %s, schema version %d; no gateway is using it\n%s is writable and WAL works there", path, info, version, dir)
	return res
}

// checkRecallIndex checks the recall index (messages_fts): FTS5's
// integrity check and its rows against the stored messages
// (storage.CheckRecallIndex), reading the file only. With no gateway on it
// the file is opened as schemaVersion opens it, immutable (the last writes
// a crash left in the -wal are not seen); beside a running gateway it is
// opened read-only through its WAL, a reader among the gateway's readers:
// nothing is written and no file is created (the -wal and -shm are the
// gateway's), though the read (seconds for a million messages) holds the
// WAL's checkpoint back meanwhile. A broken index is a PROBLEM, since it
// fails the writes of new messages; messages missing from it a WARN, since
// recall alone misses them. Either's fix is storage.RebuildRecallSQL.
func (d *doctor) checkRecallIndex(ctx context.Context) checkResult {
	res := checkResult{Name: "recall index"}
	dsn := d.cfg.Storage.DSN
	path := absPath(dsn)
	if dsn == ":memory:" {
		res.Sev, res.Detail = sevInfo, "nothing to check: storage.dsn is :memory:"
		return res
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		res.Sev, res.Detail = sevOK, "not created yet: the gateway creates it with the database"
		return res
	}
	if _, err := dbFileInfo(path); err != nil {
		res.Sev, res.Detail = sevInfo, "not checked: the database cannot be read (see the database row)"
		return res
	}
	uri := "file:" + escapePath(path) + "?mode=ro&immutable=1"
	if d.dbHeld {
		uri = "file:" + escapePath(path) + "?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		res.Sev, res.Detail = sevWarn, fmt.Sprintf("not checked: %v", err)
		return res
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	c, err := storage.CheckRecallIndex(ctx, db)
	fix := fmt.Sprintf("stop the gateway, back up %s, then rebuild the index from the stored messages in the sqlite3 shell (sqlite3 %s): %s",
		path, path, storage.RebuildRecallSQL)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		res.Sev, res.Detail = sevInfo, "no recall index yet: the gateway builds it from the stored messages (migration 0012) at its next start"
	case err != nil && ctx.Err() != nil:
		res.Sev = sevWarn
		res.Detail = fmt.Sprintf("not checked: the check reads the whole index and did not finish within %s", d.timeout)
		res.Fix = "run gateway doctor --timeout 10m when there is time (about 4 s a million messages)"
	case err != nil:
		res.Sev, res.Detail = sevWarn, fmt.Sprintf("not checked: %v", err)
	case c.Problem != "":
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("FTS5's integrity check failed: %s\nwhile it is broken, storing new messages fails (their text is indexed as they are stored), and recall misses what it lost", c.Problem)
		res.Fix = fix
	case c.Missing > 0 || c.Orphans > 0:
		res.Sev = sevWarn
		res.Detail = fmt.Sprintf("%d messages indexed; %d stored messages are not in the index (recall cannot find them), %d index rows have no message", c.Indexed, c.Missing, c.Orphans)
		res.Fix = fix
	default:
		res.Sev = sevOK
		res.Detail = fmt.Sprintf("%d messages indexed, every stored one; FTS5's integrity check passed; %s on disk", c.Indexed, byteSize(c.Bytes))
	}
	return res
}

func pidText(pid int) string {
	if pid > 0 {
		return fmt.Sprintf(" (pid %d)", pid)
	}
	return ""
}

// dbFileInfo reads the file's SQLite header: its size and journal mode,
// without opening it as a database (which could create files beside it).
func dbFileInfo(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", cleanPathErr(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.Size() == 0 {
		return "empty (0 bytes)", nil
	}
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:16]) != "SQLite format 3\x00" {
		return "", errors.New("not an SQLite database")
	}
	journal := "rollback journal (the gateway switches it to WAL)"
	if h[18] == 2 && h[19] == 2 {
		journal = "journal_mode WAL"
	}
	info := fmt.Sprintf("%s, %s", byteSize(st.Size()), journal)
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
		info += fmt.Sprintf(" (+ %s of WAL)", byteSize(wal.Size()))
	}
	return info, nil
}

// schemaVersion opens the file read-only and immutable (no lock, no -wal
// or -shm is created or read) and reads the last migration applied.
func schemaVersion(path string) (int, error) {
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?mode=ro&immutable=1")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

// escapePath makes a file path safe inside an SQLite URI (as storage does).
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// probeWritable creates and removes a file in dir. Its error does not
// name the scratch file.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".switchboard-doctor-*")
	if err != nil {
		return bareErr(err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// probeSQLite creates a scratch database in dir in WAL mode, writes to it,
// and removes it with its -wal and -shm. It returns the journal mode SQLite
// ended up in.
func probeSQLite(dir string) (string, error) {
	f, err := os.CreateTemp(dir, ".switchboard-doctor-*.db")
	if err != nil {
		return "", bareErr(err)
	}
	name := f.Name()
	f.Close()
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			_ = os.Remove(name + suffix)
		}
	}()
	db, err := sql.Open("sqlite", "file:"+escapePath(name)+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(2000)")
	if err != nil {
		return "", err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE probe (x INTEGER); INSERT INTO probe VALUES (1)`); err != nil {
		return "", err
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		return "", err
	}
	return strings.ToLower(mode), nil
}

// bareErr is a *fs.PathError's cause alone ("permission denied").
func bareErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// cleanPathErr drops the op from a *fs.PathError: "open /x: permission
// denied" reads better as "/x: permission denied".
func cleanPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func whoami() string {
	u := localUser(nil)
	return fmt.Sprintf("%s, uid %d", u.Name, os.Getuid())
}

// ---------------------------------------------------------------------------
// ports

// checkPort binds addr for a moment. When it is taken, it asks what holds
// it: a gateway answers GET /healthz with "ok" (on http.addr) and serves
// switchboard_ metrics (on metrics.addr).
func (d *doctor) checkPort(ctx context.Context, key, addr, path string) checkResult {
	res := checkResult{Name: key}
	host, port, _ := net.SplitHostPort(addr)
	if port == "0" {
		res.Sev, res.Detail = sevOK, addr+": a free port is chosen at each start"
		return res
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		res.Sev, res.Detail = sevOK, addr+" is free"
		if key == "http.addr" && !isLoopbackHost(host) {
			res.Detail += " (beyond loopback: reachable from other machines)"
		}
		return res
	}
	// Who is there?
	probe := net.JoinHostPort(probeHost(host), port)
	gateway := d.askGateway(ctx, probe, path)
	// What the gateway does when it cannot bind.
	sev := sevProblem
	consequence := "the gateway will not start"
	if key == "metrics.addr" {
		sev, consequence = sevWarn, "the gateway will serve without metrics"
	}
	switch {
	case gateway && d.dbHeld:
		res.Sev = sevInfo
		res.Detail = fmt.Sprintf("%s is in use by the running gateway%s, which answers %s", addr, pidText(d.gatewayPID), path)
	case gateway:
		res.Sev = sev
		res.Detail = fmt.Sprintf("%s is in use by another gateway (it answers %s), not the one using this database: %s", addr, path, consequence)
		res.Fix = fmt.Sprintf("stop that gateway, or give this one another %s", key)
	case errors.Is(err, syscall.EADDRINUSE):
		res.Sev = sev
		res.Detail = fmt.Sprintf("%s is in use by another program: %s", addr, consequence)
		res.Fix = fmt.Sprintf("find it with `ss -ltnp 'sport = :%s'`, or choose another %s", port, key)
	case errors.Is(err, syscall.EACCES):
		res.Sev = sev
		res.Detail = fmt.Sprintf("%s cannot be bound: permission denied: %s", addr, consequence)
		res.Fix = "ports below 1024 need root or CAP_NET_BIND_SERVICE: use a port above 1024 behind a proxy"
	default:
		res.Sev = sev
		res.Detail = fmt.Sprintf("%s cannot be bound: %v: %s", addr, errors.Unwrap(err), consequence)
		res.Fix = fmt.Sprintf("%s must be an address of this machine, e.g. 127.0.0.1:%s or 0.0.0.0:%s", key, port, port)
	}
	return res
}

// probeHost is where to reach a listener bound to host from here.
func probeHost(host string) string {
	switch host {
	case "", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return host
}

// askGateway: does the listener at addr answer path as a gateway does?
func (d *doctor) askGateway(ctx context.Context, addr, path string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return false
	}
	if path == "/healthz" {
		return strings.TrimSpace(string(body)) == "ok"
	}
	return strings.Contains(string(body), "switchboard_")
}

// ---------------------------------------------------------------------------
// listeners

func (d *doctor) checkListeners(ctx context.Context) []checkResult {
	var out []checkResult
	ws := d.cfg.Listeners.WebSocket
	res := checkResult{Name: "listener websocket"}
	host, _, _ := net.SplitHostPort(d.cfg.HTTP.Addr)
	switch err := checkWebSocket(d.cfg, d.environ); {
	case !ws.Enabled:
		res.Sev, res.Detail = sevInfo, "not enabled: no /ws and no web widget"
	case err != nil:
		res.Sev, res.Detail = sevProblem, err.Error()
		res.Fix = "the gateway refuses to start this way; see docs/websocket.md for auth modes"
		if strings.HasPrefix(firstEnvName(err.Error()), config.EnvPrefix) {
			res.Fix = "a secret must not live in a " + config.EnvPrefix + "* variable (those are read as config keys): name another, e.g. GATEWAY_TOKEN"
		}
	case ws.Auth.Mode == config.AuthToken:
		res.Sev, res.Detail = sevOK, fmt.Sprintf("/ws with auth token (%s)", plural(len(ws.Auth.Tokens), "token"))
	case ws.Auth.Mode == config.AuthJWT:
		res.Sev, res.Detail = sevOK, "/ws with auth jwt (HS256 user tokens)"
	case !isLoopbackHost(host):
		res.Sev = sevWarn
		res.Detail = "/ws without authentication beyond loopback (allow_unauthenticated: true): anyone who reaches it can use the model"
		res.Fix = "make sure the proxy in front authenticates, or set listeners.websocket.auth.mode to token or jwt"
	default:
		res.Sev, res.Detail = sevOK, "/ws without authentication, on loopback only"
	}
	out = append(out, res)

	stdin := checkResult{Name: "listener stdin", Sev: sevInfo}
	switch d.cfg.Listeners.Stdin.Enabled {
	case config.StdinAuto:
		stdin.Detail = "auto: the terminal chat runs when standard input is a terminal, a pipe or a file (not /dev/null or a closed stdin)"
	case config.StdinTrue:
		stdin.Detail = "enabled: reads standard input, a pipe too, and stops at its end (input that ends before its first line leaves HTTP serving)"
	default:
		stdin.Detail = "not enabled"
	}
	out = append(out, stdin)

	return append(out, d.checkSlack(ctx), d.checkDiscord(ctx))
}

// checkDiscord asks Discord who the bot token is (GET users/@me), over
// plain HTTP: discordgo's endpoints are process-wide and belong to the
// listener.
func (d *doctor) checkDiscord(ctx context.Context) checkResult {
	dc := d.cfg.Listeners.Discord
	r := checkResult{Name: "listener discord", Sev: sevInfo, Detail: "not enabled"}
	if !dc.Enabled {
		return r
	}
	token := dc.BotToken(d.environ)
	if token == "" {
		r.Sev, r.Detail = sevProblem, fmt.Sprintf("the bot token variable %s is not set", dc.TokenEnv)
		r.Fix = "export " + dc.TokenEnv + "=… (Developer Portal → your application → Bot → Reset Token; docs/discord.md)"
		return r
	}
	detail, err := discord.Check(ctx, discord.Config{Token: token, APIURL: dc.APIURL,
		TokenFrom: secretSource(dc.Token, dc.TokenEnv, "listeners.discord.token")})
	if p, ok := errors.AsType[*discord.Problem](err); ok {
		r.Sev, r.Detail, r.Fix = sevProblem, p.Reason, p.Fix
		return r
	} else if err != nil {
		r.Sev, r.Detail = sevProblem, err.Error()
		return r
	}
	r.Sev, r.Detail = sevOK, detail
	if dc.PublicKey != "" {
		r.Detail += "; interactions over HTTP at " + cmp.Or(d.cfg.HTTP.PublicURL, "http.public_url") + "/discord/interactions"
	}
	return r
}

// checkSlack asks Slack who the bot token is (auth.test) and, in socket
// mode, whether the app token may open a connection
// (apps.connections.open: a URL is issued, nothing connects).
func (d *doctor) checkSlack(ctx context.Context) checkResult {
	sc := d.cfg.Listeners.Slack
	r := checkResult{Name: "listener slack", Sev: sevInfo, Detail: "not enabled"}
	if !sc.Enabled {
		return r
	}
	bot, app, signing := sc.Secrets(d.environ)
	switch {
	case bot == "":
		r.Sev, r.Detail = sevProblem, fmt.Sprintf("the bot token variable %s is not set", sc.BotTokenEnv)
		r.Fix = "export " + sc.BotTokenEnv + "=xoxb-… (OAuth & Permissions → Bot User OAuth Token; docs/slack.md)"
		return r
	case sc.Mode == config.SlackSocket && app == "":
		r.Sev, r.Detail = sevProblem, fmt.Sprintf("the app token variable %s is not set", sc.AppTokenEnv)
		r.Fix = "export " + sc.AppTokenEnv + "=xapp-… (Basic Information → App-Level Tokens, scope connections:write; docs/slack.md)"
		return r
	case sc.Mode == config.SlackHTTP && signing == "":
		r.Sev, r.Detail = sevProblem, fmt.Sprintf("the signing secret variable %s is not set", sc.SigningSecretEnv)
		r.Fix = "export " + sc.SigningSecretEnv + "=… (Basic Information → Signing Secret; docs/slack.md)"
		return r
	}
	detail, err := slack.Check(ctx, slack.Config{Mode: sc.Mode, BotToken: bot, AppToken: app, APIURL: sc.APIURL,
		BotTokenFrom: secretSource(sc.BotToken, sc.BotTokenEnv, "listeners.slack.bot_token"),
		AppTokenFrom: secretSource(sc.AppToken, sc.AppTokenEnv, "listeners.slack.app_token")})
	if p, ok := errors.AsType[*slack.Problem](err); ok {
		r.Sev, r.Detail, r.Fix = sevProblem, p.Reason, p.Fix
		return r
	} else if err != nil {
		r.Sev, r.Detail = sevProblem, err.Error()
		return r
	}
	r.Sev, r.Detail = sevOK, detail
	if sc.Mode == config.SlackHTTP {
		r.Detail += "; Slack must reach " + cmp.Or(d.cfg.HTTP.PublicURL, "http.public_url") + "/slack/events, /slack/interactivity and /slack/commands"
	}
	return r
}

// firstEnvName finds "the environment variable NAME" in a message.
func firstEnvName(msg string) string {
	_, rest, ok := strings.Cut(msg, "the environment variable ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return name
}

// ---------------------------------------------------------------------------
// bubblewrap

// checkBubblewrap, with tools.sandbox.enabled, runs the sandbox's own
// check (bwrap, user namespaces, python, the workspace folder): a failure
// is a problem, since the python tool would refuse every run. Without it,
// it looks for bwrap on the PATH and has it create the namespaces a
// sandbox needs, and at most warns.
func (d *doctor) checkBubblewrap(ctx context.Context) checkResult {
	res := checkResult{Name: "bubblewrap"}
	if d.cfg.Tools.Sandbox.Enabled {
		ctx, cancel := context.WithTimeout(ctx, d.timeout)
		defer cancel()
		sc := sandboxConfig(d.cfg)
		sb, err := sandbox.New(sc, slog.New(slog.DiscardHandler))
		if err == nil {
			err = sb.Check(ctx)
		}
		if err != nil {
			res.Sev, res.Detail = sevProblem, "tools.sandbox is enabled but cannot run: "+err.Error()
			res.Fix = "the message names what is missing; docs/sandbox.md has the set-up"
			return res
		}
		res.Sev, res.Detail = sevOK, "the python tool's sandbox works (workspaces in "+sc.Dir+")"
		return res
	}
	pathEnv, _ := lookupEnv(d.environ, "PATH")
	bwrap := lookPathIn(pathEnv, "bwrap")
	if bwrap == "" {
		res.Sev = sevWarn
		res.Detail = "bwrap is not on PATH: needed by the sandboxed python tool (tools.sandbox.enabled, off now)"
		res.Fix = "apt-get install bubblewrap (dnf install bubblewrap, apk add bubblewrap)"
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--ro-bind", "/", "/", "--unshare-all", "true")
	cmd.Env = d.environ
	out, err := cmd.CombinedOutput()
	if err != nil {
		res.Sev = sevWarn
		why := strings.TrimSpace(string(out))
		if why == "" {
			why = err.Error()
		}
		why, _, _ = strings.Cut(why, "\n")
		res.Detail = fmt.Sprintf("%s cannot create a sandbox: %s", bwrap, why)
		res.Fix = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap, " +
			"or kernel.apparmor_restrict_unprivileged_userns=0); in a container the default seccomp profile forbids them"
		return res
	}
	res.Sev = sevOK
	res.Detail = bwrap + " can create a sandbox (user namespace)"
	return res
}

// lookPathIn is exec.LookPath over the given PATH rather than the
// process's own.
func lookPathIn(pathEnv, file string) string {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// MCP servers

// checkMCP checks each MCP server as start-up would start it, in
// parallel, with mcp.Check (its ${VAR}s, its program on PATH, the
// handshake, its tools); the rows keep the config's order. A server that
// fails is a problem even though the gateway starts without it (it keeps
// trying it): its tools answer that it is not running.
func (d *doctor) checkMCP(ctx context.Context) []checkResult {
	out := make([]checkResult, len(d.cfg.Tools.MCP))
	var wg sync.WaitGroup
	for i, s := range d.cfg.Tools.MCP {
		wg.Go(func() { out[i] = d.checkMCPServer(ctx, s) })
	}
	wg.Wait()
	return out
}

func (d *doctor) checkMCPServer(ctx context.Context, s config.MCPServer) checkResult {
	res := checkResult{Name: "mcp " + s.Name}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	rep, err := mcp.Check(ctx, mcp.ServerConfig{Name: s.Name, Command: s.Command, Env: s.Env, URL: s.URL, Headers: s.Headers, MaxResponseMB: s.MaxResponseMB}, d.environ)
	if p, ok := errors.AsType[*mcp.Problem](err); ok {
		res.Sev, res.Detail, res.Fix = sevProblem, p.Reason, p.Fix
		return res
	} else if err != nil {
		res.Sev, res.Detail = sevProblem, err.Error()
		return res
	}
	res.Sev = sevOK
	res.Detail = strings.Join(append([]string{rep.Summary()}, rep.Details()...), "\n")
	if len(rep.LeftOut) > 0 {
		res.Sev = sevWarn
		res.Fix = "the model is offered the other tools; one left out needs fixing in the server (a newer version of it, or its author)"
	}
	return res
}

// ---------------------------------------------------------------------------
// healthcheck

// runHealthcheck is `gateway healthcheck [--url URL] [--config F]`: GET
// /healthz of the gateway that config describes (or of URL), exit 0 when it
// answers "ok". It is the container's HEALTHCHECK, where no curl exists.
func runHealthcheck(ctx context.Context, args []string, out, errOut io.Writer, environ []string) error {
	fs := flag.NewFlagSet("gateway healthcheck", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: gateway healthcheck [--config FILE] [--set key=value]... [--url URL] [--timeout 5s]")
		fmt.Fprintln(errOut, "Exits 0 when the gateway the configuration describes (or --url) answers /healthz with ok: the container's health check.")
		fs.PrintDefaults()
	}
	p := addProbeFlags(fs, "/healthz") // health.go, shared with gateway status
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("healthcheck: unexpected argument %q", fs.Arg(0))
	}
	target, code, body, err := p.get(ctx, "/healthz", environ)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	if code != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("healthcheck: GET %s: HTTP %d: %q", target, code, providers.Truncate(strings.TrimSpace(string(body)), 200))
	}
	fmt.Fprintln(out, "ok")
	return nil
}
