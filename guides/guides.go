// Package guides reads the personas of the gateway: Markdown files whose YAML
// front matter picks the model, memory, tools and approval policy, and whose
// body is the system prompt (CONTRACT §3).
//
// Parsing is strict on purpose: a guide is written by hand, and a misspelt
// key silently ignored ("temprature") would change behaviour without anyone
// noticing. Every error names the file and the line.
package guides

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"gopkg.in/yaml.v3"
)

// Policy says what happens when the model calls a tool.
type Policy string

const (
	// Auto runs the tool without asking.
	Auto Policy = "auto"
	// Ask pauses the turn until a human approves or denies the call.
	Ask Policy = "ask"
	// Deny refuses the call; the model is told so.
	Deny Policy = "deny"
)

// Memory policies. SlidingWindow keeps the last Window messages of the
// conversation in the model's context; what leaves it is gone from it.
// Compact keeps up to Window messages too, but summarises the older part
// (with SummaryModel, or the guide's model) before it would leave, or
// before a request would pass 80 % of the context budget: the model is
// given the summary and the messages after it.
const (
	SlidingWindow = "sliding-window"
	Compact       = "compact"
)

// Defaults applied when the front matter leaves a field out.
const (
	DefaultWindow        = 20
	DefaultMaxIterations = 8
	DefaultToolsMax      = 20
)

// MaxToolsMax is the most tools a request may carry: OpenAI's documented
// limit for the tools of one request, the lowest of the providers'.
const MaxToolsMax = 128

// Memory is how much of the conversation the model sees.
type Memory struct {
	Policy string
	Window int
	// MaxContextTokens bounds a request's prompt tokens below the
	// provider's context window (0: the window alone decides).
	MaxContextTokens int
	// Recall adds to each new message's request the best matches for it
	// from the person's conversations (storage.DB.Search), marked as
	// recalled, with their dates.
	Recall bool
	// SummaryModel is the model that writes a Compact policy's summaries
	// ("": the guide's own), on the guide's provider.
	SummaryModel string
	// KeepToolResults is how many of the latest tool results a request
	// carries whole; older large ones are a one-line stub there (the
	// history keeps them whole). Nil: DefaultKeepToolResults.
	KeepToolResults *int
}

// DefaultKeepToolResults is memory.keep_tool_results when a guide does not
// set it.
const DefaultKeepToolResults = 3

// ToolResultsKept is KeepToolResults, or its default.
func (m Memory) ToolResultsKept() int {
	if m.KeepToolResults == nil {
		return DefaultKeepToolResults
	}
	return *m.KeepToolResults
}

// Approval is the per-tool policy: a tool in Auto, Ask or Deny gets that
// policy, every other tool gets Default.
type Approval struct {
	Default         Policy
	Auto, Ask, Deny []string
}

// For returns the policy of a tool. A zero Approval asks, so forgetting to
// configure one never runs a tool unattended.
func (a Approval) For(tool string) Policy {
	switch {
	case slices.Contains(a.Deny, tool):
		return Deny
	case slices.Contains(a.Ask, tool):
		return Ask
	case slices.Contains(a.Auto, tool):
		return Auto
	}
	// A server's tools as a whole ("github.*"), after any of them named.
	if group, _, ok := strings.Cut(tool, "."); ok {
		all := group + ".*"
		switch {
		case slices.Contains(a.Deny, all):
			return Deny
		case slices.Contains(a.Ask, all):
			return Ask
		case slices.Contains(a.Auto, all):
			return Auto
		}
	}
	if a.Default != "" {
		return a.Default
	}
	return Ask
}

// Covers reports whether a guide's tools list offers tool: by its name, or
// as one of a server's tools listed as "server.*".
func Covers(tools []string, tool string) bool {
	if slices.Contains(tools, tool) {
		return true
	}
	group, _, ok := strings.Cut(tool, ".")
	return ok && slices.Contains(tools, group+".*")
}

// Guide is one persona.
type Guide struct {
	Name        string
	Description string
	// Provider names a configured provider; empty means the first one.
	Provider string
	// Model overrides the provider's model when set.
	Model           string
	Temperature     *float64
	Memory          Memory
	InitialMemories []string
	Tools           []string
	// ToolsMax is how many tools a request carries at most. A guide with
	// more (an MCP server's tools count one by one) offers the model its
	// ToolsPinned, the tools in use, and the best matches for the
	// conversation, with find_tools to look for the others.
	ToolsMax    int
	ToolsPinned []string
	Approval    Approval
	// MaxIterations bounds the tool rounds of one turn.
	MaxIterations int
	// MaxTokens caps a response; 0 leaves it to the provider.
	MaxTokens int
	// Fallback names a provider used when the main one's retries run out.
	Fallback string
	// NoVision: the guide's model takes no pictures (vision: false), though
	// its provider's may; people's pictures reach it in words alone.
	NoVision bool
	// MembersMayStop: members (not only the owner and approvers) may stop
	// a running turn with /stop. Denying a tool call waiting for approval
	// always needs an approver.
	MembersMayStop bool
	// Greeting welcomes people to an empty conversation, and Suggestions
	// are first prompts they can pick; channels show them where they have
	// such a place (the widget's empty panel, the terminal banner, Slack's
	// suggested prompts).
	Greeting    string
	Suggestions []string
	// Guardrails check people's messages before the model sees them
	// (Input) and the model's answers before people see them (Output);
	// nil guards let everything through (docs/guardrails.md).
	Guardrails Guardrails
	// Handoffs are the guides this one may pass a conversation to (its
	// model's handoff tool, handoffs.go); handoffLines are where each is
	// named, for the catalog's errors.
	Handoffs     []string
	handoffLines []int
	// Prompt is the Markdown body, trimmed.
	Prompt string
	// File is the path the guide was read from, for error messages.
	File string
}

func (g Guide) clone() Guide {
	if g.Temperature != nil {
		t := *g.Temperature
		g.Temperature = &t
	}
	g.InitialMemories = slices.Clone(g.InitialMemories)
	g.Tools = slices.Clone(g.Tools)
	g.ToolsPinned = slices.Clone(g.ToolsPinned)
	g.Suggestions = slices.Clone(g.Suggestions)
	g.Handoffs = slices.Clone(g.Handoffs)
	g.Approval.Auto = slices.Clone(g.Approval.Auto)
	g.Approval.Ask = slices.Clone(g.Approval.Ask)
	g.Approval.Deny = slices.Clone(g.Approval.Deny)
	return g
}

// validName keeps guide names usable in a slash command (/guide support).
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Parse reads one guide. file is the path used in error messages, and its
// base name without ".md" is the guide's name unless the front matter names
// it (then both must agree).
func Parse(file string, data []byte) (Guide, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) == 0 || !isFence(lines[0]) {
		return Guide{}, fmt.Errorf("%s:1: missing front matter: a guide starts with a \"---\" line, then YAML, then \"---\" and the prompt", file)
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if isFence(lines[i]) {
			end = i
			break
		}
	}
	if end < 0 {
		return Guide{}, fmt.Errorf("%s:1: unterminated front matter: no closing \"---\" line", file)
	}
	p := parser{file: file, offset: 1}
	g := Guide{
		Name:           strings.TrimSuffix(filepath.Base(file), ".md"),
		Memory:         Memory{Policy: SlidingWindow, Window: DefaultWindow},
		Approval:       Approval{Default: Ask},
		MaxIterations:  DefaultMaxIterations,
		ToolsMax:       DefaultToolsMax,
		MembersMayStop: true,
		File:           file,
	}
	if err := p.frontMatter(&g, strings.Join(lines[1:end], "")); err != nil {
		return Guide{}, err
	}
	g.Prompt = strings.TrimSpace(strings.Join(lines[end+1:], ""))
	if g.Prompt == "" {
		return Guide{}, fmt.Errorf("%s:%d: empty prompt: write the system prompt after the front matter", file, end+1)
	}
	return g, nil
}

func isFence(line string) bool { return strings.TrimRight(line, " \t\r\n") == "---" }

// parser turns front-matter nodes into a Guide; offset converts the YAML
// document's line numbers to the file's.
type parser struct {
	file   string
	offset int
}

func (p parser) errorf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.file, n.Line+p.offset, fmt.Sprintf(format, args...))
}

// yamlLine finds the "line N" yaml.v3 puts in syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p parser) frontMatter(g *Guide, src string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return fmt.Errorf("%s:%d: invalid YAML: %s", p.file, n+p.offset, m[2])
		}
		return fmt.Errorf("%s:%d: invalid YAML: %w", p.file, 1+p.offset, err)
	}
	if len(doc.Content) == 0 { // empty front matter: all defaults
		return p.checkName(g, nil)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return p.errorf(root, "front matter must be a mapping of keys (name: …, tools: […])")
	}
	var nameNode, approvalNode, pinnedNode, handoffsNode *yaml.Node
	err := p.mapping(root, "", func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			nameNode = v
			err = p.str(v, key, &g.Name)
		case "description":
			err = p.str(v, key, &g.Description)
		case "provider":
			err = p.str(v, key, &g.Provider)
		case "model":
			err = p.str(v, key, &g.Model)
		case "fallback":
			err = p.str(v, key, &g.Fallback)
		case "vision":
			var on bool
			err = p.boolean(v, key, &on)
			g.NoVision = !on
		case "temperature":
			g.Temperature, err = p.temperature(v)
		case "memory":
			err = p.memory(v, &g.Memory)
		case "initial_memories":
			g.InitialMemories, err = p.list(v, key)
		case "tools":
			if g.Tools, err = p.list(v, key); err == nil {
				err = p.unique(v, key)
			}
		case "tools_max":
			err = p.intRange(v, key, 2, MaxToolsMax, &g.ToolsMax)
		case "tools_pinned":
			pinnedNode = v
			if g.ToolsPinned, err = p.list(v, key); err == nil {
				err = p.unique(v, key)
			}
		case "approval":
			approvalNode = v
			err = p.approval(v, &g.Approval)
		case "max_iterations":
			err = p.intRange(v, key, 1, 50, &g.MaxIterations)
		case "max_tokens":
			err = p.intRange(v, key, 1, 0, &g.MaxTokens)
		case "members_may_stop":
			err = p.boolean(v, key, &g.MembersMayStop)
		case "greeting":
			err = p.str(v, key, &g.Greeting)
		case "suggestions":
			if g.Suggestions, err = p.list(v, key); err == nil {
				err = p.suggestions(v)
			}
		case "guardrails":
			err = p.guardrails(v, &g.Guardrails)
		case "handoffs":
			handoffsNode = v
			err = p.handoffs(v, g)
		default:
			return p.errorf(k, "unknown key %q", key)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := p.checkName(g, nameNode); err != nil {
		return err
	}
	if err := p.notSelf(handoffsNode, g); err != nil {
		return err
	}
	if pinnedNode != nil {
		if err := p.pinnedTools(pinnedNode, g); err != nil {
			return err
		}
	}
	if approvalNode != nil {
		return p.approvalTools(approvalNode, g.Tools)
	}
	return nil
}

// pinnedTools runs once tools and tools_max are known: a pinned tool must
// be one of the guide's, and the pinned ones must leave room for others.
func (p parser) pinnedTools(n *yaml.Node, g *Guide) error {
	for _, item := range n.Content {
		if !Covers(g.Tools, item.Value) {
			return p.errorf(item, "tools_pinned: tool %q is not in tools (%s)", item.Value, strings.Join(g.Tools, ", "))
		}
	}
	if len(g.ToolsPinned) >= g.ToolsMax {
		return p.errorf(n, "tools_pinned: %d tools pinned leave no room under tools_max (%d): pin fewer or raise tools_max", len(g.ToolsPinned), g.ToolsMax)
	}
	return nil
}

func (p parser) checkName(g *Guide, n *yaml.Node) error {
	stem := strings.TrimSuffix(filepath.Base(p.file), ".md")
	if n == nil {
		if !validName.MatchString(g.Name) {
			return fmt.Errorf("%s:1: the guide's name %q (from the file name) may only contain letters, digits, '-' and '_'", p.file, g.Name)
		}
		return nil
	}
	if !validName.MatchString(g.Name) {
		return p.errorf(n, "name: %q may only contain letters, digits, '-' and '_'", g.Name)
	}
	if g.Name != stem {
		return p.errorf(n, "name: %q does not match the file name (%s.md)", g.Name, stem)
	}
	return nil
}

// mapping walks a mapping node's pairs, rejecting duplicate keys; prefix
// qualifies nested keys in messages ("memory.window").
func (p parser) mapping(n *yaml.Node, prefix string, each func(key string, k, v *yaml.Node) error) error {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.errorf(k, "%skeys must be plain words", prefix)
		}
		if seen[k.Value] {
			return p.errorf(k, "duplicate key %q", prefix+k.Value)
		}
		seen[k.Value] = true
		if err := each(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func (p parser) str(n *yaml.Node, key string, out *string) error {
	if isNull(n) {
		*out = ""
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return p.errorf(n, "%s: must be a single value, not a list or mapping", key)
	}
	*out = n.Value
	return nil
}

func (p parser) boolean(n *yaml.Node, key string, out *bool) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return p.errorf(n, "%s: must be true or false, not %q", key, n.Value)
	}
	*out = n.Value == "true"
	return nil
}

func (p parser) list(n *yaml.Node, key string) ([]string, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n, "%s: must be a list, e.g. [a, b]", key)
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode || isNull(item) || strings.TrimSpace(item.Value) == "" {
			return nil, p.errorf(item, "%s: every item must be a non-empty text", key)
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// Limits that keep suggestions usable as buttons in every channel (Slack
// shows at most four suggested prompts).
const (
	MaxSuggestions     = 4
	MaxSuggestionRunes = 75
)

func (p parser) suggestions(n *yaml.Node) error {
	if len(n.Content) > MaxSuggestions {
		return p.errorf(n, "suggestions: at most %d, not %d", MaxSuggestions, len(n.Content))
	}
	for _, item := range n.Content {
		if r := []rune(item.Value); len(r) > MaxSuggestionRunes || strings.TrimSpace(item.Value) == "" {
			return p.errorf(item, "suggestions: each must be 1 to %d characters, not %d", MaxSuggestionRunes, len(r))
		}
	}
	return nil
}

func (p parser) unique(n *yaml.Node, key string) error {
	seen := map[string]bool{}
	for _, item := range n.Content {
		if seen[item.Value] {
			return p.errorf(item, "%s: %q is listed twice", key, item.Value)
		}
		seen[item.Value] = true
	}
	return nil
}

// intRange reads a whole number in [lo, hi]; hi 0 means no upper bound.
func (p parser) intRange(n *yaml.Node, key string, lo, hi int, out *int) error {
	if isNull(n) {
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
		return p.errorf(n, "%s: must be a whole number", key)
	}
	switch {
	case hi == 0 && v < lo:
		return p.errorf(n, "%s: must be at least %d", key, lo)
	case hi != 0 && (v < lo || v > hi):
		return p.errorf(n, "%s: must be between %d and %d", key, lo, hi)
	}
	*out = v
	return nil
}

func (p parser) temperature(n *yaml.Node) (*float64, error) {
	if isNull(n) {
		return nil, nil
	}
	var t float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") || n.Decode(&t) != nil {
		return nil, p.errorf(n, "temperature: must be a number")
	}
	if t < 0 || t > 2 {
		return nil, p.errorf(n, "temperature: must be between 0 and 2")
	}
	return &t, nil
}

func (p parser) memory(n *yaml.Node, m *Memory) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "memory: must be a mapping, e.g. { policy: sliding-window, window: 20 }")
	}
	return p.mapping(n, "memory.", func(key string, k, v *yaml.Node) error {
		switch key {
		case "policy":
			if err := p.str(v, "memory.policy", &m.Policy); err != nil {
				return err
			}
			if m.Policy == "" {
				m.Policy = SlidingWindow
			}
			if m.Policy != SlidingWindow && m.Policy != Compact {
				return p.errorf(v, "memory.policy: unknown policy %q (want %s or %s)", m.Policy, Compact, SlidingWindow)
			}
			return nil
		case "window":
			return p.intRange(v, "memory.window", 1, 1000, &m.Window)
		case "max_context_tokens":
			return p.intRange(v, "memory.max_context_tokens", 1000, 10_000_000, &m.MaxContextTokens)
		case "recall":
			return p.boolean(v, "memory.recall", &m.Recall)
		case "summary_model":
			return p.str(v, "memory.summary_model", &m.SummaryModel)
		case "keep_tool_results":
			var n int
			if err := p.intRange(v, "memory.keep_tool_results", 0, 1000, &n); err != nil {
				return err
			}
			m.KeepToolResults = &n
			return nil
		}
		return p.errorf(k, "unknown key %q", "memory."+key)
	})
}

func (p parser) approval(n *yaml.Node, a *Approval) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "approval: must be a mapping, e.g. { default: ask, auto: [current_time] }")
	}
	return p.mapping(n, "approval.", func(key string, k, v *yaml.Node) error {
		switch key {
		case "default":
			var s string
			if err := p.str(v, "approval.default", &s); err != nil {
				return err
			}
			switch Policy(s) {
			case Auto, Ask, Deny:
				a.Default = Policy(s)
				return nil
			}
			return p.errorf(v, "approval.default: unknown policy %q (want auto, ask or deny)", s)
		case "auto", "ask", "deny":
			list, err := p.list(v, "approval."+key)
			if err != nil {
				return err
			}
			switch Policy(key) {
			case Auto:
				a.Auto = list
			case Ask:
				a.Ask = list
			case Deny:
				a.Deny = list
			}
			return nil
		}
		return p.errorf(k, "unknown key %q (approval takes default, auto, ask and deny)", "approval."+key)
	})
}

// unknownHint is what follows "unknown X": what there is, and the closest
// name when it looks like a slip of the keyboard.
func unknownHint(name string, have []string) string {
	if len(have) == 0 {
		return " (have: none)"
	}
	hint := " (have: " + strings.Join(have, ", ") + ")"
	best, bestD := "", 3
	for _, h := range have {
		if d := editDistance(h, name); d < bestD && d <= max(1, len(name)/4) {
			best, bestD = h, d
		}
	}
	if best != "" {
		hint += fmt.Sprintf(": did you mean %q?", best)
	}
	return hint
}

// editDistance counts the edits between two short names: insertions,
// deletions, substitutions and swaps of neighbours ("mian" is one slip from
// "main"), the optimal string alignment distance.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// approvalTools runs once tools is known (the keys may come in any order): a
// tool in an approval list must be one of the guide's tools, and in one list
// only — otherwise the policy would be a guess.
func (p parser) approvalTools(n *yaml.Node, tools []string) error {
	listed := map[string]string{}
	return p.mapping(n, "approval.", func(key string, k, v *yaml.Node) error {
		if key == "default" {
			return nil
		}
		for _, item := range v.Content {
			if !Covers(tools, item.Value) {
				// Most often the name is misspelt in tools, not here: say which.
				for _, t := range tools {
					if d := editDistance(t, item.Value); d <= 2 && d <= len(item.Value)/4 {
						return p.errorf(item, "approval.%s: tool %q is not in tools, which has %q: is one of them misspelt?", key, item.Value, t)
					}
				}
				return p.errorf(item, "approval.%s: tool %q is not in tools (%s)", key, item.Value, strings.Join(tools, ", "))
			}
			if prev, ok := listed[item.Value]; ok {
				return p.errorf(item, "approval.%s: tool %q is already listed in approval.%s", key, item.Value, prev)
			}
			listed[item.Value] = key
		}
		return nil
	})
}

// Catalog is the set of guides. What it holds is never changed in place:
// Reload makes a new snapshot and swaps it in whole, so sessions read it
// without locking, and a reader sees one snapshot or the next, never half
// of one (reload.go).
type Catalog struct {
	dir string
	cur atomic.Pointer[snapshot]
	// reloading keeps reloads in order: a watcher's and SIGHUP's may meet.
	reloading sync.Mutex
}

// LoadDir parses every *.md file in dir. All broken guides are reported at
// once, so fixing them is not one restart per typo.
func LoadDir(dir string) (*Catalog, error) {
	found, problems, err := scan(dir, nil)
	if err != nil {
		return nil, err
	}
	problems = append(problems, linkHandoffs(found, nil)...)
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	snap := snapshotOf(found)
	if len(snap.names) == 0 {
		return nil, fmt.Errorf("guides: no guides (*.md files) in %s", dir)
	}
	c := &Catalog{dir: dir}
	c.cur.Store(snap)
	return c, nil
}

// Dir is the folder the guides are read from.
func (c *Catalog) Dir() string { return c.dir }

// Get returns a copy of the named guide, so callers cannot change the
// catalog. A guide whose file was deleted since start-up is not found
// (Latest finds it).
func (c *Catalog) Get(name string) (Guide, bool) {
	g, ok := c.cur.Load().guides[name]
	if !ok {
		return Guide{}, false
	}
	return g.clone(), true
}

// Latest returns a copy of the named guide as a conversation that uses it
// should run it now: its current version, or, if its file was deleted
// since start-up, the last version read (a deleted guide is no longer
// offered, but conversations under way keep it until a restart).
func (c *Catalog) Latest(name string) (Guide, bool) {
	snap := c.cur.Load()
	g, ok := snap.guides[name]
	if !ok {
		g, ok = snap.retired[name]
	}
	if !ok {
		return Guide{}, false
	}
	return g.clone(), true
}

// Generation changes with every reload that changed a guide: a session
// compares it with the one its guide came from to know, cheaply, whether
// to look again.
func (c *Catalog) Generation() uint64 { return c.cur.Load().generation }

// Names returns the guides' names, sorted (deleted ones left out).
func (c *Catalog) Names() []string { return slices.Clone(c.cur.Load().names) }

// Check reports every guide that names a provider, fallback provider or
// tool the gateway does not have, listing what it has and the likely
// misspelling. It is separate from parsing because the providers and tools
// are only known once the configuration is loaded. groups are the MCP
// servers configured: "server.*" and "server.tool" are theirs, whose tools
// are known only once the server answers.
func (c *Catalog) Check(providers, tools, groups []string) error {
	snap := c.cur.Load()
	var errs []error
	for _, name := range snap.names {
		errs = append(errs, Needs{Providers: providers, Tools: tools, Groups: groups}.Check(snap.guides[name]))
	}
	return errors.Join(errs...)
}

// Needs is what a gateway has that guides name: its providers, its tools
// and its MCP servers (groups: "server.*" and "server.tool" are theirs,
// whose tools are known only once the server answers).
type Needs struct {
	Providers, Tools, Groups []string
}

// Check reports everything g names that n lacks, each error naming the
// guide and its file.
func (n Needs) Check(g Guide) error {
	var errs []error
	where := fmt.Sprintf("guide %q (%s)", g.Name, g.File)
	if g.Provider != "" && !slices.Contains(n.Providers, g.Provider) {
		errs = append(errs, fmt.Errorf("%s: provider %q is not configured%s", where, g.Provider, unknownHint(g.Provider, n.Providers)))
	}
	if g.Fallback != "" && !slices.Contains(n.Providers, g.Fallback) {
		errs = append(errs, fmt.Errorf("%s: fallback provider %q is not configured%s", where, g.Fallback, unknownHint(g.Fallback, n.Providers)))
	}
	for _, t := range g.Tools {
		if group, _, ok := strings.Cut(t, "."); ok {
			if !slices.Contains(n.Groups, group) {
				errs = append(errs, fmt.Errorf("%s: tool %q: no MCP server %q is configured (tools.mcp)%s", where, t, group, unknownHint(group, n.Groups)))
			}
			continue
		}
		if !slices.Contains(n.Tools, t) {
			errs = append(errs, fmt.Errorf("%s: unknown tool %q%s", where, t, unknownHint(t, n.Tools)))
		}
	}
	return errors.Join(errs...)
}
