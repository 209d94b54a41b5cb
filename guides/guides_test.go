package guides

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestShippedGuides(t *testing.T) {
	c, err := LoadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Names(); !slices.Equal(got, []string{"assistant", "support"}) {
		t.Fatalf("Names() = %v", got)
	}
	builtins := []string{"current_time", "calculator", "present", "plan", "remember", "forget", "memory_search"} // tools.Builtins, MemoryTools, RecallTool
	err = c.Check(nil, builtins, nil)
	if err != nil {
		t.Fatalf("shipped guides must not name a provider and only use built-in tools: %v", err)
	}

	a, _ := c.Get("assistant")
	if !slices.Equal(a.Tools, builtins) || a.Memory.Window != 20 || a.Memory.Policy != Compact || len(a.InitialMemories) == 0 || a.Provider != "" {
		t.Errorf("assistant: %+v", a)
	}
	for tool, want := range map[string]Policy{"current_time": Ask, "present": Auto, "calculator": Auto, "remember": Auto, "forget": Auto, "memory_search": Auto} {
		if got := a.Approval.For(tool); got != want {
			t.Errorf("assistant: %s is %q, want %q", tool, got, want)
		}
	}

	s, _ := c.Get("support")
	if s.Temperature == nil || *s.Temperature != 0.3 || !slices.Equal(s.Tools, []string{"current_time", "calculator"}) || s.Provider != "" {
		t.Errorf("support: %+v", s)
	}
	if !strings.Contains(strings.Join(s.InitialMemories, " "), "opening hours") || !strings.Contains(s.Prompt, "Acme Widgets") {
		t.Errorf("support lacks its opening hours or company: %q / %q", s.InitialMemories, s.Prompt)
	}
	if s.Approval.For("current_time") != Auto || s.Approval.For("calculator") != Ask {
		t.Errorf("support approval: %+v", s.Approval)
	}
	if s.File != "support.md" {
		t.Errorf("File = %q", s.File)
	}
}

func TestParseAllFields(t *testing.T) {
	src := `---
name: full
description: Every key
provider: main
model: gpt-x
fallback: backup
temperature: 1
memory: { policy: sliding-window, window: 5 }
initial_memories: ["a", "b"]
tools: [t1, t2, t3, t4]
approval:
  default: deny
  auto: [t1]
  ask: [t2]
  deny: [t3]
max_iterations: 3
max_tokens: 500
members_may_stop: false
tools_max: 3
tools_pinned: [t2]
vision: false
---

  You are full.

`
	g, err := Parse("guides/full.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "full" || g.Description != "Every key" || g.Provider != "main" || g.Model != "gpt-x" || g.Fallback != "backup" {
		t.Errorf("strings: %+v", g)
	}
	if g.Temperature == nil || *g.Temperature != 1 {
		t.Errorf("temperature: %v", g.Temperature)
	}
	if g.Memory != (Memory{Policy: SlidingWindow, Window: 5}) || g.MaxIterations != 3 || g.MaxTokens != 500 {
		t.Errorf("numbers: %+v", g)
	}
	if g.MembersMayStop {
		t.Errorf("members_may_stop: false was read as true")
	}
	if !slices.Equal(g.InitialMemories, []string{"a", "b"}) || !slices.Equal(g.Tools, []string{"t1", "t2", "t3", "t4"}) {
		t.Errorf("lists: %+v", g)
	}
	if g.ToolsMax != 3 || !slices.Equal(g.ToolsPinned, []string{"t2"}) {
		t.Errorf("tools_max %d, tools_pinned %v", g.ToolsMax, g.ToolsPinned)
	}
	if !g.NoVision {
		t.Errorf("vision: false was read as true")
	}
	if g.Prompt != "You are full." || g.File != "guides/full.md" {
		t.Errorf("prompt %q, file %q", g.Prompt, g.File)
	}
	for tool, want := range map[string]Policy{"t1": Auto, "t2": Ask, "t3": Deny, "t4": Deny, "unlisted": Deny} {
		if got := g.Approval.For(tool); got != want {
			t.Errorf("For(%s) = %q, want %q", tool, got, want)
		}
	}
}

func TestParseGuardrails(t *testing.T) {
	g, err := Parse("guides/support.md", []byte(`---
guardrails:
  input:
    mask: [email]
    block:
      - {name: no-passwords, pattern: '(?i)password\s*[:=]', message: Please never send passwords here.}
  output:
    mask: [credit_card, {name: ticket, pattern: 'ACME-\d{6}', with: '[ticket]'}]
---
Hi.
`))
	if err != nil {
		t.Fatal(err)
	}
	in, out := g.Guardrails.Input, g.Guardrails.Output
	if res := in.Check("I am ann@example.com"); res.Text != "I am [email]" {
		t.Errorf("input mask: %q", res.Text)
	}
	if res := in.Check("password: x"); res.Blocked == nil || res.Text != "Please never send passwords here." {
		t.Errorf("input block: %+v", res)
	}
	if res := out.Check("Ticket ACME-123456, card 4111 1111 1111 1111."); res.Text != "Ticket [ticket], card [credit_card]." {
		t.Errorf("output masks: %q", res.Text)
	}
	want := map[string][]string{"input": {"mask email", "block no-passwords"}, "output": {"mask credit_card", "mask ticket"}}
	if fmt.Sprint(g.Guardrails.Rules) != fmt.Sprint(want) {
		t.Errorf("rules %v, want %v", g.Guardrails.Rules, want)
	}
	plain, err := Parse("guides/plain.md", []byte("---\n---\nHi.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Guardrails.Input != nil || plain.Guardrails.Output != nil {
		t.Error("a guide without guardrails has guards")
	}
}

func TestParseDefaults(t *testing.T) {
	g, err := Parse("dir/minimal.md", []byte("---\ntools: [x]\n---\nHello.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "minimal" {
		t.Errorf("name defaults to the file name, got %q", g.Name)
	}
	if g.Memory != (Memory{Policy: SlidingWindow, Window: 20}) || g.MaxIterations != 8 || g.MaxTokens != 0 || g.Temperature != nil {
		t.Errorf("defaults: %+v", g)
	}
	if g.Approval.Default != Ask || g.Approval.For("x") != Ask {
		t.Errorf("approval defaults to ask: %+v", g.Approval)
	}
	if !g.MembersMayStop {
		t.Errorf("members may stop a running turn unless the guide says otherwise")
	}
	if g.NoVision {
		t.Errorf("a guide has vision unless it says otherwise")
	}
	if g.ToolsMax != DefaultToolsMax || g.ToolsPinned != nil {
		t.Errorf("tools_max defaults to %d with nothing pinned: %d, %v", DefaultToolsMax, g.ToolsMax, g.ToolsPinned)
	}

	// An empty front matter and CRLF line ends are fine too.
	g, err = Parse("crlf.md", []byte("---\r\n---\r\nHi.\r\n"))
	if err != nil || g.Name != "crlf" || g.Prompt != "Hi." {
		t.Errorf("crlf: %+v, %v", g, err)
	}
}

func TestApprovalForZeroValueAsks(t *testing.T) {
	if got := (Approval{}).For("anything"); got != Ask {
		t.Fatalf("zero Approval: %q, want ask", got)
	}
	if got := (Approval{Default: Auto}).For("anything"); got != Auto {
		t.Fatalf("default auto: %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown key", "---\nname: support\ndescription: d\ntools: [a]\n\ntemprature: 0.3\n---\nHi.\n",
			`guides/support.md:6: unknown key "temprature"`},
		{"temperature range", "---\nname: support\ndescription: d\ntemperature: 2.5\n---\nHi.\n",
			`guides/support.md:4: temperature: must be between 0 and 2`},
		{"temperature not a number", "---\ntemperature: warm\n---\nHi.\n",
			`guides/support.md:2: temperature: must be a number`},
		{"missing front matter", "You are support.\n",
			`guides/support.md:1: missing front matter`},
		{"unterminated front matter", "---\nname: support\nYou are support.\n",
			`guides/support.md:1: unterminated front matter`},
		{"empty prompt", "---\nname: support\n---\n\n  \n",
			`guides/support.md:3: empty prompt`},
		{"approval tool not in tools", "---\ntools: [current_time]\napproval:\n  default: ask\n  auto: [current_time, calculator]\n---\nHi.\n",
			`guides/support.md:5: approval.auto: tool "calculator" is not in tools (current_time)`},
		{"misspelt tool named by the approval list", "---\ntools: [calculater, current_time]\napproval: { auto: [calculator] }\n---\nHi.\n",
			`guides/support.md:3: approval.auto: tool "calculator" is not in tools, which has "calculater": is one of them misspelt?`},
		{"approval before tools", "---\napproval: { deny: [x] }\ntools: [y]\n---\nHi.\n",
			`guides/support.md:2: approval.deny: tool "x" is not in tools (y)`},
		{"tool in two approval lists", "---\ntools: [a]\napproval: { auto: [a], deny: [a] }\n---\nHi.\n",
			`guides/support.md:3: approval.deny: tool "a" is already listed in approval.auto`},
		{"unknown policy", "---\ntools: [a]\napproval:\n  default: sometimes\n---\nHi.\n",
			`guides/support.md:4: approval.default: unknown policy "sometimes"`},
		{"unknown approval key", "---\napproval: { always: [a] }\n---\nHi.\n",
			`guides/support.md:2: unknown key "approval.always"`},
		{"unknown memory policy", "---\nmemory: { policy: summary }\n---\nHi.\n",
			`guides/support.md:2: memory.policy: unknown policy "summary"`},
		{"window range", "---\nmemory:\n  window: 0\n---\nHi.\n",
			`guides/support.md:3: memory.window: must be between 1 and 1000`},
		{"keep tool results range", "---\nmemory:\n  keep_tool_results: -1\n---\nHi.\n",
			`guides/support.md:3: memory.keep_tool_results: must be between 0 and 1000`},
		{"context tokens range", "---\nmemory:\n  max_context_tokens: 500\n---\nHi.\n",
			`guides/support.md:3: memory.max_context_tokens: must be between 1000 and 10000000`},
		{"unknown memory key", "---\nmemory:\n  windw: 5\n---\nHi.\n",
			`guides/support.md:3: unknown key "memory.windw"`},
		{"tools_max range", "---\ntools: [a]\ntools_max: 200\n---\nHi.\n",
			`guides/support.md:3: tools_max: must be between 2 and 128`},
		{"pinned not a tool", "---\ntools: [a, b]\ntools_pinned: [c]\n---\nHi.\n",
			`guides/support.md:3: tools_pinned: tool "c" is not in tools (a, b)`},
		{"pinned twice", "---\ntools: [a, b]\ntools_pinned: [a, a]\n---\nHi.\n",
			`guides/support.md:3: tools_pinned: "a" is listed twice`},
		{"pinned leave no room", "---\ntools: [a, b, c]\ntools_max: 2\ntools_pinned: [a, b]\n---\nHi.\n",
			`guides/support.md:4: tools_pinned: 2 tools pinned leave no room under tools_max (2)`},
		{"pinned server tools", "---\ntools: [gh.*]\ntools_pinned: [gh.create_issue, other.x]\n---\nHi.\n",
			`guides/support.md:3: tools_pinned: tool "other.x" is not in tools (gh.*)`},
		{"max_iterations range", "---\nmax_iterations: 51\n---\nHi.\n",
			`guides/support.md:2: max_iterations: must be between 1 and 50`},
		{"max_iterations not a number", "---\nmax_iterations: many\n---\nHi.\n",
			`guides/support.md:2: max_iterations: must be a whole number`},
		{"max_tokens negative", "---\nmax_tokens: -1\n---\nHi.\n",
			`guides/support.md:2: max_tokens: must be at least 1`},
		{"members_may_stop not a bool", "---\nmembers_may_stop: sometimes\n---\nHi.\n",
			`guides/support.md:2: members_may_stop: must be true or false, not "sometimes"`},
		{"tools not a list", "---\ntools: calculator\n---\nHi.\n",
			`guides/support.md:2: tools: must be a list`},
		{"tool listed twice", "---\ntools:\n  - a\n  - a\n---\nHi.\n",
			`guides/support.md:4: tools: "a" is listed twice`},
		{"duplicate key", "---\nmodel: a\nmodel: b\n---\nHi.\n",
			`guides/support.md:3: duplicate key "model"`},
		{"name mismatch", "---\nname: help\n---\nHi.\n",
			`guides/support.md:2: name: "help" does not match the file name (support.md)`},
		{"name not a string", "---\nname: [a]\n---\nHi.\n",
			`guides/support.md:2: name: must be a single value`},
		{"yaml syntax", "---\nname: support\ntools: [a\n---\nHi.\n",
			`guides/support.md:2: invalid YAML: `},
		{"not a mapping", "---\n- a\n---\nHi.\n",
			`guides/support.md:2: front matter must be a mapping`},
		{"guardrails side", "---\nguardrails:\n  inbound: {mask: [email]}\n---\nHi.\n",
			`guides/support.md:3: guardrails: unknown key "inbound": want input or output`},
		{"guardrails action", "---\nguardrails:\n  input: {hide: [email]}\n---\nHi.\n",
			`guides/support.md:3: guardrails.input: unknown key "hide": want block or mask`},
		{"guardrails detector", "---\nguardrails:\n  output:\n    mask: [email, ssn]\n---\nHi.\n",
			`guides/support.md:4: guardrails.output.mask[1]: no detector "ssn" (have: email, phone, iban, credit_card, secret)`},
		{"guardrails pattern", "---\nguardrails:\n  input:\n    block:\n      - pattern: '(oops'\n---\nHi.\n",
			`guides/support.md:5: guardrails.input.block[0]: pattern "(oops": error parsing regexp`},
		{"guardrails rule key", "---\nguardrails:\n  input:\n    block:\n      - {pattern: x, replace: y}\n---\nHi.\n",
			`guides/support.md:5: guardrails.input.block[0]: unknown key "replace"`},
		{"guardrails not a list", "---\nguardrails:\n  input:\n    mask: email\n---\nHi.\n",
			`guides/support.md:4: guardrails.input.mask: must be a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("guides/support.md", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error\n  %q\nwant it to start with\n  %q", err, tc.want)
			}
		})
	}
}

func TestParseYAMLSyntaxErrorLineIsTheFiles(t *testing.T) {
	// yaml.v3 counts from the front matter's first line; the error must
	// count from the file's.
	_, err := Parse("g.md", []byte("---\nname: g\ndescription: a: b\n---\nHi.\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "g.md:3: invalid YAML: ") {
		t.Fatalf("got %v, want g.md:3: …", err)
	}
}

func TestParseRejectsBadFileName(t *testing.T) {
	_, err := Parse("guides/my guide.md", []byte("---\n---\nHi.\n"))
	if err == nil || !strings.Contains(err.Error(), `"my guide"`) {
		t.Fatalf("got %v", err)
	}
}

func writeGuides(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDirReportsEveryBrokenGuide(t *testing.T) {
	dir := writeGuides(t, map[string]string{
		"a.md":      "---\ntemprature: 1\n---\nHi.\n",
		"b.md":      "no front matter\n",
		"c.md":      "---\n---\nFine.\n",
		"notes.txt": "not a guide",
	})
	_, err := LoadDir(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{filepath.Join(dir, "a.md") + `:2: unknown key "temprature"`, filepath.Join(dir, "b.md") + ":1: missing front matter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestLoadDirEmptyAndMissing(t *testing.T) {
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no guides") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := LoadDir(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("missing dir: no error")
	}
}

func TestCatalogGetIsACopy(t *testing.T) {
	dir := writeGuides(t, map[string]string{"g.md": "---\ntools: [a]\ntemperature: 0.5\n---\nHi.\n"})
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := c.Get("g")
	if !ok {
		t.Fatal("Get(g) not found")
	}
	g.Tools[0] = "changed"
	*g.Temperature = 2
	again, _ := c.Get("g")
	if again.Tools[0] != "a" || *again.Temperature != 0.5 {
		t.Fatalf("the catalog changed through a returned guide: %+v", again)
	}
	if _, ok := c.Get("nope"); ok {
		t.Fatal("Get(nope) found")
	}
}

func TestCheck(t *testing.T) {
	dir := writeGuides(t, map[string]string{
		"support.md":  "---\nprovider: mian\nfallback: backup\ntools: [calculator, weather]\n---\nHi.\n",
		"ok.md":       "---\nprovider: main\ntools: [calculator]\n---\nHi.\n",
		"misspelt.md": "---\ntools: [calculater]\n---\nHi.\n",
	})
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check([]string{"main"}, []string{"calculator", "current_time"}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	file := filepath.Join(dir, "support.md")
	for _, want := range []string{
		`guide "support" (` + file + `): provider "mian" is not configured (have: main): did you mean "main"?`,
		`guide "support" (` + file + `): fallback provider "backup" is not configured (have: main)` + "\n",
		`guide "support" (` + file + `): unknown tool "weather" (have: calculator, current_time)`,
		`guide "misspelt" (` + filepath.Join(dir, "misspelt.md") + `): unknown tool "calculater" (have: calculator, current_time): did you mean "calculator"?`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `guide "ok"`) || strings.Contains(err.Error(), `tool "calculator"`) {
		t.Errorf("error blames what exists:\n%v", err)
	}
	if err := c.Check([]string{"main", "mian", "backup"}, []string{"calculator", "weather", "calculater"}, nil); err != nil {
		t.Errorf("everything exists: %v", err)
	}
}

// A guide names an MCP server's tools as "server.*" or one by one, and
// may give them approval policies either way: the named tool's comes
// first, then the server's, then the default.
func TestServerTools(t *testing.T) {
	dir := writeGuides(t, map[string]string{
		"ops.md": "---\ntools: [calculator, github.*, docs.search]\napproval: { default: auto, ask: [github.*], auto: [github.list_issues], deny: [docs.search] }\n---\nHi.\n",
		"bad.md": "---\ntools: [gitlab.*]\napproval: { ask: [github.create_issue] }\n---\nHi.\n",
	})
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), `approval.ask: tool "github.create_issue" is not in tools`) {
		t.Fatalf("an approval for a server the guide does not list: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "bad.md")); err != nil {
		t.Fatal(err)
	}
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := c.Get("ops")
	for tool, want := range map[string]Policy{
		"github.create_issue": Ask, "github.list_issues": Auto, "docs.search": Deny, "docs.fetch": Auto, "calculator": Auto,
	} {
		if got := g.Approval.For(tool); got != want {
			t.Errorf("For(%s) = %s, want %s", tool, got, want)
		}
	}
	if !Covers(g.Tools, "github.anything") || Covers(g.Tools, "docs.fetch") || !Covers(g.Tools, "docs.search") {
		t.Error("Covers: github.* covers every github tool; docs lists docs.search only")
	}
	if err := c.Check(nil, []string{"calculator"}, []string{"github", "docs"}); err != nil {
		t.Errorf("configured servers: %v", err)
	}
	err = c.Check(nil, []string{"calculator"}, []string{"githb"})
	if err == nil || !strings.Contains(err.Error(), `tool "github.*": no MCP server "github" is configured (tools.mcp) (have: githb): did you mean "githb"?`) {
		t.Errorf("an unconfigured server: %v", err)
	}
}
