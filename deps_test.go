package switchboard_test

// The import direction, pinned: the domain package imports nothing of the
// project; the core (sessions and what it stands on) imports no listener,
// no web page and no command; a listener imports no other listener; test
// fakes are never linked into the gateway. A change that breaks one of
// these fails here, with the offending import named, rather than growing
// a cycle later.

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/switchboard-gw/switchboard"

// deps lists the project packages pkg imports, directly or not (not its
// tests').
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok && rest != pkg {
			own = append(own, rest)
		}
	}
	return own
}

func TestImportDirection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := func(pkg string, bad func(dep string) bool) {
		t.Helper()
		for _, d := range deps(t, pkg) {
			if bad(d) {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
	if own := deps(t, ""); len(own) > 0 {
		t.Errorf("the domain package imports %v: it must stand alone", own)
	}
	// The store test suite imports the domain package alone: every store
	// (storage's SQLite, a second on PostgreSQL) runs it without
	// importing another.
	forbidden("/storage/storetest", func(d string) bool { return d != "" })
	core := []string{"/sessions", "/storage", "/guides", "/tools", "/providers", "/providers/openai", "/providers/anthropic",
		"/providers/gemini", "/providers/demo", "/collaboration", "/config", "/metrics", "/health", "/places", "/semantic",
		"/storage/postgres", "/cluster", "/guardrails", "/routing"}
	for _, pkg := range core {
		forbidden(pkg, func(d string) bool {
			return strings.HasPrefix(d, "/listeners") || strings.HasPrefix(d, "/web") || strings.HasPrefix(d, "/cmd") ||
				strings.HasPrefix(d, "/telemetry")
		})
	}
	// Tracing: the core reports a turn's steps through sessions.Tracer and
	// a chat app's work through places.Telemetry, interfaces of its own;
	// the OpenTelemetry SDK, API and exporters stay in telemetry/, which
	// only the gateway wires in. The core and the chat apps link none of
	// it (the SDK's owner is pinned in TestSDKsStayInTheirPackage).
	for _, pkg := range []string{"/sessions", "/places", "/listeners/slack", "/listeners/discord", "/listeners/websocket", "/listeners/stdin", "/listeners/openai"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if strings.Contains(string(out), "go.opentelemetry.io/") {
			t.Errorf("%s links OpenTelemetry: it reports through an interface of its own, which telemetry/ implements", pkg)
		}
	}
	// The core counts through an interface of its own (sessions.Metrics):
	// Prometheus stays in metrics/, which only the gateway wires in.
	for _, pkg := range []string{"/sessions", "/places", "/health", "/semantic"} {
		forbidden(pkg, func(d string) bool { return d == "/metrics" })
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if strings.Contains(string(out), "prometheus") {
			t.Errorf("%s links a metrics library (prometheus)", pkg)
		}
	}
	for _, l := range []string{"discord", "slack", "stdin", "websocket", "openai"} {
		forbidden("/listeners/"+l, func(d string) bool {
			return strings.HasPrefix(d, "/listeners/") && !strings.HasPrefix(d, "/listeners/"+l) || strings.HasPrefix(d, "/cmd")
		})
	}
	// A chat app is lifecycle, inbound decoding and rendering on the place
	// layer: of the gateway it imports the layer, the root types and the
	// small shared pieces (roles, health, Markdown bounds), never the
	// session manager, the store, the tools or the models.
	for _, l := range []string{"discord", "slack"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, module+"/listeners/"+l).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", l, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			d, ours := strings.CutPrefix(imp, module)
			switch {
			case !ours, d == "", d == "/places", d == "/collaboration", d == "/health", d == "/mdbounds", strings.HasPrefix(d, "/listeners/"+l+"/"):
			default:
				t.Errorf("the chat app /listeners/%s imports %s: a chat app stands on the place layer", l, d)
			}
		}
	}
	// The listing sees imports at all: the gateway links every listener.
	if gw := strings.Join(deps(t, "/cmd/gateway"), " "); !strings.Contains(gw, "/listeners/slack ") || !strings.Contains(gw, "/sessions ") {
		t.Fatalf("go list -deps of the gateway lacks its listeners: %s", gw)
	}
	forbidden("/cmd/gateway", func(d string) bool {
		return strings.HasSuffix(d, "test") // slacktest, openaitest, sessionstest: fakes for tests only
	})
}

// Each platform's or vendor's SDK is imported by its own package only (its
// tests and fakes aside): the doctor asks slack.Check, discord.Check and
// mcp.Check rather than speak those APIs itself, Caddy's way, so a change
// of SDK stays in one folder.
func TestSDKsStayInTheirPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	owner := map[string]string{
		"github.com/slack-go/slack":              "/listeners/slack",
		"github.com/bwmarrin/discordgo":          "/listeners/discord",
		"github.com/modelcontextprotocol/go-sdk": "/tools/mcp",
		"github.com/anthropics/anthropic-sdk-go": "/providers/anthropic",
		"github.com/openai/openai-go":            "/providers/openai",
		"google.golang.org/genai":                "/providers/gemini",
		"go.opentelemetry.io/otel":               "/telemetry", // the API, the SDK and the OTLP exporters
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, _ := strings.CutPrefix(f[0], module)
		for _, imp := range f[1:] {
			for sdk, own := range owner {
				if imp != sdk && !strings.HasPrefix(imp, sdk+"/") {
					continue
				}
				seen[sdk] = true
				if pkg != own && !strings.HasPrefix(pkg, own+"/") {
					t.Errorf("%s imports %s, which only %s may", pkg, imp, own)
				}
			}
		}
	}
	// The listing sees imports at all.
	if !seen["github.com/slack-go/slack"] || !seen["github.com/bwmarrin/discordgo"] || !seen["go.opentelemetry.io/otel"] {
		t.Fatalf("go list found no SDK import: %v", seen)
	}
}
