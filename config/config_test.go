package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, file string, sets, environ []string) Config {
	t.Helper()
	c, err := Load(file, sets, environ)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantErr loads and checks that the error contains every fragment.
func wantErr(t *testing.T, file string, sets, environ []string, fragments ...string) {
	t.Helper()
	_, err := Load(file, sets, environ)
	if err == nil {
		t.Fatalf("no error, want one containing %q", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error lacks %q:\n%v", f, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, "", nil, nil)
	if c.HTTP.Addr != "127.0.0.1:8080" || c.Storage.DSN != "data/switchboard.db" {
		t.Errorf("http/storage: %+v %+v", c.HTTP, c.Storage)
	}
	if c.Guides.Dir != "guides" || c.Guides.Default != "assistant" {
		t.Errorf("guides: %+v", c.Guides)
	}
	if len(c.Providers) != 0 {
		t.Errorf("providers: %+v", c.Providers)
	}
	l := c.Listeners
	if !l.WebSocket.Enabled || l.Stdin.Enabled != "auto" || l.Slack.Enabled || l.Slack.Mode != "socket" || l.Discord.Enabled {
		t.Errorf("listeners: %+v", l)
	}
	if l.Slack.APIURL != "https://slack.com/api/" || l.Discord.APIURL != "https://discord.com/api/v10/" {
		t.Errorf("api urls: %q %q", l.Slack.APIURL, l.Discord.APIURL)
	}
	want := Sessions{QueueSize: 64, IdleTimeout: Duration(15 * time.Second), ApprovalTimeout: Duration(10 * time.Minute), ToolTimeout: Duration(30 * time.Second), SubscriberBuffer: 256, ShutdownGrace: Duration(10 * time.Second), MaxLive: 10000, NewPerMinute: 20, MaxBindings: 20, DeltaInterval: Duration(200 * time.Millisecond)}
	if c.Sessions != want {
		t.Errorf("sessions: %+v, want %+v", c.Sessions, want)
	}
	if c.Log.Level != "info" || c.Log.Format != "text" {
		t.Errorf("log: %+v", c.Log)
	}
	if c.HTTP.PublicURL != "" || c.HTTP.IdleTimeout != Duration(60*time.Second) || c.HTTP.ReadTimeout != Duration(30*time.Second) {
		t.Errorf("http: %+v", c.HTTP)
	}
	if c.Metrics.Addr != "127.0.0.1:9090" {
		t.Errorf("metrics: %+v", c.Metrics)
	}
	if ws := l.WebSocket; ws.SendBufferBytes != 1<<20 || len(ws.ImageHosts) != 0 {
		t.Errorf("websocket: %+v", ws)
	}
}

// The keys of the security review: a public URL, HTTP timeouts, the
// metrics listener (empty turns it off), image hosts and the send
// buffer's bytes.
func TestSecurityKeys(t *testing.T) {
	c := mustLoad(t, writeFile(t, `http:
  public_url: https://chat.example.com
  idle_timeout: 2m
  read_timeout: 15s
metrics:
  addr: ""
listeners:
  websocket:
    image_hosts: [images.example.com, "*.cdn.example", "img.example:8443"]
    send_buffer_bytes: 65536
`), nil, nil)
	if c.HTTP.PublicURL != "https://chat.example.com" || c.HTTP.IdleTimeout != Duration(2*time.Minute) || c.HTTP.ReadTimeout != Duration(15*time.Second) {
		t.Errorf("http: %+v", c.HTTP)
	}
	if c.Metrics.Addr != "" {
		t.Errorf("metrics.addr %q, want empty (off)", c.Metrics.Addr)
	}
	ws := c.Listeners.WebSocket
	if strings.Join(ws.ImageHosts, " ") != "images.example.com *.cdn.example img.example:8443" || ws.SendBufferBytes != 65536 {
		t.Errorf("websocket: %+v", ws)
	}
	if c := mustLoad(t, "", []string{"metrics.addr="}, nil); c.Metrics.Addr != "" {
		t.Errorf("--set metrics.addr= left %q", c.Metrics.Addr)
	}
	for _, tc := range []struct {
		set, want string
	}{
		{"http.public_url=chat.example.com", "http.public_url: want the gateway's public origin"},
		{"http.public_url=https://chat.example.com/chat", "http.public_url: want the gateway's public origin"},
		{"http.idle_timeout=0s", "http.idle_timeout: must be positive"},
		{"http.read_timeout=-1s", "http.read_timeout: must be positive"},
		{"metrics.addr=9090", "metrics.addr: want host:port"},
		{"listeners.websocket.image_hosts=[https://images.example.com]", "listeners.websocket.image_hosts[0]: want a host name"},
		{"listeners.websocket.image_hosts=[a/b]", "listeners.websocket.image_hosts[0]: want a host name"},
		{"listeners.websocket.send_buffer_bytes=100", "listeners.websocket.send_buffer_bytes: must be at least 4096"},
	} {
		wantErr(t, "", []string{tc.set}, nil, tc.want)
	}
}

func TestMissingFile(t *testing.T) {
	wantErr(t, filepath.Join(t.TempDir(), "nope.yaml"), nil, nil, "config: ", "nope.yaml")
}

func TestFileThenEnvThenSet(t *testing.T) {
	file := writeFile(t, `
http:
  addr: 127.0.0.1:1111
storage:
  dsn: file.db
guides:
  dir: file-guides
sessions:
  queue_size: 8
`)
	env := []string{
		"SWITCHBOARD_HTTP__ADDR=127.0.0.1:2222",
		"SWITCHBOARD_STORAGE__DSN=:memory:",
		"SWITCHBOARD_SESSIONS__QUEUE_SIZE=16",
		"OTHER_HTTP__ADDR=ignored:1",
	}
	sets := []string{"http.addr=127.0.0.1:3333", "sessions.tool_timeout=5s"}

	dir := filepath.Dir(file)
	c := mustLoad(t, file, nil, nil)
	if c.HTTP.Addr != "127.0.0.1:1111" || c.Storage.DSN != filepath.Join(dir, "file.db") || c.Sessions.QueueSize != 8 {
		t.Errorf("file: %+v %+v %+v", c.HTTP, c.Storage, c.Sessions)
	}
	if c.Guides.Default != "assistant" || c.Sessions.SubscriberBuffer != 256 {
		t.Errorf("a file leaves the keys it does not name at their defaults: %+v %+v", c.Guides, c.Sessions)
	}

	c = mustLoad(t, file, nil, env)
	if c.HTTP.Addr != "127.0.0.1:2222" || c.Storage.DSN != ":memory:" || c.Sessions.QueueSize != 16 || c.Guides.Dir != filepath.Join(dir, "file-guides") {
		t.Errorf("env over file: %+v %+v %+v %+v", c.HTTP, c.Storage, c.Sessions, c.Guides)
	}

	c = mustLoad(t, file, sets, env)
	if c.HTTP.Addr != "127.0.0.1:3333" || c.Storage.DSN != ":memory:" || c.Sessions.ToolTimeout != Duration(5*time.Second) {
		t.Errorf("set over env: %+v %+v %+v", c.HTTP, c.Storage, c.Sessions)
	}
}

// A relative path written in the file, or a default the file leaves in
// place, is taken from the file's folder, whatever the working directory;
// one given in the environment or with --set is taken from the working
// directory, as a shell would. :memory:, SQLite URIs, absolute paths,
// the sandbox's python (a path inside the sandbox) and MCP commands (run
// as a shell would run them) are left as written.
func TestRelativePathsAreTheFilesFolder(t *testing.T) {
	file := writeFile(t, `
storage:
  dsn: data/gw.db
guides:
  dir: ./my-guides
tools:
  sandbox:
    dir: ../workspaces
    wheelhouse: wheels
    bwrap: bin/bwrap
  mcp:
    - name: local
      command: [./mcp-server, --root, data]
`)
	dir := filepath.Dir(file)
	c := mustLoad(t, file, nil, nil)
	for _, p := range []struct{ key, got, want string }{
		{"storage.dsn", c.Storage.DSN, filepath.Join(dir, "data", "gw.db")},
		{"guides.dir", c.Guides.Dir, filepath.Join(dir, "my-guides")},
		{"tools.sandbox.dir", c.Tools.Sandbox.Dir, filepath.Join(filepath.Dir(dir), "workspaces")},
		{"tools.sandbox.wheelhouse", c.Tools.Sandbox.Wheelhouse, filepath.Join(dir, "wheels")},
		{"tools.sandbox.bwrap", c.Tools.Sandbox.Bwrap, filepath.Join(dir, "bin", "bwrap")},
		{"tools.sandbox.python", c.Tools.Sandbox.Python, "/usr/bin/python3"},
		{"tools.mcp[0].command", strings.Join(c.Tools.MCP[0].Command, " "), "./mcp-server --root data"},
	} {
		if p.got != p.want {
			t.Errorf("%s = %q, want %q (beside the file)", p.key, p.got, p.want)
		}
	}

	// The defaults a file leaves are its own; empty stays empty.
	c = mustLoad(t, writeFile(t, "log: { level: debug }\n"), nil, nil)
	if d := filepath.Dir(c.Guides.Dir); c.Guides.Dir != filepath.Join(d, "guides") || c.Storage.DSN != filepath.Join(d, "data", "switchboard.db") || !filepath.IsAbs(d) {
		t.Errorf("defaults: guides.dir %q, storage.dsn %q: want both in the file's folder", c.Guides.Dir, c.Storage.DSN)
	}
	if c.Tools.Sandbox.Dir != "" || c.Tools.Sandbox.Wheelhouse != "" || c.Tools.Sandbox.Bwrap != "" {
		t.Errorf("empty paths must stay empty (they mean a default): %+v", c.Tools.Sandbox)
	}

	// Values that are no relative path stay as written.
	for _, dsn := range []string{":memory:", "file::memory:?cache=shared", "file:data/gw.db?mode=rwc", "/var/lib/switchboard/gw.db",
		"postgres://gw@db.internal:5432/switchboard?sslmode=verify-full", "postgresql://gw@/switchboard?host=/run/postgresql"} {
		c = mustLoad(t, writeFile(t, "storage: { dsn: \""+dsn+"\" }\n"), nil, nil)
		if c.Storage.DSN != dsn {
			t.Errorf("storage.dsn %q became %q", dsn, c.Storage.DSN)
		}
	}

	// The environment and --set speak for the working directory.
	c = mustLoad(t, file, []string{"storage.dsn=set.db"}, []string{"SWITCHBOARD_GUIDES__DIR=env-guides", "SWITCHBOARD_TOOLS__SANDBOX__WHEELHOUSE=env-wheels"})
	if c.Storage.DSN != "set.db" || c.Guides.Dir != "env-guides" || c.Tools.Sandbox.Wheelhouse != "env-wheels" {
		t.Errorf("env and --set: storage.dsn %q, guides.dir %q, wheelhouse %q: want them as given", c.Storage.DSN, c.Guides.Dir, c.Tools.Sandbox.Wheelhouse)
	}
	if c.Tools.Sandbox.Bwrap != filepath.Join(dir, "bin", "bwrap") {
		t.Errorf("a key the environment does not set stays the file's: %q", c.Tools.Sandbox.Bwrap)
	}

	// Without a file, the defaults are the working directory's, as before.
	if c = mustLoad(t, "", nil, nil); c.Guides.Dir != "guides" || c.Storage.DSN != "data/switchboard.db" {
		t.Errorf("no file: %q %q", c.Guides.Dir, c.Storage.DSN)
	}
}

func TestNestedEnv(t *testing.T) {
	c := mustLoad(t, "", nil, []string{
		"SWITCHBOARD_LISTENERS__SLACK__BOT_TOKEN=xoxb-1: #not a comment",
		"SWITCHBOARD_LISTENERS__SLACK__APP_TOKEN_ENV=MY_APP_TOKEN",
		"SWITCHBOARD_LISTENERS__SLACK__ENABLED=true",
		"SWITCHBOARD_LISTENERS__STDIN__ENABLED=false",
		"SWITCHBOARD_LISTENERS__WEBSOCKET__ENABLED=false",
		"SWITCHBOARD_LISTENERS__DISCORD__APPLICATION_ID=012345",
		"SWITCHBOARD_LISTENERS__WEBSOCKET__ALLOWED_ORIGINS=https://a.example, https://b.example:8443",
	})
	if got := c.Listeners.WebSocket.AllowedOrigins; len(got) != 2 || got[0] != "https://a.example" || got[1] != "https://b.example:8443" {
		t.Errorf("a list from the environment is comma-separated: %q", got)
	}
	s := c.Listeners.Slack
	if s.BotToken != "xoxb-1: #not a comment" || s.AppTokenEnv != "MY_APP_TOKEN" || !s.Enabled {
		t.Errorf("slack: %+v", s)
	}
	if c.Listeners.Stdin.Enabled != "false" || c.Listeners.WebSocket.Enabled {
		t.Errorf("stdin/websocket: %+v", c.Listeners)
	}
	if c.Listeners.Discord.ApplicationID != "012345" {
		t.Errorf("a numeric-looking text value must stay as written: %q", c.Listeners.Discord.ApplicationID)
	}
}

func TestProviders(t *testing.T) {
	file := writeFile(t, `
providers:
  - name: main
    kind: openai
    model: gpt-4o-mini
    api_key_env: OPENAI_API_KEY
  - name: local
    kind: ollama
    base_url: http://127.0.0.1:11434/v1
    timeout: 2m
    max_retries: 0
`)
	c := mustLoad(t, file, nil, nil)
	if len(c.Providers) != 2 {
		t.Fatalf("providers: %+v", c.Providers)
	}
	main, local := c.Providers[0], c.Providers[1]
	if main.Name != "main" || main.Kind != "openai" || main.Model != "gpt-4o-mini" || main.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("main: %+v", main)
	}
	if main.Timeout != Duration(60*time.Second) || main.MaxRetries != 3 {
		t.Errorf("main's defaults: timeout %v, max_retries %d", main.Timeout, main.MaxRetries)
	}
	if local.Timeout != Duration(2*time.Minute) || local.MaxRetries != 0 {
		t.Errorf("an explicit max_retries: 0 must stay 0: %+v", local)
	}

	// An entry is addressed by index from the environment and --set,
	// keeping its other keys; the next index adds one.
	c = mustLoad(t, file, []string{"providers.1.model=llama3.2", "providers.2.name=demo", "providers.2.kind=demo"},
		[]string{"SWITCHBOARD_PROVIDERS__0__BASE_URL=http://127.0.0.1:9/v1"})
	if len(c.Providers) != 3 {
		t.Fatalf("providers: %+v", c.Providers)
	}
	if c.Providers[0].BaseURL != "http://127.0.0.1:9/v1" || c.Providers[0].Model != "gpt-4o-mini" {
		t.Errorf("providers[0]: %+v", c.Providers[0])
	}
	if c.Providers[1].Model != "llama3.2" || c.Providers[1].Kind != "ollama" || c.Providers[1].Timeout != Duration(2*time.Minute) {
		t.Errorf("providers[1]: %+v", c.Providers[1])
	}
	if p := c.Providers[2]; p.Name != "demo" || p.Kind != "demo" || p.MaxRetries != 3 {
		t.Errorf("providers[2]: %+v", p)
	}

	wantErr(t, file, []string{"providers.5.name=x"}, nil, "providers has 2 entries", "--set providers.5.name")

	// A whole list can be given as YAML.
	c = mustLoad(t, file, []string{"providers=[{name: d, kind: demo}]"}, nil)
	if len(c.Providers) != 1 || c.Providers[0].Name != "d" {
		t.Errorf("providers: %+v", c.Providers)
	}
}

func TestProviderKey(t *testing.T) {
	env := []string{"SWITCHBOARD_TEST_KEY=from-env"}
	if k, src := (Provider{APIKey: "direct", APIKeyEnv: "SWITCHBOARD_TEST_KEY"}).Key(env); k != "direct" || src != "api_key" {
		t.Errorf("api_key wins: %q %q", k, src)
	}
	if k, src := (Provider{APIKeyEnv: "SWITCHBOARD_TEST_KEY"}).Key(env); k != "from-env" || src != "env SWITCHBOARD_TEST_KEY" {
		t.Errorf("env: %q %q", k, src)
	}
	if k, src := (Provider{APIKeyEnv: "SWITCHBOARD_TEST_UNSET"}).Key(env); k != "" || src != "env SWITCHBOARD_TEST_UNSET" {
		t.Errorf("unset env: %q %q", k, src)
	}
	if k, src := (Provider{}).Key(env); k != "" || src != "" {
		t.Errorf("none: %q %q", k, src)
	}
}

func TestUnknownKeys(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		file := writeFile(t, "http:\n  addr: 127.0.0.1:1\nhtp:\n  addr: x\nlisteners:\n  slack:\n    bot_tokn: x\nproviders:\n  - name: a\n    kind: demo\n    modle: x\n")
		wantErr(t, file, nil, nil,
			`config: unknown key "htp" (`+file+`:3)`,
			`config: unknown key "listeners.slack.bot_tokn" (`+file+`:7)`,
			`config: unknown key "providers[0].modle" (`+file+`:11)`)
	})
	t.Run("env", func(t *testing.T) {
		wantErr(t, "", nil, []string{"SWITCHBOARD_HTP__ADDR=127.0.0.1:1"},
			`config: unknown key "htp.addr" (from SWITCHBOARD_HTP__ADDR)`)
		wantErr(t, "", nil, []string{"SWITCHBOARD_HTTP__ADDR__PORT=1"}, `unknown key "http.addr.port"`)
		wantErr(t, "", nil, []string{"SWITCHBOARD_PROVIDERS__X__NAME=a"}, `unknown key "providers.x.name"`)
	})
	t.Run("set", func(t *testing.T) {
		wantErr(t, "", []string{"htp.addr=127.0.0.1:1"}, nil, `config: unknown key "htp.addr" (from --set htp.addr)`)
		wantErr(t, "", []string{"listeners.stdin={enabld: true}"}, nil, `config: unknown key "listeners.stdin.enabld"`)
		wantErr(t, "", []string{"no-equals-sign"}, nil, `--set "no-equals-sign": want key=value`)
	})
}

func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		sets    []string
		environ []string
		want    []string
	}{
		{name: "duration in file", file: "sessions:\n  idle_timeout: ten\n",
			want: []string{`config: sessions.idle_timeout: invalid duration "ten"`, ":2)"}},
		{name: "bare number duration", file: "sessions:\n  tool_timeout: 30\n",
			want: []string{`sessions.tool_timeout: invalid duration "30"`}},
		{name: "duration in env", environ: []string{"SWITCHBOARD_SESSIONS__TOOL_TIMEOUT=ten"},
			want: []string{`sessions.tool_timeout: invalid duration "ten"`, "SWITCHBOARD_SESSIONS__TOOL_TIMEOUT"}},
		{name: "duration in set", sets: []string{"providers.0.timeout=ten", "providers.0.name=x"},
			want: []string{`providers[0].timeout: invalid duration "ten"`}},
		{name: "int", sets: []string{"sessions.queue_size=many"},
			want: []string{`sessions.queue_size: want a whole number, not "many"`}},
		{name: "bool", environ: []string{"SWITCHBOARD_LISTENERS__WEBSOCKET__ENABLED=maybe"},
			want: []string{`listeners.websocket.enabled: want true or false, not "maybe"`}},
		{name: "list expected", file: "providers:\n  name: main\n",
			want: []string{`providers: want a list`}},
		{name: "unknown kind", file: "providers:\n  - name: main\n    kind: opneai\n",
			want: []string{`config: providers[0].kind: unknown kind "opneai"`}},
		{name: "duplicate provider", file: "providers:\n  - {name: main, kind: demo}\n  - {name: main, kind: openai}\n",
			want: []string{`config: providers[1].name: duplicate name "main" (also providers[0])`}},
		{name: "provider without name", file: "providers:\n  - kind: demo\n",
			want: []string{`providers[0].name: must not be empty`}},
		{name: "bad base_url", sets: []string{"providers.0.name=a", "providers.0.kind=openai", "providers.0.base_url=localhost:11434"},
			want: []string{`providers[0].base_url: want an http:// or https:// URL`}},
		{name: "context window", file: "providers:\n  - {name: main, kind: openai, context_window: 100}\n",
			want: []string{`providers[0].context_window: want the model's context window in tokens (at least 1024)`}},
		{name: "slack mode", file: "listeners:\n  slack:\n    mode: rtm\n",
			want: []string{`config: listeners.slack.mode: want socket or http, not "rtm"`}},
		{name: "stdin enabled", sets: []string{"listeners.stdin.enabled=sometimes"},
			want: []string{`config: listeners.stdin.enabled: want auto, true or false, not "sometimes"`}},
		{name: "slack enabled without tokens", sets: []string{"listeners.slack.enabled=true"},
			want: []string{"listeners.slack.bot_token", "listeners.slack.app_token"}},
		{name: "http mode without signing secret", file: "listeners:\n  slack: {enabled: true, mode: http, bot_token: x}\n",
			want: []string{"listeners.slack.signing_secret"}},
		{name: "discord enabled without token", file: "listeners:\n  discord: {enabled: true}\n",
			want: []string{"listeners.discord.token"}},
		{name: "http addr", sets: []string{"http.addr=8080"},
			want: []string{`config: http.addr: want host:port`}},
		{name: "queue size", sets: []string{"sessions.queue_size=0"},
			want: []string{`sessions.queue_size: must be at least 1`}},
		{name: "connections per address", sets: []string{"listeners.websocket.max_conns_per_ip=0"},
			want: []string{`listeners.websocket.max_conns_per_ip: must be at least 1, or -1 for no bound`}},
		{name: "new sessions a minute", sets: []string{"sessions.new_per_minute=0"},
			want: []string{`sessions.new_per_minute: must be at least 1`}},
		{name: "sandbox memory", sets: []string{"tools.sandbox.memory_mb=0"},
			want: []string{`tools.sandbox.memory_mb: must be at least 1`}},
		{name: "sandbox timeout", sets: []string{"tools.sandbox.timeout=10ms"},
			want: []string{`tools.sandbox.timeout: timeout and cpu must be at least 1s`}},
		{name: "mcp name", file: "tools:\n  mcp:\n    - {name: GitHub, command: [gh-mcp]}\n",
			want: []string{`tools.mcp[0].name: want a short lower-case name`}},
		{name: "mcp name with __", file: "tools:\n  mcp:\n    - {name: git__hub, command: [gh-mcp]}\n",
			want: []string{`tools.mcp[0].name: want a short lower-case name`}},
		{name: "mcp twice", file: "tools:\n  mcp:\n    - {name: gh, command: [a]}\n    - {name: gh, url: https://x.example/mcp}\n",
			want: []string{`tools.mcp[1].name: "gh" is configured twice`}},
		{name: "mcp both", file: "tools:\n  mcp:\n    - {name: gh, command: [a], url: https://x.example/mcp}\n",
			want: []string{`tools.mcp[0]: set command (a program spoken to over stdio) or url`}},
		{name: "mcp url", file: "tools:\n  mcp:\n    - {name: docs, url: ftp://x.example}\n",
			want: []string{`tools.mcp[0].url: want an http(s) URL, not "ftp://x.example"`}},
		{name: "mcp max response", file: "tools:\n  mcp:\n    - {name: docs, url: https://x.example/mcp, max_response_mb: 100}\n",
			want: []string{`tools.mcp[0].max_response_mb: want 1 to 64 (MiB), or leave it out for the default 8, not 100`}},
		{name: "places per session", sets: []string{"sessions.max_bindings=0"},
			want: []string{`sessions.max_bindings: must be at least 1`}},
		{name: "live sessions", sets: []string{"sessions.max_live=-1"},
			want: []string{`sessions.max_live: must be 0 (no bound) or more`}},
		{name: "postgres without a database", sets: []string{"storage.dsn=postgres://gw@db.internal:5432"},
			want: []string{`storage.dsn: want postgres://user@host:5432/database`}},
		{name: "lease", sets: []string{"storage.lease=100ms"},
			want: []string{`storage.lease: want 1s to 5m (how long a dead replica's conversations wait for another), not 100ms`}},
		{name: "retention", sets: []string{"storage.retention=-1h"},
			want: []string{`storage.retention: must be 0 (keep everything) or a duration`}},
		{name: "log", file: "log: {level: loud, format: xml}\n",
			want: []string{`log.level: want debug, info, warn or error, not "loud"`, `log.format: want text or json, not "xml"`}},
		{name: "telemetry", file: "telemetry: {protocol: http/json, endpoint: 'collector:4318', sampler: 1.5, trace_log: {max_size_mb: 0, max_files: 0}}\n",
			want: []string{`telemetry.protocol: want http/protobuf or grpc, not "http/json"`, `telemetry.endpoint: want the OTLP endpoint's URL`,
				`telemetry.sampler: want the share of turns traced, from 0 to 1, not 1.5`, `telemetry.trace_log.max_size_mb: must be positive`,
				`telemetry.trace_log.max_files: must be 1 or more`}},
		{name: "telemetry key", file: "telemetry:\n  sample_ratio: 0.5\n",
			want: []string{`telemetry.sample_ratio`}},
		{name: "twice in file", file: "http:\n  addr: a:1\n  addr: b:2\n",
			want: []string{`http.addr: set twice`, ":3)"}},
		{name: "yaml syntax", file: "http:\n  addr: [\n",
			want: []string{`invalid YAML`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file)
			}
			wantErr(t, file, tc.sets, tc.environ, tc.want...)
		})
	}
}

func TestStdinAcceptsYAMLBools(t *testing.T) {
	for body, want := range map[string]string{
		"listeners:\n  stdin: { enabled: true }\n":    "true",
		"listeners:\n  stdin: { enabled: false }\n":   "false",
		"listeners:\n  stdin: { enabled: auto }\n":    "auto",
		"listeners:\n  stdin: { enabled: True }\n":    "true",
		"listeners:\n  stdin: { enabled: \"\" }\n":    "auto",
		"listeners:\n  stdin:\n  slack:\n    mode:\n": "auto",
	} {
		c := mustLoad(t, writeFile(t, body), nil, nil)
		if c.Listeners.Stdin.Enabled != want || c.Listeners.Slack.Mode != "socket" {
			t.Errorf("%q: stdin %q, slack mode %q", body, c.Listeners.Stdin.Enabled, c.Listeners.Slack.Mode)
		}
	}
	c := mustLoad(t, "", []string{"listeners.stdin.enabled=true"}, nil)
	if c.Listeners.Stdin.Enabled != "true" {
		t.Errorf("--set: %q", c.Listeners.Stdin.Enabled)
	}
}

func TestSetValuesAreYAML(t *testing.T) {
	c := mustLoad(t, "", []string{
		`storage.dsn="quoted.db"`,
		"guides.dir=/tmp/some dir/guides",
		"listeners.discord.application_id=0123",
		"listeners.slack.bot_token=a: b",
		"listeners.websocket={enabled: false}",
	}, nil)
	if c.Storage.DSN != "quoted.db" || c.Guides.Dir != "/tmp/some dir/guides" {
		t.Errorf("storage/guides: %+v %+v", c.Storage, c.Guides)
	}
	if c.Listeners.Discord.ApplicationID != "0123" || c.Listeners.Slack.BotToken != "a: b" {
		t.Errorf("text values must stay as written: %+v", c.Listeners)
	}
	if c.Listeners.WebSocket.Enabled {
		t.Errorf("a mapping value: %+v", c.Listeners.WebSocket)
	}
}

func TestShippedConfig(t *testing.T) {
	c := mustLoad(t, "../config.yaml", nil, nil)
	// Its paths are beside it (make run: the repository's root).
	if c.HTTP.Addr != "127.0.0.1:8080" || c.Storage.DSN != filepath.Join("..", "data", "switchboard.db") || c.Guides.Dir != filepath.Join("..", "guides") || c.Guides.Default != "assistant" {
		t.Errorf("config.yaml: %+v", c)
	}
	if len(c.Providers) != 1 {
		t.Fatalf("providers: %+v", c.Providers)
	}
	if p := c.Providers[0]; p.Name != "main" || p.Kind != "openai" || p.Model != "gpt-4o-mini" || p.APIKeyEnv != "OPENAI_API_KEY" || p.APIKey != "" {
		t.Errorf("providers[0]: %+v", p)
	}
	l := c.Listeners
	if !l.WebSocket.Enabled || l.Stdin.Enabled != "auto" || l.Slack.Enabled || l.Discord.Enabled {
		t.Errorf("listeners: %+v", l)
	}

	// The commented provider examples must be valid once uncommented.
	data, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	uncommented := regexp.MustCompile(`(?m)^  # `).ReplaceAllString(string(data), "  ")
	c = mustLoad(t, writeFile(t, uncommented), nil, nil)
	var kinds []string
	for _, p := range c.Providers {
		kinds = append(kinds, p.Kind+"/"+p.Model)
	}
	if got := strings.Join(kinds, " "); got != "openai/gpt-4o-mini anthropic/claude-sonnet-4-5 gemini/gemini-2.5-flash ollama/llama3.2" {
		t.Errorf("uncommented examples: %s", got)
	}
}

func TestInviteBase(t *testing.T) {
	for _, c := range []struct {
		h    HTTP
		want string
	}{
		{HTTP{Addr: "127.0.0.1:8080"}, "http://127.0.0.1:8080"},
		{HTTP{Addr: ":8080"}, "http://localhost:8080"},
		{HTTP{Addr: "0.0.0.0:9000"}, "http://localhost:9000"},
		{HTTP{Addr: "[::]:9000"}, "http://localhost:9000"},
		{HTTP{Addr: "[::1]:9000"}, "http://[::1]:9000"},
		{HTTP{Addr: "0.0.0.0:9000", PublicURL: "https://chat.example.com/"}, "https://chat.example.com"},
	} {
		if got := c.h.InviteBase(); got != c.want {
			t.Errorf("%+v: InviteBase = %q, want %q", c.h, got, c.want)
		}
	}
}

func TestToolsSection(t *testing.T) {
	c := mustLoad(t, writeFile(t, `tools:
  sandbox: { enabled: true, memory_mb: 512 }
  mcp:
    - name: github
      command: [github-mcp-server, stdio]
      env: { GITHUB_PERSONAL_ACCESS_TOKEN: "${GH_TOKEN}" }
    - name: docs
      url: https://docs.example.com/mcp
      headers: { Authorization: "Bearer ${DOCS_TOKEN}" }
      max_response_mb: 16
`), nil, nil)
	sb := c.Tools.Sandbox
	if !sb.Enabled || sb.MemoryMB != 512 || sb.CPU != Duration(10*time.Second) || sb.QuotaMB != 100 || sb.Python != "/usr/bin/python3" {
		t.Errorf("sandbox = %+v; want enabled, 512 MB and the other defaults", sb)
	}
	if len(c.Tools.MCP) != 2 || c.Tools.MCP[0].Command[1] != "stdio" || c.Tools.MCP[0].Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${GH_TOKEN}" ||
		c.Tools.MCP[1].Headers["Authorization"] != "Bearer ${DOCS_TOKEN}" || c.Tools.MCP[0].MaxResponseMB != 0 || c.Tools.MCP[1].MaxResponseMB != 16 {
		t.Errorf("mcp = %+v", c.Tools.MCP)
	}
}

// embeddings: off while its provider is empty; on, it names a provider
// that can embed, with a default model for its kind; bad values are
// refused with their key.
func TestEmbeddings(t *testing.T) {
	c := mustLoad(t, "", nil, nil)
	want := Embeddings{CacheMB: 256, MinSimilarity: 0.3, Timeout: Duration(10 * time.Second)}
	if c.Embeddings != want {
		t.Errorf("defaults: %+v, want %+v", c.Embeddings, want)
	}
	if _, _, ok := c.EmbeddingProvider(); ok {
		t.Error("on without a provider")
	}
	file := writeFile(t, `
providers:
  - {name: main, kind: openai, model: gpt-4o-mini}
  - {name: claude, kind: anthropic, model: claude-sonnet-4-5}
  - {name: gem, kind: gemini, model: gemini-2.5-flash}
  - {name: local, kind: ollama, model: llama3.2}
  - {name: offline, kind: demo}
embeddings:
  provider: main
  dimensions: 512
  min_similarity: 0.25
`)
	c = mustLoad(t, file, nil, nil)
	if e := c.Embeddings; e.Provider != "main" || e.Model != "text-embedding-3-small" || e.Dimensions != 512 || e.MinSimilarity != 0.25 || e.CacheMB != 256 {
		t.Errorf("embeddings: %+v", e)
	}
	if p, i, ok := c.EmbeddingProvider(); !ok || i != 0 || p.Kind != "openai" {
		t.Errorf("EmbeddingProvider = %+v %d %v", p, i, ok)
	}
	c = mustLoad(t, file, nil, []string{"SWITCHBOARD_EMBEDDINGS__PROVIDER=gem", "SWITCHBOARD_EMBEDDINGS__MIN_SIMILARITY=0.6"})
	if e := c.Embeddings; e.Model != "gemini-embedding-001" || e.MinSimilarity != 0.6 {
		t.Errorf("from the environment: %+v", e)
	}
	c = mustLoad(t, file, []string{"embeddings.provider=local", "embeddings.model=nomic-embed-text"}, nil)
	if e := c.Embeddings; e.Model != "nomic-embed-text" {
		t.Errorf("ollama: %+v", e)
	}

	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"embeddings.provider=nope"}, `embeddings.provider: no provider is named "nope" (have: main, claude, gem, local, offline)`},
		{[]string{"embeddings.provider=claude"}, `embeddings.provider: "claude" (providers[1]) is an anthropic provider, and Anthropic has no embeddings API`},
		{[]string{"embeddings.provider=offline"}, `"offline" (providers[4]) is the offline demo model, which makes no embeddings`},
		{[]string{"embeddings.provider=local"}, `embeddings.model: name the embedding model "local" serves, e.g. nomic-embed-text`},
		{[]string{"embeddings.dimensions=-1"}, `embeddings.dimensions: want 0 (the model's own) or a length up to 8192, not -1`},
		{[]string{"embeddings.dimensions=10000"}, `embeddings.dimensions: want 0`},
		{[]string{"embeddings.cache_mb=-1"}, `embeddings.cache_mb: want the MiB of vectors held in memory (0 holds none), not -1`},
		{[]string{"embeddings.min_similarity=2"}, `embeddings.min_similarity: want a cosine similarity from -1 to 1, not 2`},
		{[]string{"embeddings.min_similarity=high"}, `embeddings.min_similarity: want a number, not "high"`},
		{[]string{"embeddings.timeout=0s"}, `embeddings.timeout: must be positive`},
	} {
		wantErr(t, file, tc.sets, nil, tc.want)
	}
	// Off, the rest is not checked: a provider of the file turned off
	// from the environment leaves its settings alone.
	mustLoad(t, file, []string{"embeddings.provider=", "embeddings.dimensions=-1"}, nil)
}

// The commented embeddings example of config.yaml is valid once
// uncommented.
func TestShippedEmbeddingsExample(t *testing.T) {
	example := commentedExample(t, "embeddings")
	c := mustLoad(t, writeFile(t, "providers:\n  - {name: main, kind: openai, model: gpt-4o-mini}\n"+example+"\n"), nil, nil)
	if e := c.Embeddings; e.Provider != "main" || e.Model != "text-embedding-3-small" || e.CacheMB == 0 {
		t.Errorf("the example: %+v", e)
	}
}

// Files from people: on by default, with the documented bounds; a
// provider has vision unless it says otherwise; the Slack and Discord
// downloads give up after 30 s of nothing.
func TestUploads(t *testing.T) {
	file := writeFile(t, `
providers:
  - {name: main, kind: openai, api_key: sk-x}
  - {name: local, kind: openai, base_url: "http://127.0.0.1:11434/v1", api_key: x, model: llama3, vision: false}
`)
	c := mustLoad(t, file, nil, nil)
	if u := c.Uploads; !u.Enabled || u.MaxFileMB != 20 || u.MaxMessageMB != 50 || u.MaxFiles != 10 || len(u.Types) != 0 {
		t.Errorf("uploads defaults: %+v", u)
	}
	if !c.Providers[0].Vision || c.Providers[1].Vision {
		t.Errorf("vision: main %v, local %v", c.Providers[0].Vision, c.Providers[1].Vision)
	}
	if c.Listeners.Slack.DownloadTimeout != Duration(30*time.Second) || c.Listeners.Discord.DownloadTimeout != Duration(30*time.Second) {
		t.Errorf("download timeouts: %v, %v", c.Listeners.Slack.DownloadTimeout, c.Listeners.Discord.DownloadTimeout)
	}
	c = mustLoad(t, file, []string{"uploads.types=[text/csv, image/*]", "uploads.max_file_mb=5"}, []string{"SWITCHBOARD_UPLOADS__ENABLED=false"})
	if u := c.Uploads; u.Enabled || u.MaxFileMB != 5 || len(u.Types) != 2 || u.Types[1] != "image/*" {
		t.Errorf("uploads set: %+v", u)
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"uploads.max_file_mb=0"}, `uploads.max_file_mb: must be at least 1`},
		{[]string{"uploads.max_message_mb=10"}, `uploads.max_message_mb: is 10, under max_file_mb (20): one file could never be sent`},
		{[]string{"uploads.types=[csv]"}, `uploads.types[0]: want a media type such as text/csv, or a family such as text/*, not "csv"`},
		{[]string{"listeners.slack.download_timeout=0s"}, `listeners.slack.download_timeout: must be at least 1s`},
		{[]string{"providers.0.vision=maybe"}, `vision`},
	} {
		wantErr(t, file, tc.sets, nil, tc.want)
	}
}

// Telemetry is off by default; the commented example of config.yaml is
// valid once uncommented, and its trace log path is the file's folder's.
func TestTelemetry(t *testing.T) {
	c := mustLoad(t, "", nil, nil)
	want := Telemetry{Protocol: "http/protobuf", ServiceName: "switchboard", Sampler: 1, TraceLog: TraceLog{MaxSizeMB: 100, MaxFiles: 5}}
	if c.Telemetry.Endpoint != "" || c.Telemetry.TraceLog.Path != "" || c.Telemetry.Protocol != want.Protocol ||
		c.Telemetry.ServiceName != want.ServiceName || c.Telemetry.Sampler != 1 || c.Telemetry.TraceLog != want.TraceLog || c.Telemetry.CaptureContent {
		t.Errorf("defaults: %+v, want %+v", c.Telemetry, want)
	}
	file := writeFile(t, commentedExample(t, "telemetry")+"\n")
	c = mustLoad(t, file, nil, nil)
	tm := c.Telemetry
	if tm.Endpoint != "http://127.0.0.1:4318" || tm.Protocol != "http/protobuf" || tm.Sampler != 1 || tm.CaptureContent ||
		tm.TraceLog.Path != filepath.Join(filepath.Dir(file), "data", "trace.jsonl") || tm.TraceLog.MaxFiles != 5 {
		t.Errorf("the example: %+v", tm)
	}
}

// commentedExample is the commented example of a section in config.yaml
// ("# section:" and its "#   " lines), uncommented.
func commentedExample(t *testing.T, section string) string {
	t.Helper()
	data, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n# "+section+":")
	if !ok {
		t.Fatalf("config.yaml has no commented %s example", section)
	}
	example := section + ":"
	for _, line := range strings.Split(rest, "\n")[1:] {
		body, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			break
		}
		example += "\n  " + body
	}
	return example
}

func TestOpenAIListener(t *testing.T) {
	c := mustLoad(t, "", nil, nil)
	if o := c.Listeners.OpenAI; o.Enabled || o.RequestsPerMinute != 60 || o.MaxBodyBytes != 1<<20 {
		t.Errorf("defaults: %+v (want off, 60 a minute, 1 MiB)", o)
	}
	c = mustLoad(t, writeFile(t, `
listeners:
  openai:
    enabled: true
    keys:
      - { name: ci, key_env: CI_KEY, guides: [support] }
      - { name: webui, key_env: WEBUI_KEY, role: viewer }
`), nil, nil)
	if k := c.Listeners.OpenAI.Keys; len(k) != 2 || k[0].Name != "ci" || k[0].Guides[0] != "support" || k[1].Role != "viewer" {
		t.Errorf("keys: %+v", k)
	}
	if s := c.Listeners.OpenAI.Keys[0].Secret([]string{"CI_KEY=abc"}); s != "abc" {
		t.Errorf("secret: %q", s)
	}
	wantErr(t, writeFile(t, "listeners:\n  openai:\n    enabled: true\n"), nil, nil, "listeners.openai.keys", "at least one key")
	wantErr(t, writeFile(t, `
listeners:
  openai:
    keys:
      - { name: ci, key_env: A, role: owner }
      - { name: ci }
`), nil, nil, "listeners.openai.keys[0].role", "want member, approver or viewer", "listeners.openai.keys[1].name", "names another key", "listeners.openai.keys[1].key_env")
	wantErr(t, writeFile(t, "listeners:\n  openai:\n    keys: [{ name: ci, key_env: A, token: x }]\n"), nil, nil, "token")
}

func TestRouting(t *testing.T) {
	c := mustLoad(t, "", nil, nil)
	if r := c.Routing; len(r.Rules) != 0 || r.Router != "" || time.Duration(r.RouterTimeout) != 3*time.Second {
		t.Errorf("defaults: %+v (want no rules, no router, 3s)", r)
	}
	c = mustLoad(t, writeFile(t, `
routing:
  rules:
    - { guide: finance, channel: slack, place: C0FINANCE }
    - { guide: billing, match: '(?i)refund' }
    - { guide: support, keywords: [broken, error] }
  router: router
  candidates: [billing, support]
  router_timeout: 2s
`), nil, nil)
	r := c.Routing
	if len(r.Rules) != 3 || r.Rules[0].Place != "C0FINANCE" || r.Rules[2].Keywords[1] != "error" || r.Router != "router" || time.Duration(r.RouterTimeout) != 2*time.Second {
		t.Errorf("routing: %+v", r)
	}
	wantErr(t, writeFile(t, `
routing:
  rules:
    - { channel: teams }
    - { guide: a, match: '(' }
  candidates: [a]
  router_timeout: 10ms
`), nil, nil, "routing.rules[0].guide", "routing.rules[0].channel", "want one of slack", "routing.rules[1].match", "routing.router_timeout", "routing.candidates")
}
