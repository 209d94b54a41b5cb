// Package config loads the gateway's configuration (CONTRACT §2): built-in
// defaults, then a YAML file, then SWITCHBOARD_* environment variables, then
// --set key=value flags, each overriding the one before.
//
// Every key from every source is checked against the Config struct before it
// is merged, so a typo stops start-up with the key and where it came from
// instead of being silently ignored.
package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// Config is the whole configuration. The koanf tags are the YAML keys.
type Config struct {
	HTTP      HTTP       `koanf:"http"`
	Storage   Storage    `koanf:"storage"`
	Providers []Provider `koanf:"providers"`
	Guides    Guides     `koanf:"guides"`
	Listeners Listeners  `koanf:"listeners"`
	Sessions  Sessions   `koanf:"sessions"`
	Metrics   Metrics    `koanf:"metrics"`
	Log       Log        `koanf:"log"`
	Tools     Tools      `koanf:"tools"`
	// Embeddings turns on semantic recall; off while its provider is
	// empty.
	Embeddings Embeddings `koanf:"embeddings"`
	// Uploads bounds the files people send with their messages.
	Uploads Uploads `koanf:"uploads"`
	// Pricing and Budgets: what turns cost and may spend (spend.go).
	Pricing []Price  `koanf:"pricing"`
	Budgets []Budget `koanf:"budgets"`
	// Telemetry: OpenTelemetry traces and the trace log (docs/telemetry.md).
	Telemetry Telemetry `koanf:"telemetry"`
	// Routing chooses the guide of a new conversation (docs/routing.md).
	Routing Routing `koanf:"routing"`
}

// Routing chooses the guide of a new conversation: the first rule that
// matches, else the router's pick, else guides.default.
type Routing struct {
	Rules []RoutingRule `koanf:"rules"`
	// Router names a guide whose model picks among Candidates (all
	// guides when empty) by their descriptions, when no rule matched;
	// empty: no router.
	Router     string   `koanf:"router"`
	Candidates []string `koanf:"candidates"`
	// RouterTimeout bounds the router's answer; past it, guides.default.
	RouterTimeout Duration `koanf:"router_timeout"`
}

// RoutingRule chooses Guide when every condition it sets holds.
type RoutingRule struct {
	Guide string `koanf:"guide"`
	// Channel: slack, discord, web, stdin or openai.
	Channel string `koanf:"channel"`
	// Place: a Slack channel (or workspace) id, a Discord server or
	// channel id.
	Place string `koanf:"place"`
	// Person: an author's key, "slack:U123", "discord:4242".
	Person string `koanf:"person"`
	// Keywords: one of them is a word of the first message.
	Keywords []string `koanf:"keywords"`
	// Match: a regular expression the first message matches.
	Match string `koanf:"match"`
}

// RoutingChannels are the channels a routing rule may name.
var routingChannels = []string{"slack", "discord", "web", "stdin", "openai"}

// Telemetry sends OpenTelemetry traces of every turn to an OTLP endpoint
// and writes the trace log. The standard OTEL_ environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER…) win over these keys. Off while
// neither an endpoint nor the trace log is set.
type Telemetry struct {
	// Endpoint is the OTLP endpoint's base URL, as
	// OTEL_EXPORTER_OTLP_ENDPOINT takes it: http://collector:4318 for
	// http/protobuf (/v1/traces is added), http://collector:4317 for grpc.
	Endpoint string `koanf:"endpoint"`
	// Protocol is http/protobuf (the default) or grpc.
	Protocol string `koanf:"protocol"`
	// Headers are sent with every export (an API key of a hosted backend).
	Headers map[string]string `koanf:"headers"`
	// ServiceName is the service.name of the spans (default switchboard).
	ServiceName string `koanf:"service_name"`
	// Sampler is the share of turns traced, 0 to 1 (parent-based, by trace
	// id).
	Sampler float64 `koanf:"sampler"`
	// CaptureContent records messages, tool arguments and results in the
	// spans and the trace log; off, only their sizes and names.
	CaptureContent bool     `koanf:"capture_content"`
	TraceLog       TraceLog `koanf:"trace_log"`
}

// TraceLog is the JSON-lines log of every agent step, rotated by size.
type TraceLog struct {
	// Path is the file; empty: no trace log.
	Path string `koanf:"path"`
	// MaxSizeMB rotates the file when it would pass this size.
	MaxSizeMB int `koanf:"max_size_mb"`
	// MaxFiles is how many rotated files are kept beside the current one.
	MaxFiles int `koanf:"max_files"`
}

// Uploads are the files people send with a message, in every channel
// (docs/operating.md, "Files from people"): saved in the conversation's
// workspace (under tools.sandbox.dir, within its quota_mb), whether or not
// the python tool is enabled, and told to the model; pictures are shown
// to models with vision.
type Uploads struct {
	// Enabled: people may send files. Off, a message with files is refused
	// with the reason.
	Enabled      bool `koanf:"enabled"`
	MaxFileMB    int  `koanf:"max_file_mb"`
	MaxMessageMB int  `koanf:"max_message_mb"`
	MaxFiles     int  `koanf:"max_files"`
	// Types are the media types taken, as a file's bytes show them
	// ("text/*" takes a family); empty: pictures, text, JSON, PDF and zip
	// containers (.xlsx, .docx).
	Types []string `koanf:"types"`
}

// Embeddings is semantic recall (docs/operating.md, "Semantic recall"):
// every person's and the assistant's message gets a vector from an
// embedding model, and memory_search and memory.recall merge the messages
// nearest a question in meaning with the full-text matches. Off while
// Provider is empty: recall is full-text alone then.
type Embeddings struct {
	// Provider names a configured provider (of kind openai, gemini or
	// ollama) whose endpoint and key make the vectors.
	Provider string `koanf:"provider"`
	// Model is the embedding model; empty: text-embedding-3-small for
	// openai, gemini-embedding-001 for gemini (ollama has no default).
	Model string `koanf:"model"`
	// Dimensions asks the model for vectors that long (models that can
	// shorten theirs: text-embedding-3-*, gemini-embedding-001); 0 takes
	// the model's own.
	Dimensions int `koanf:"dimensions"`
	// CacheMB bounds the vectors held in memory between searches, in MiB;
	// 0 holds none (each search reads its conversations' from the
	// database).
	CacheMB int `koanf:"cache_mb"`
	// MinSimilarity is the cosine similarity a message needs to count as
	// near a question (-1 to 1; it depends on the model).
	MinSimilarity float64 `koanf:"min_similarity"`
	// Timeout bounds one embedding request; a question not embedded in
	// time is searched full-text alone.
	Timeout Duration `koanf:"timeout"`
}

// DefaultEmbeddingModel is the embedding model taken when
// embeddings.model is empty, by provider kind ("" for ollama: a local
// server has the models pulled into it).
func DefaultEmbeddingModel(kind string) string {
	switch kind {
	case KindOpenAI:
		return "text-embedding-3-small"
	case KindGemini:
		return "gemini-embedding-001"
	}
	return ""
}

// MaxEmbeddingDimensions bounds embeddings.dimensions (the largest models
// make 3,072).
const MaxEmbeddingDimensions = 8192

// EmbeddingProvider is the provider embeddings.provider names, and
// whether there is one.
func (c Config) EmbeddingProvider() (Provider, int, bool) {
	if c.Embeddings.Provider == "" {
		return Provider{}, -1, false
	}
	for i, p := range c.Providers {
		if p.Name == c.Embeddings.Provider {
			return p, i, true
		}
	}
	return Provider{}, -1, false
}

// Tools configures the tools that reach beyond the gateway: the sandboxed
// Python interpreter and MCP servers (docs/sandbox.md, docs/mcp.md).
type Tools struct {
	Sandbox Sandbox     `koanf:"sandbox"`
	MCP     []MCPServer `koanf:"mcp"`
}

// Sandbox is the python and sandbox_fs_* tools: code runs under
// bubblewrap with no network, a read-only root and these limits.
type Sandbox struct {
	Enabled bool `koanf:"enabled"`
	// Dir holds a workspace per session; empty: "sandbox" beside the
	// database.
	Dir         string   `koanf:"dir"`
	Python      string   `koanf:"python"`
	Bwrap       string   `koanf:"bwrap"`
	Timeout     Duration `koanf:"timeout"`
	CPU         Duration `koanf:"cpu"`
	MemoryMB    int      `koanf:"memory_mb"`
	MaxFiles    int      `koanf:"max_files"`
	FileSizeMB  int      `koanf:"file_size_mb"`
	MaxProcs    int      `koanf:"max_procs"`
	OutputKB    int      `koanf:"output_kb"`
	QuotaMB     int      `koanf:"quota_mb"`
	TmpMB       int      `koanf:"tmp_mb"`
	Concurrency int      `koanf:"concurrency"`
	Wheelhouse  string   `koanf:"wheelhouse"`
}

// MCPServer is one MCP server: a program spoken to over stdio (Command)
// or a Streamable HTTP endpoint (URL). Env and Headers values may name the
// gateway's variables as ${VAR}. MaxResponseMB bounds each message the
// server sends, in MiB (1-64; 0 is the default, 8).
type MCPServer struct {
	Name          string            `koanf:"name"`
	Command       []string          `koanf:"command"`
	Env           map[string]string `koanf:"env"`
	URL           string            `koanf:"url"`
	Headers       map[string]string `koanf:"headers"`
	MaxResponseMB int               `koanf:"max_response_mb"`
}

// HTTP is the server of the web widget, /ws and /healthz.
type HTTP struct {
	Addr string `koanf:"addr"`
	// PublicURL is the origin the gateway is reached at from outside
	// ("https://chat.example.com"), if any. With auth mode none, requests
	// are served only for a loopback Host or this URL's host (DNS
	// rebinding); its origin is the gateway's own for /ws and images, and
	// invite links (/share) point at it. Empty: the links use Addr
	// (InviteBase).
	PublicURL string `koanf:"public_url"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout Duration `koanf:"idle_timeout"`
	// ReadTimeout bounds reading one request, headers and body. A
	// WebSocket, once upgraded, has its own deadlines.
	ReadTimeout Duration `koanf:"read_timeout"`
}

// Metrics is the Prometheus endpoint, on a listener of its own so that
// whoever may chat cannot read it.
type Metrics struct {
	// Addr serves GET /metrics; empty turns it off.
	Addr string `koanf:"addr"`
}

// Storage is the database: an SQLite file (the default), or PostgreSQL,
// which several replicas of the gateway can share (docs/operating.md,
// "Replicas").
type Storage struct {
	// DSN is a file path, ":memory:" for a throwaway database, or a
	// PostgreSQL URL (postgres://user@host/db?sslmode=...).
	DSN string `koanf:"dsn"`
	// Lease is how long a replica's hold on a conversation lasts without
	// being renewed (PostgreSQL only): a replica that dies leaves its
	// conversations to the others within about this long. It is renewed
	// every third of it.
	Lease Duration `koanf:"lease"`
	// Replica names this gateway among the replicas (gateway doctor and
	// the log show it); empty: the host name and a random suffix, new at
	// every start.
	Replica string `koanf:"replica"`
	// DataDir is where files are kept beside the database: the pictures
	// the model made, what people upload, the sandbox's workspaces.
	// Empty: the SQLite file's folder, or with PostgreSQL the folder
	// "data" in the working directory. Replicas that keep files share it (a network
	// file system), or a conversation's files stay on one machine.
	DataDir string `koanf:"data_dir"`
	// Retention deletes sessions whose last turn ended longer ago than
	// this, with everything they hold; 0 keeps them.
	Retention Duration `koanf:"retention"`
}

// Guides says where the personas are and which one new sessions get.
type Guides struct {
	Dir     string `koanf:"dir"`
	Default string `koanf:"default"`
}

// Log configures the slog handler.
type Log struct {
	Level  string `koanf:"level"`  // debug | info | warn | error
	Format string `koanf:"format"` // text | json
}

// Provider kinds.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
	KindGemini    = "gemini"
	KindOllama    = "ollama"
	KindDemo      = "demo"
)

// roles are collaboration's role names, repeated here so config stays a
// leaf package.
var roles = []string{"owner", "approver", "member", "viewer"}

var kinds = []string{KindOpenAI, KindAnthropic, KindGemini, KindOllama, KindDemo}

// Provider is one configured model endpoint; guides name it by Name.
type Provider struct {
	Name string `koanf:"name"`
	Kind string `koanf:"kind"`
	// BaseURL is as the vendor's SDK takes it: OpenAI's ends in /v1,
	// Anthropic's and Gemini's are the host root. Empty: the vendor's own.
	BaseURL   string `koanf:"base_url"`
	APIKey    string `koanf:"api_key"`
	APIKeyEnv string `koanf:"api_key_env"`
	Model     string `koanf:"model"`
	// Timeout is the idle time allowed between two stream chunks, not a
	// bound on the whole response: a long answer that keeps coming is fine.
	Timeout    Duration `koanf:"timeout"`
	MaxRetries int      `koanf:"max_retries"`
	// Fallback "demo": without a key, the offline demo model answers for
	// this provider (a newcomer's make run). Empty: a provider without its
	// key stops the gateway from starting, naming the variable.
	Fallback string `koanf:"fallback"`
	// ContextWindow is the model's context window in tokens; 0: the
	// known window of the model's family (providers.ContextWindow), or
	// none known.
	ContextWindow int `koanf:"context_window"`
	// Vision: the model takes pictures (the files people send) as input;
	// false gives it what the message says of them alone (a text-only
	// model behind an OpenAI-compatible server). Default true.
	Vision bool `koanf:"vision"`
}

// FallbackDemo is Provider.Fallback's one value.
const FallbackDemo = "demo"

// Key returns the provider's API key and where it came from ("api_key" or
// "env NAME"), so start-up messages can say which setting is in use without
// printing the key. With no key, source names the variable that was looked
// at, or is empty when the provider has neither setting. The environment
// is passed in, as to Load, so tests stay hermetic.
func (p Provider) Key(environ []string) (key, source string) {
	if p.APIKey != "" {
		return p.APIKey, "api_key"
	}
	if p.APIKeyEnv == "" {
		return "", ""
	}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == p.APIKeyEnv {
			return v, "env " + p.APIKeyEnv
		}
	}
	return "", "env " + p.APIKeyEnv
}

// Listeners are the channels the gateway serves.
type Listeners struct {
	WebSocket WebSocket `koanf:"websocket"`
	Stdin     Stdin     `koanf:"stdin"`
	Slack     Slack     `koanf:"slack"`
	Discord   Discord   `koanf:"discord"`
	OpenAI    OpenAI    `koanf:"openai"`
}

// OpenAI is the OpenAI-compatible API under /v1 of the HTTP server
// (docs/openai-api.md): guides as models, for any OpenAI client.
type OpenAI struct {
	Enabled bool `koanf:"enabled"`
	// Keys are the API keys accepted; a request without one of them is
	// refused.
	Keys []OpenAIKey `koanf:"keys"`
	// RequestsPerMinute bounds each key's requests (a burst of as many).
	RequestsPerMinute int `koanf:"requests_per_minute"`
	// MaxBodyBytes bounds a request's body.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// ApprovalTimeout bounds how long a request's turn waits for someone
	// to answer a guide's approval request; then the model is told the
	// tool was not approved.
	ApprovalTimeout Duration `koanf:"approval_timeout"`
}

// OpenAIKey is one API key of the OpenAI-compatible API: who uses it and
// which guides it may use.
type OpenAIKey struct {
	// Name is who the key stands for: the user of its sessions, and
	// what the logs say (never the key).
	Name string `koanf:"name"`
	// KeyEnv is the environment variable holding the key.
	KeyEnv string `koanf:"key_env"`
	// Role: member (default); approver (answers its own turns' approval
	// requests, approved); viewer (may list the models only).
	Role string `koanf:"role"`
	// Guides are the guides (models) the key may use; empty: all.
	Guides []string `koanf:"guides"`
}

// Secret returns the key's value from KeyEnv in environ.
func (k OpenAIKey) Secret(environ []string) string { return lookup(environ, k.KeyEnv) }

// MinOpenAIKey is the shortest API key accepted (checked at start-up,
// when the environment is read).
const MinOpenAIKey = 20

// WebSocket is the /ws endpoint of the HTTP server and the web widget.
type WebSocket struct {
	Enabled bool `koanf:"enabled"`
	// AllowedOrigins are the pages on other origins that may open /ws
	// ("https://shop.example"). The gateway's own origin and loopback pages
	// are always allowed; so are programs, which send no Origin.
	AllowedOrigins []string `koanf:"allowed_origins"`
	// ReadLimit is the largest client frame in bytes; a bigger one closes
	// the connection with 1009.
	ReadLimit int64 `koanf:"read_limit"`
	// SendBuffer is how many events may wait for one slow client before it
	// is disconnected (it resumes where it left off).
	SendBuffer int `koanf:"send_buffer"`
	// SendBufferBytes bounds the same queue by bytes: a client with this
	// much waiting is as slow as one with send_buffer frames.
	SendBufferBytes int `koanf:"send_buffer_bytes"`
	// MaxConnsPerIP bounds the connections one client address may hold
	// open; NewSessionsPerIP, the sessions it may start a minute. -1: no
	// bound (behind a proxy every client has the proxy's address).
	MaxConnsPerIP    int `koanf:"max_conns_per_ip"`
	NewSessionsPerIP int `koanf:"new_sessions_per_ip"`
	// ImageHosts are the hosts ("images.example.com", "*.cdn.example",
	// "host:port") whose images the model's output may show inline;
	// others are shown as links. The gateway's own origin and data: images
	// are always allowed.
	ImageHosts []string      `koanf:"image_hosts"`
	Auth       WebSocketAuth `koanf:"auth"`
}

// WebSocket auth modes.
const (
	AuthNone  = "none"  // anyone who can reach /ws; loopback only by default
	AuthToken = "token" // static bearer tokens, one per user or service
	AuthJWT   = "jwt"   // HS256 user tokens minted by the site's backend
)

// MinJWTSecret is the shortest HS256 secret accepted, from the file or
// from the environment (checked at start-up, when the variable is read).
const MinJWTSecret = 32

// WebSocketAuth says who may connect to /ws.
type WebSocketAuth struct {
	Mode         string        `koanf:"mode"`
	Tokens       []StaticToken `koanf:"tokens"`
	JWTSecret    string        `koanf:"jwt_secret"`
	JWTSecretEnv string        `koanf:"jwt_secret_env"`
	// AllowUnauthenticated lets mode none serve a non-loopback http.addr.
	// Without it the gateway refuses to start that way.
	AllowUnauthenticated bool `koanf:"allow_unauthenticated"`
}

// StaticToken is one accepted token and the user it stands for.
type StaticToken struct {
	Token    string `koanf:"token"`
	TokenEnv string `koanf:"token_env"`
	User     string `koanf:"user"`
	Name     string `koanf:"name"`
	Role     string `koanf:"role"` // owner | approver | member | viewer; default member
}

// Secret returns the token's value from Token or TokenEnv in environ.
func (t StaticToken) Secret(environ []string) string {
	if t.Token != "" {
		return t.Token
	}
	return lookup(environ, t.TokenEnv)
}

// Secret returns the JWT secret from JWTSecret or JWTSecretEnv in environ.
func (a WebSocketAuth) Secret(environ []string) string {
	if a.JWTSecret != "" {
		return a.JWTSecret
	}
	return lookup(environ, a.JWTSecretEnv)
}

func lookup(environ []string, name string) string {
	if name == "" {
		return ""
	}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// Stdin modes.
const (
	StdinAuto  = "auto"  // a terminal, a pipe or a file; not /dev/null or a closed stdin
	StdinTrue  = "true"  // any standard input
	StdinFalse = "false" // never
)

// Stdin is the terminal listener. Enabled is a word rather than a bool
// because of "auto"; YAML's true and false are accepted as well.
type Stdin struct {
	Enabled string `koanf:"enabled"`
}

// Slack modes.
const (
	SlackSocket = "socket" // Socket Mode: no public URL needed
	SlackHTTP   = "http"   // Events API and interactivity over HTTP
)

// Default API base URLs, used when api_url is empty.
const (
	DefaultSlackAPIURL   = "https://slack.com/api/"
	DefaultDiscordAPIURL = "https://discord.com/api/v10/"
)

// Slack is the Slack listener. Each secret can be given directly or as the
// name of an environment variable (the *Env fields).
type Slack struct {
	Enabled          bool   `koanf:"enabled"`
	Mode             string `koanf:"mode"`
	AppToken         string `koanf:"app_token"`
	AppTokenEnv      string `koanf:"app_token_env"`
	BotToken         string `koanf:"bot_token"`
	BotTokenEnv      string `koanf:"bot_token_env"`
	SigningSecret    string `koanf:"signing_secret"`
	SigningSecretEnv string `koanf:"signing_secret_env"`
	APIURL           string `koanf:"api_url"`
	// AllowedChannels and AllowedUsers limit who may talk to the bot
	// (channel and user ids; empty: everyone in the workspace). Approvers
	// (user ids) may approve tool calls in every thread, besides each
	// thread's owner.
	AllowedChannels []string `koanf:"allowed_channels"`
	AllowedUsers    []string `koanf:"allowed_users"`
	Approvers       []string `koanf:"approvers"`
	// DownloadTimeout gives up a file someone shares whose download
	// brings nothing for this long; its sender is told.
	DownloadTimeout Duration `koanf:"download_timeout"`
}

// Secrets returns the bot token, app token and signing secret, each
// from its field or the variable its *_env field names.
func (s Slack) Secrets(environ []string) (bot, app, signing string) {
	pick := func(v, env string) string {
		if v != "" {
			return v
		}
		return lookup(environ, env)
	}
	return pick(s.BotToken, s.BotTokenEnv), pick(s.AppToken, s.AppTokenEnv), pick(s.SigningSecret, s.SigningSecretEnv)
}

// Discord is the Discord listener.
type Discord struct {
	Enabled       bool   `koanf:"enabled"`
	Token         string `koanf:"token"`
	TokenEnv      string `koanf:"token_env"`
	ApplicationID string `koanf:"application_id"`
	PublicKey     string `koanf:"public_key"` // hex Ed25519, for HTTP interactions
	APIURL        string `koanf:"api_url"`
	// GuildID registers /switchboard in that server only (instant, for
	// development); empty registers it globally.
	GuildID string `koanf:"guild_id"`
	// AllowedGuilds and AllowedChannels limit where the bot answers (ids;
	// empty: everywhere it is). Approvers (user or role ids) may approve
	// tool calls in every thread, besides each thread's owner.
	AllowedGuilds   []string `koanf:"allowed_guilds"`
	AllowedChannels []string `koanf:"allowed_channels"`
	Approvers       []string `koanf:"approvers"`
	// DownloadTimeout gives up an attachment whose download brings
	// nothing for this long; its sender is told.
	DownloadTimeout Duration `koanf:"download_timeout"`
}

// BotToken returns the bot token, from Token or the variable TokenEnv
// names.
func (d Discord) BotToken(environ []string) string {
	if d.Token != "" {
		return d.Token
	}
	return lookup(environ, d.TokenEnv)
}

// Sessions tunes the session manager.
type Sessions struct {
	// QueueSize is how many inputs may wait per session before "busy".
	QueueSize int `koanf:"queue_size"`
	// IdleTimeout unloads a session nobody used for that long from memory
	// (it stays stored).
	IdleTimeout Duration `koanf:"idle_timeout"`
	// ApprovalTimeout: an unanswered approval request counts as denied.
	ApprovalTimeout Duration `koanf:"approval_timeout"`
	ToolTimeout     Duration `koanf:"tool_timeout"`
	// SubscriberBuffer is how many events are buffered per attached listener.
	SubscriberBuffer int `koanf:"subscriber_buffer"`
	// ShutdownGrace is how long turns under way may take to finish after
	// SIGTERM; what is still running then is run again at the next start.
	ShutdownGrace Duration `koanf:"shutdown_grace"`
	// MaxLive bounds the sessions held in memory at once; 0: no bound.
	MaxLive int `koanf:"max_live"`
	// NewPerMinute bounds the sessions one user may start a minute.
	NewPerMinute int `koanf:"new_per_minute"`
	// MaxBindings bounds the places one session is shown in (Slack and
	// Discord threads, terminals that joined it).
	MaxBindings int `koanf:"max_bindings"`
	// DeltaInterval: after a streamed delta, text is held this long to go
	// as one delta with what follows, so a reply costs a stored event per
	// interval rather than per token; 0 sends each token at once.
	DeltaInterval Duration `koanf:"delta_interval"`
}

// InviteBase is the origin invite links point at: PublicURL, or else the
// listen address, with localhost for an address that names no host.
func (h HTTP) InviteBase() string {
	if h.PublicURL != "" {
		return strings.TrimRight(h.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(h.Addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// mcpName is an MCP server's name: the prefix of its tools' names.
var mcpName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,30}$`)

// Duration is a time.Duration written the Go way in YAML ("30s", "10m").
// A bare number is refused: "timeout: 30" is too easy to misread.
type Duration time.Duration

// String formats the duration as Go does ("1m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration in the form Load reads.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses "30s", "10m", "1h30m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q: write it with a unit, e.g. \"30s\" or \"10m\"", string(b))
	}
	*d = Duration(v)
	return nil
}

// Defaults that are not plain key defaults: provider entries are a list, so
// theirs are filled in per entry.
const (
	DefaultProviderTimeout    = Duration(60 * time.Second)
	DefaultProviderMaxRetries = 3
)

// defaults are the first layer, as flat dotted keys.
func defaults() map[string]any {
	return map[string]any{
		"http.addr":                               "127.0.0.1:8080",
		"http.idle_timeout":                       Duration(60 * time.Second),
		"http.read_timeout":                       Duration(30 * time.Second),
		"metrics.addr":                            "127.0.0.1:9090",
		"listeners.websocket.send_buffer_bytes":   1 << 20,
		"listeners.websocket.max_conns_per_ip":    100,
		"listeners.websocket.new_sessions_per_ip": 30,
		"storage.dsn":                             "data/switchboard.db",
		"guides.dir":                              "guides",
		"guides.default":                          "assistant",
		"listeners.websocket.enabled":             true,
		"listeners.websocket.read_limit":          64 << 10,
		"listeners.websocket.send_buffer":         256,
		"listeners.websocket.auth.mode":           AuthNone,
		"listeners.stdin.enabled":                 StdinAuto,
		"listeners.slack.enabled":                 false,
		"listeners.slack.mode":                    SlackSocket,
		"listeners.slack.allowed_channels":        []string{},
		"listeners.slack.allowed_users":           []string{},
		"listeners.slack.approvers":               []string{},
		"listeners.discord.enabled":               false,
		"listeners.openai.enabled":                false,
		"listeners.openai.requests_per_minute":    60,
		"listeners.openai.max_body_bytes":         1 << 20,
		"listeners.openai.approval_timeout":       "5m",
		"routing.router_timeout":                  "3s",
		"listeners.discord.allowed_guilds":        []string{},
		"listeners.discord.allowed_channels":      []string{},
		"listeners.discord.approvers":             []string{},
		"sessions.queue_size":                     64,
		"sessions.idle_timeout":                   Duration(15 * time.Second),
		"sessions.max_live":                       10000,
		"sessions.new_per_minute":                 20,
		"sessions.max_bindings":                   20,
		"sessions.delta_interval":                 Duration(200 * time.Millisecond),
		"tools.sandbox.enabled":                   false,
		"tools.sandbox.python":                    "/usr/bin/python3",
		"tools.sandbox.timeout":                   Duration(30 * time.Second),
		"tools.sandbox.cpu":                       Duration(10 * time.Second),
		"tools.sandbox.memory_mb":                 1024,
		"tools.sandbox.max_files":                 256,
		"tools.sandbox.file_size_mb":              64,
		"tools.sandbox.max_procs":                 64,
		"tools.sandbox.output_kb":                 64,
		"tools.sandbox.quota_mb":                  100,
		"tools.sandbox.tmp_mb":                    64,
		"storage.retention":                       Duration(0),
		"storage.lease":                           Duration(10 * time.Second),
		"sessions.approval_timeout":               Duration(10 * time.Minute),
		"sessions.tool_timeout":                   Duration(30 * time.Second),
		"sessions.subscriber_buffer":              256,
		"sessions.shutdown_grace":                 Duration(10 * time.Second),
		"listeners.slack.download_timeout":        Duration(30 * time.Second),
		"listeners.discord.download_timeout":      Duration(30 * time.Second),
		"uploads.enabled":                         true,
		"uploads.max_file_mb":                     20,
		"uploads.max_message_mb":                  50,
		"uploads.max_files":                       10,
		"uploads.types":                           []string{},
		"embeddings.cache_mb":                     256,
		"embeddings.min_similarity":               0.3,
		"embeddings.timeout":                      Duration(10 * time.Second),
		"telemetry.protocol":                      "http/protobuf",
		"telemetry.service_name":                  "switchboard",
		"telemetry.sampler":                       1.0,
		"telemetry.trace_log.max_size_mb":         100,
		"telemetry.trace_log.max_files":           5,
		"log.level":                               "info",
		"log.format":                              "text",
	}
}

// EnvPrefix starts every environment variable Load reads; "__" nests.
const EnvPrefix = "SWITCHBOARD_"

// Load builds the configuration: defaults, then file (skipped when file is
// ""; a missing file is an error), then the SWITCHBOARD_ variables of
// environ, then sets ("key=value", dotted keys, YAML values). List entries
// are addressed by index: providers.0.base_url. The result is validated.
//
// A relative path in the file, or a default path the file leaves in place
// (pathKeys), is taken from the file's folder, so the configuration means
// the same whatever directory the gateway is started from; a path given in
// the environment or with --set is taken from the working directory, as a
// shell takes a command line's.
//
// environ is passed in rather than read from os.Environ so tests, and
// embedders, control exactly what is seen.
func Load(file string, sets []string, environ []string) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults(), "."), nil); err != nil {
		return Config{}, fmt.Errorf("config: defaults: %w", err)
	}
	if file != "" {
		if err := loadFile(k, file); err != nil {
			return Config{}, err
		}
		if err := resolvePaths(k, filepath.Dir(file)); err != nil {
			return Config{}, err
		}
	}
	if err := loadEnv(k, environ); err != nil {
		return Config{}, err
	}
	for _, s := range sets {
		key, val, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return Config{}, fmt.Errorf("config: --set %q: want key=value", s)
		}
		if err := override(k, key, val, "--set "+key, false); err != nil {
			return Config{}, err
		}
	}
	if err := providerDefaults(k); err != nil {
		return Config{}, err
	}

	var c Config
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook:  mapstructure.TextUnmarshallerHookFunc(),
		ErrorUnused: true, // a safety net: keys were checked as they came in
		TagName:     "koanf",
	}})
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func loadFile(k *koanf.Koanf, path string) error {
	data, err := file.Provider(path).ReadBytes()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	m, err := decodeFile(path, data)
	if err != nil {
		return err
	}
	if err := k.Load(confmap.Provider(m, ""), nil); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}

// IsPostgres reports whether a storage DSN names a PostgreSQL database
// rather than an SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// pathKeys are the keys that name files or folders on this machine.
// Not tools.sandbox.python (a path inside the sandbox) nor
// tools.mcp[].command (a command line, run as a shell would run it).
var pathKeys = []string{"storage.dsn", "storage.data_dir", "guides.dir", "tools.sandbox.dir", "tools.sandbox.wheelhouse", "tools.sandbox.bwrap", "telemetry.trace_log.path"}

// resolvePaths makes the relative paths of pathKeys relative to dir, the
// config file's folder. Empty values (a default chosen later), absolute
// paths, and an SQLite in-memory database or URI (":memory:", "file:…")
// are left as they are. With the file in the working directory (dir "."),
// nothing changes.
func resolvePaths(k *koanf.Koanf, dir string) error {
	for _, key := range pathKeys {
		v, ok := k.Get(key).(string)
		if !ok || v == "" || filepath.IsAbs(v) {
			continue
		}
		if key == "storage.dsn" && (v == ":memory:" || strings.HasPrefix(v, "file:") || IsPostgres(v)) {
			continue
		}
		if err := k.Set(key, filepath.Join(dir, v)); err != nil {
			return fmt.Errorf("config: %s: %w", key, err)
		}
	}
	return nil
}

// envVar keeps the variable's name with its value, for error messages.
type envVar struct{ name, value string }

func loadEnv(k *koanf.Koanf, environ []string) error {
	vars, err := env.Provider("", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
			return strings.ReplaceAll(key, "__", "."), envVar{name, value}
		},
	}).Read()
	if err != nil {
		return fmt.Errorf("config: environment: %w", err)
	}
	// Sorted, so a whole section (SWITCHBOARD_LISTENERS__STDIN) comes
	// before a key inside it, and the more specific variable wins.
	keys := make([]string, 0, len(vars))
	for key := range vars {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		v := vars[key].(envVar)
		if err := override(k, key, v.value, v.name, true); err != nil {
			return err
		}
	}
	return nil
}

// providerDefaults fills in each provider entry's defaults. max_retries
// only when absent, so an explicit 0 (never retry) stays 0.
func providerDefaults(k *koanf.Koanf) error {
	list, _ := k.Get("providers").([]any)
	if len(list) == 0 {
		return nil
	}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if _, ok := m["timeout"]; !ok {
			m["timeout"] = DefaultProviderTimeout
		}
		if _, ok := m["max_retries"]; !ok {
			m["max_retries"] = DefaultProviderMaxRetries
		}
		if _, ok := m["vision"]; !ok {
			m["vision"] = true
		}
	}
	if err := k.Set("providers", list); err != nil {
		return fmt.Errorf("config: providers: %w", err)
	}
	return nil
}

// normalize turns the empty values the contract's own example writes
// (api_url: "") into their defaults, and YAML's True into "true".
func (c *Config) normalize() {
	c.Listeners.Stdin.Enabled = strings.ToLower(strings.TrimSpace(c.Listeners.Stdin.Enabled))
	if c.Listeners.Stdin.Enabled == "" {
		c.Listeners.Stdin.Enabled = StdinAuto
	}
	if c.Listeners.Slack.Mode == "" {
		c.Listeners.Slack.Mode = SlackSocket
	}
	if c.Listeners.Slack.APIURL == "" {
		c.Listeners.Slack.APIURL = DefaultSlackAPIURL
	}
	if c.Listeners.Discord.APIURL == "" {
		c.Listeners.Discord.APIURL = DefaultDiscordAPIURL
	}
	for i := range c.Providers {
		if c.Providers[i].Timeout == 0 {
			c.Providers[i].Timeout = DefaultProviderTimeout
		}
	}
	if p, _, ok := c.EmbeddingProvider(); ok && c.Embeddings.Model == "" {
		c.Embeddings.Model = DefaultEmbeddingModel(p.Kind)
	}
}

// Validate reports every bad value at once, each with its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}

	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		bad("http.addr", "want host:port, e.g. 127.0.0.1:8080, not %q", c.HTTP.Addr)
	}
	if c.HTTP.PublicURL != "" {
		if u, err := url.Parse(c.HTTP.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("http.public_url", "want the gateway's public origin, such as https://chat.example.com, not %q", c.HTTP.PublicURL)
		}
	}
	if c.HTTP.IdleTimeout <= 0 {
		bad("http.idle_timeout", "must be positive, e.g. \"60s\"")
	}
	if c.HTTP.ReadTimeout <= 0 {
		bad("http.read_timeout", "must be positive, e.g. \"30s\"")
	}
	{
		tm := c.Telemetry
		switch tm.Protocol {
		case "http/protobuf", "grpc":
		default:
			bad("telemetry.protocol", "want http/protobuf or grpc, not %q", tm.Protocol)
		}
		if tm.Endpoint != "" {
			if u, err := url.Parse(tm.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("telemetry.endpoint", "want the OTLP endpoint's URL, such as http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc), not %q", tm.Endpoint)
			}
		}
		if tm.Sampler < 0 || tm.Sampler > 1 {
			bad("telemetry.sampler", "want the share of turns traced, from 0 to 1, not %v", tm.Sampler)
		}
		if tm.TraceLog.MaxSizeMB <= 0 {
			bad("telemetry.trace_log.max_size_mb", "must be positive, e.g. 100")
		}
		if tm.TraceLog.MaxFiles < 1 {
			bad("telemetry.trace_log.max_files", "must be 1 or more (the rotated files kept), not %d", tm.TraceLog.MaxFiles)
		}
	}
	if c.Metrics.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Addr); err != nil {
			bad("metrics.addr", "want host:port, e.g. 127.0.0.1:9090, or empty to serve no metrics, not %q", c.Metrics.Addr)
		}
	}
	switch {
	case c.Storage.DSN == "":
		bad("storage.dsn", "must not be empty (a file path, \":memory:\", or a postgres:// URL)")
	case IsPostgres(c.Storage.DSN):
		if u, err := url.Parse(c.Storage.DSN); err != nil || strings.Trim(u.Path, "/") == "" {
			bad("storage.dsn", "want postgres://user@host:5432/database (with ?sslmode=... as the server needs); the database name is missing or the URL does not parse")
		}
	}
	if l := time.Duration(c.Storage.Lease); l < time.Second || l > 5*time.Minute {
		bad("storage.lease", "want 1s to 5m (how long a dead replica's conversations wait for another), not %s", l)
	}

	names := map[string]int{}
	for i, p := range c.Providers {
		key := fmt.Sprintf("providers[%d]", i)
		switch prev, dup := names[p.Name]; {
		case p.Name == "":
			bad(key+".name", "must not be empty: guides name a provider by it")
		case dup:
			bad(key+".name", "duplicate name %q (also providers[%d])", p.Name, prev)
		default:
			names[p.Name] = i
		}
		if !slices.Contains(kinds, p.Kind) {
			bad(key+".kind", "unknown kind %q (want %s)", p.Kind, strings.Join(kinds, ", "))
		}
		if p.BaseURL != "" {
			if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".base_url", "want an http:// or https:// URL, not %q", p.BaseURL)
			}
		}
		if p.Timeout < 0 {
			bad(key+".timeout", "must not be negative")
		}
		if p.MaxRetries < 0 {
			bad(key+".max_retries", "must not be negative")
		}
		if p.ContextWindow != 0 && p.ContextWindow < 1024 {
			bad(key+".context_window", "want the model's context window in tokens (at least 1024), or nothing for the known window of its model, not %d", p.ContextWindow)
		}
		if p.Fallback != "" && p.Fallback != FallbackDemo {
			bad(key+".fallback", "want demo (the offline demo model answers while the key is not set) or nothing, not %q", p.Fallback)
		}
	}

	if c.Guides.Dir == "" {
		bad("guides.dir", "must not be empty")
	}
	if c.Guides.Default == "" {
		bad("guides.default", "must not be empty")
	}

	ws := c.Listeners.WebSocket
	if ws.ReadLimit < 1024 {
		bad("listeners.websocket.read_limit", "must be at least 1024 bytes")
	}
	if ws.SendBuffer < 1 {
		bad("listeners.websocket.send_buffer", "must be at least 1")
	}
	if ws.SendBufferBytes < 4096 {
		bad("listeners.websocket.send_buffer_bytes", "must be at least 4096 bytes")
	}
	for i, h := range ws.ImageHosts {
		if !validImageHost(h) {
			bad(fmt.Sprintf("listeners.websocket.image_hosts[%d]", i), "want a host name such as images.example.com, *.example.com or host:port, not %q", h)
		}
	}
	for i, o := range ws.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad(fmt.Sprintf("listeners.websocket.allowed_origins[%d]", i), "want an origin such as https://shop.example, not %q", o)
		}
	}
	switch a := ws.Auth; a.Mode {
	case AuthNone:
	case AuthToken:
		if len(a.Tokens) == 0 {
			bad("listeners.websocket.auth.tokens", "auth mode token needs at least one token")
		}
		for i, t := range a.Tokens {
			key := fmt.Sprintf("listeners.websocket.auth.tokens[%d]", i)
			if t.Token == "" && t.TokenEnv == "" {
				bad(key+".token", "needs token or token_env")
			}
			if t.User == "" {
				bad(key+".user", "must name the user the token stands for")
			}
			if t.Role != "" && !slices.Contains(roles, t.Role) {
				bad(key+".role", "want %s, not %q", strings.Join(roles, ", "), t.Role)
			}
		}
	case AuthJWT:
		if a.JWTSecret == "" && a.JWTSecretEnv == "" {
			bad("listeners.websocket.auth.jwt_secret", "auth mode jwt needs jwt_secret (or jwt_secret_env)")
		} else if a.JWTSecret != "" && len(a.JWTSecret) < MinJWTSecret {
			bad("listeners.websocket.auth.jwt_secret", "must be at least %d bytes; e.g. openssl rand -hex 32", MinJWTSecret)
		}
	default:
		bad("listeners.websocket.auth.mode", "want none, token or jwt, not %q", a.Mode)
	}

	c.checkOpenAI(bad)
	c.checkRouting(bad)

	switch c.Listeners.Stdin.Enabled {
	case StdinAuto, StdinTrue, StdinFalse:
	default:
		bad("listeners.stdin.enabled", "want auto, true or false, not %q", c.Listeners.Stdin.Enabled)
	}
	s := c.Listeners.Slack
	switch s.Mode {
	case SlackSocket, SlackHTTP:
	default:
		bad("listeners.slack.mode", "want socket or http, not %q", s.Mode)
	}
	if s.Enabled {
		if s.BotToken == "" && s.BotTokenEnv == "" {
			bad("listeners.slack.bot_token", "the Slack listener is enabled but has no bot token (or bot_token_env)")
		}
		if s.Mode == SlackSocket && s.AppToken == "" && s.AppTokenEnv == "" {
			bad("listeners.slack.app_token", "socket mode needs an app-level token (xapp-…, or app_token_env)")
		}
		if s.Mode == SlackHTTP && s.SigningSecret == "" && s.SigningSecretEnv == "" {
			bad("listeners.slack.signing_secret", "http mode needs the signing secret (or signing_secret_env)")
		}
	}
	checkURL := func(key, v string) {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key, "want an http:// or https:// URL, not %q", v)
		}
	}
	if s.APIURL != "" {
		checkURL("listeners.slack.api_url", s.APIURL)
	}
	d := c.Listeners.Discord
	if d.Enabled && d.Token == "" && d.TokenEnv == "" {
		bad("listeners.discord.token", "the Discord listener is enabled but has no bot token (or token_env)")
	}
	if d.APIURL != "" {
		checkURL("listeners.discord.api_url", d.APIURL)
	}
	if d.PublicKey != "" {
		if k, err := hex.DecodeString(d.PublicKey); err != nil || len(k) != 32 {
			bad("listeners.discord.public_key", "want the application's public key: 64 hex characters (General Information → Public Key)")
		}
	}

	ss := c.Sessions
	if ss.QueueSize < 1 {
		bad("sessions.queue_size", "must be at least 1")
	}
	if ss.SubscriberBuffer < 1 {
		bad("sessions.subscriber_buffer", "must be at least 1")
	}
	for _, l := range []struct {
		key string
		n   int
	}{{"listeners.websocket.max_conns_per_ip", c.Listeners.WebSocket.MaxConnsPerIP}, {"listeners.websocket.new_sessions_per_ip", c.Listeners.WebSocket.NewSessionsPerIP}} {
		if l.n == 0 || l.n < -1 {
			bad(l.key, "must be at least 1, or -1 for no bound")
		}
	}
	if ss.MaxLive < 0 {
		bad("sessions.max_live", "must be 0 (no bound) or more")
	}
	if ss.NewPerMinute < 1 {
		bad("sessions.new_per_minute", "must be at least 1")
	}
	if ss.MaxBindings < 1 {
		bad("sessions.max_bindings", "must be at least 1")
	}
	if ss.DeltaInterval < 0 || ss.DeltaInterval > Duration(2*time.Second) {
		bad("sessions.delta_interval", "must be from 0 (each token at once) to 2s, not %s", time.Duration(ss.DeltaInterval))
	}
	sb := c.Tools.Sandbox
	for _, l := range []struct {
		key string
		n   int
	}{{"tools.sandbox.memory_mb", sb.MemoryMB}, {"tools.sandbox.max_files", sb.MaxFiles}, {"tools.sandbox.file_size_mb", sb.FileSizeMB},
		{"tools.sandbox.max_procs", sb.MaxProcs}, {"tools.sandbox.output_kb", sb.OutputKB}, {"tools.sandbox.quota_mb", sb.QuotaMB}, {"tools.sandbox.tmp_mb", sb.TmpMB}} {
		if l.n < 1 {
			bad(l.key, "must be at least 1")
		}
	}
	if sb.Timeout < Duration(time.Second) || sb.CPU < Duration(time.Second) {
		bad("tools.sandbox.timeout", "timeout and cpu must be at least 1s")
	}
	up := c.Uploads
	for _, l := range []struct {
		key string
		n   int
	}{{"uploads.max_file_mb", up.MaxFileMB}, {"uploads.max_message_mb", up.MaxMessageMB}, {"uploads.max_files", up.MaxFiles}} {
		if l.n < 1 {
			bad(l.key, "must be at least 1")
		}
	}
	if up.MaxMessageMB < up.MaxFileMB && up.MaxMessageMB >= 1 {
		bad("uploads.max_message_mb", "is %d, under max_file_mb (%d): one file could never be sent", up.MaxMessageMB, up.MaxFileMB)
	}
	for i, t := range up.Types {
		if typ, sub, ok := strings.Cut(t, "/"); !ok || typ == "" || sub == "" || strings.ContainsAny(t, " ;,") {
			bad(fmt.Sprintf("uploads.types[%d]", i), "want a media type such as text/csv, or a family such as text/*, not %q", t)
		}
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"listeners.slack.download_timeout", c.Listeners.Slack.DownloadTimeout}, {"listeners.discord.download_timeout", c.Listeners.Discord.DownloadTimeout}} {
		if d.v < Duration(time.Second) {
			bad(d.key, "must be at least 1s")
		}
	}
	seen := map[string]bool{}
	for i, srv := range c.Tools.MCP {
		key := fmt.Sprintf("tools.mcp[%d]", i)
		switch {
		case !mcpName.MatchString(srv.Name) || strings.Contains(srv.Name, "__") || strings.HasSuffix(srv.Name, "_"):
			bad(key+".name", "want a short lower-case name (letters, digits, - and _, no \"__\" and not ending in _; it prefixes the server's tools: name.tool), not %q", srv.Name)
		case seen[srv.Name]:
			bad(key+".name", "%q is configured twice", srv.Name)
		case (len(srv.Command) > 0) == (srv.URL != ""):
			bad(key, "set command (a program spoken to over stdio) or url (a Streamable HTTP server), one of them")
		}
		seen[srv.Name] = true
		if srv.URL != "" {
			if u, err := url.Parse(srv.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".url", "want an http(s) URL, not %q", srv.URL)
			}
		}
		if srv.MaxResponseMB < 0 || srv.MaxResponseMB > 64 {
			bad(key+".max_response_mb", "want 1 to 64 (MiB), or leave it out for the default 8, not %d", srv.MaxResponseMB)
		}
	}
	if c.Storage.Retention < 0 {
		bad("storage.retention", "must be 0 (keep everything) or a duration, e.g. \"2160h\" for 90 days")
	}
	for _, d := range []struct {
		key string
		d   Duration
	}{{"sessions.idle_timeout", ss.IdleTimeout}, {"sessions.approval_timeout", ss.ApprovalTimeout}, {"sessions.tool_timeout", ss.ToolTimeout}, {"sessions.shutdown_grace", ss.ShutdownGrace}} {
		if d.d <= 0 {
			bad(d.key, "must be positive, e.g. \"30s\"")
		}
	}

	c.validateEmbeddings(bad)
	c.validateSpend(bad)

	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, not %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "want text or json, not %q", c.Log.Format)
	}
	return errors.Join(errs...)
}

// validateEmbeddings checks the embeddings section when it is on.
func (c Config) validateEmbeddings(bad func(key, format string, args ...any)) {
	e := c.Embeddings
	if e.Provider == "" {
		return
	}
	p, i, ok := c.EmbeddingProvider()
	switch {
	case !ok:
		var names []string
		for _, p := range c.Providers {
			names = append(names, p.Name)
		}
		bad("embeddings.provider", "no provider is named %q (have: %s): name the provider whose endpoint and key make the vectors", e.Provider, strings.Join(names, ", "))
	case p.Kind == KindAnthropic:
		bad("embeddings.provider", "%q (providers[%d]) is an anthropic provider, and Anthropic has no embeddings API: name an openai, gemini or ollama provider (one may be added for embeddings alone)", e.Provider, i)
	case p.Kind == KindDemo:
		bad("embeddings.provider", "%q (providers[%d]) is the offline demo model, which makes no embeddings: name an openai, gemini or ollama provider", e.Provider, i)
	case e.Model == "":
		bad("embeddings.model", "name the embedding model %q serves, e.g. nomic-embed-text (ollama pull nomic-embed-text)", e.Provider)
	}
	if e.Dimensions < 0 || e.Dimensions > MaxEmbeddingDimensions {
		bad("embeddings.dimensions", "want 0 (the model's own) or a length up to %d, not %d", MaxEmbeddingDimensions, e.Dimensions)
	}
	if e.CacheMB < 0 {
		bad("embeddings.cache_mb", "want the MiB of vectors held in memory (0 holds none), not %d", e.CacheMB)
	}
	if e.MinSimilarity < -1 || e.MinSimilarity > 1 {
		bad("embeddings.min_similarity", "want a cosine similarity from -1 to 1, not %v", e.MinSimilarity)
	}
	if e.Timeout <= 0 {
		bad("embeddings.timeout", "must be positive, e.g. \"10s\"")
	}
}

// validImageHost: a host name or IP, optionally with a port, optionally
// starting with "*." for its subdomains; no scheme, no path.
func validImageHost(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || strings.ContainsAny(h, "/?#@*\\ ") {
		return false
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		if host == "" || port == "" {
			return false
		}
		h = host
	}
	return !strings.Contains(h, ":") || net.ParseIP(h) != nil
}

// checkRouting checks routing; that its guides exist is checked at
// start-up, where the catalog is read.
func (c Config) checkRouting(bad func(key, format string, args ...any)) {
	r := c.Routing
	for i, rule := range r.Rules {
		key := fmt.Sprintf("routing.rules[%d]", i)
		if rule.Guide == "" {
			bad(key+".guide", "must name the guide the rule chooses")
		}
		if rule.Channel != "" && !slices.Contains(routingChannels, rule.Channel) {
			bad(key+".channel", "want one of %s, not %q", strings.Join(routingChannels, ", "), rule.Channel)
		}
		if rule.Match != "" {
			if _, err := regexp.Compile(rule.Match); err != nil {
				bad(key+".match", "not a regular expression: %v", err)
			}
		}
	}
	if t := time.Duration(r.RouterTimeout); t < 100*time.Millisecond || t > time.Minute {
		bad("routing.router_timeout", "must be between 100ms and 1m")
	}
	if r.Router == "" && len(r.Candidates) > 0 {
		bad("routing.candidates", "are the guides the router picks among: set routing.router too")
	}
}

// checkOpenAI checks listeners.openai; whether each key's variable is set
// is checked at start-up, where the environment is read.
func (c Config) checkOpenAI(bad func(key, format string, args ...any)) {
	o := c.Listeners.OpenAI
	if o.RequestsPerMinute < 1 {
		bad("listeners.openai.requests_per_minute", "must be at least 1")
	}
	if o.MaxBodyBytes < 1024 {
		bad("listeners.openai.max_body_bytes", "must be at least 1024 bytes")
	}
	if time.Duration(o.ApprovalTimeout) < time.Second {
		bad("listeners.openai.approval_timeout", "must be at least 1s")
	}
	if o.Enabled && len(o.Keys) == 0 {
		bad("listeners.openai.keys", "the OpenAI-compatible API needs at least one key (name and key_env): it serves no one without")
	}
	names := map[string]bool{}
	for i, k := range o.Keys {
		key := fmt.Sprintf("listeners.openai.keys[%d]", i)
		switch {
		case k.Name == "":
			bad(key+".name", "must name who the key stands for")
		case names[k.Name]:
			bad(key+".name", "%q names another key too: each key's name must be its own", k.Name)
		}
		names[k.Name] = true
		if k.KeyEnv == "" {
			bad(key+".key_env", "must name the environment variable that holds the key")
		}
		if k.Role != "" && k.Role != "member" && k.Role != "approver" && k.Role != "viewer" {
			bad(key+".role", "want member, approver or viewer, not %q", k.Role)
		}
	}
}
