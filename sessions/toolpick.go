package sessions

// Tool retrieval: a guide that offers more tools than its tools_max (an
// MCP server easily brings fifty) gives each request a few of them, and
// find_tools to ask for others.
//
// What a request carries is decided from the stored conversation alone,
// so a turn resumed after a restart or an approval offers what it offered
// before: the pinned tools and the best matches for the messages up to
// the person's latest (tools.Registry.Search), up to tools_max with
// find_tools itself; then, beyond tools_max, the tools called since that
// message and those find_tools found in the turn (turn.Found, stored with
// it). Within a turn the set only grows, which keeps a provider's prompt
// cache warm; it is listed in the guide's order, never by score, for the
// same reason. The model can call only what a request carried (a
// provider maps the names back through it); a call to any other tool is
// answered with a pointer to find_tools.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/tools"
)

// findToolsName is the tool a request carries when not all of the guide's
// tools fit. No registered tool has its name: built-ins are named here,
// an MCP server's are "server.tool".
const findToolsName = "find_tools"

// find_tools' bounds, and how much of the conversation picks the tools.
const (
	maxFindQuery     = 500 // characters
	maxFindLimit     = 10
	defaultFindLimit = 5
	queryMessages    = 3    // the last user and assistant messages …
	queryBytes       = 2000 // … each up to this long
	foundDescription = 300  // characters of a description find_tools shows
)

// offerable are the guide's tools the model may call now, in the guide's
// order: the ones it lists, an MCP server's "server.*" standing for the
// tools the server has now, less those the guide denies.
func (s *session) offerable() []tools.Tool {
	var out []tools.Tool
	for _, name := range s.guideTools() {
		if s.guide.Approval.For(name) == guides.Deny {
			continue // a tool the model may never use is not offered
		}
		if t, ok := s.m.cfg.Tools.Lookup(name); ok {
			out = append(out, t)
		}
	}
	return out
}

// toolsMax is the guide's tools_max (a guide built in code may leave it 0).
func (s *session) toolsMax() int {
	return min(cmp.Or(s.guide.ToolsMax, guides.DefaultToolsMax), guides.MaxToolsMax)
}

// choose is what the next request of turn t carries of all, the guide's
// tools the model may call now: all of them when they fit in tools_max,
// or a choice of them (see the file's comment), and then retrieving is
// set and find_tools is to be offered too.
func (s *session) choose(t *turn, all []tools.Tool) (offered []tools.Tool, retrieving bool) {
	limit := s.toolsMax()
	if len(all) <= limit {
		return all, false
	}
	has := make(map[string]bool, len(all))
	for _, tool := range all {
		has[tool.Name] = true
	}
	keep := map[string]bool{}
	for _, tool := range all {
		if guides.Covers(s.guide.ToolsPinned, tool.Name) {
			keep[tool.Name] = true
		}
	}
	if room := limit - 1 - len(keep); room > 0 {
		for _, name := range s.m.cfg.Tools.Search(s.askedText(), room, func(name string) bool { return has[name] && !keep[name] }) {
			keep[name] = true
		}
	}
	for _, name := range append(s.calledThisTurn(), t.Found...) {
		if has[name] {
			keep[name] = true
		}
	}
	for _, tool := range all {
		if keep[tool.Name] && len(offered) < guides.MaxToolsMax-1 {
			offered = append(offered, tool)
		}
	}
	return offered, true
}

// toolSpecs are the tools the next request of turn t carries.
func (s *session) toolSpecs(t *turn) []providers.ToolSpec {
	all := s.offerable()
	offered, retrieving := s.choose(t, all)
	specs := make([]providers.ToolSpec, 0, len(offered)+1)
	for _, tool := range offered {
		specs = append(specs, providers.ToolSpec{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters})
	}
	if retrieving {
		specs = append(specs, findToolsSpec(len(all), len(offered)))
	}
	specs = append(specs, s.handoffSpecs()...) // handoff.go
	return append(specs, s.clientSpecs(t, specs)...)
}

func findToolsSpec(all, offered int) providers.ToolSpec {
	return providers.ToolSpec{
		Name: findToolsName,
		Description: fmt.Sprintf("You have %d tools; %d of them are offered now, chosen for this conversation. "+
			"Describe what you need to find others that fit it; the tools found can be called from your next step on.",
			all, offered),
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"query":{"type":"string","description":"What the tool should do, e.g. create an issue in a repository"},
			"limit":{"type":"integer","minimum":1,"maximum":10,"description":"How many tools at most (5)"}},
			"required":["query"],"additionalProperties":false}`),
	}
}

// calledThisTurn are the tools the model called since the last person's
// message.
func (s *session) calledThisTurn() []string {
	var names []string
	for i := len(s.window) - 1; i >= 0 && s.window[i].Role != switchboard.RoleUser; i-- {
		for _, c := range s.window[i].ToolCalls {
			names = append(names, c.Name)
		}
	}
	return names
}

// askedText is what the tools are chosen for: the person's latest
// message and the few messages before it, the latest first. What the
// model says within the turn does not count, so the choice holds for the
// whole turn.
func (s *session) askedText() string {
	i := len(s.window) - 1
	for i >= 0 && s.window[i].Role != switchboard.RoleUser {
		i--
	}
	var b strings.Builder
	for n := 0; i >= 0 && n < queryMessages; i-- {
		m := s.window[i]
		if m.Role != switchboard.RoleUser && m.Role != switchboard.RoleAssistant || m.Content == "" {
			continue
		}
		b.WriteString(preview(m.Content, queryBytes))
		b.WriteString("\n")
		n++
	}
	return b.String()
}

// findTools answers a find_tools call of turn t: the best matches for its
// query among the guide's tools not offered now, which are added to what
// the turn's next requests carry.
func (s *session) findTools(t *turn, args json.RawMessage) (string, bool) {
	var in struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return `find_tools takes {"query": "what the tool should do", "limit": 5}: ` + err.Error(), true
	}
	q := strings.TrimSpace(in.Query)
	switch {
	case q == "":
		return "query is empty: describe what the tool should do", true
	case utf8.RuneCountInString(q) > maxFindQuery:
		return fmt.Sprintf("query is %d characters; at most %d", utf8.RuneCountInString(q), maxFindQuery), true
	}
	limit := min(max(in.Limit, 0), maxFindLimit)
	if limit == 0 {
		limit = defaultFindLimit
	}
	all := s.offerable()
	offered, _ := s.choose(t, all)
	now := make(map[string]bool, len(offered))
	for _, tool := range offered {
		now[tool.Name] = true
	}
	can := make(map[string]tools.Tool, len(all))
	for _, tool := range all {
		can[tool.Name] = tool
	}
	found := s.m.cfg.Tools.Search(q, limit, func(name string) bool { _, ok := can[name]; return ok && !now[name] })
	if len(found) == 0 {
		return fmt.Sprintf("No tool you do not have already matches %q. Try other words, or answer with the tools you have.", q), false
	}
	var b strings.Builder
	b.WriteString("These tools can be called from your next step on:\n")
	for _, name := range found {
		desc := strings.Join(strings.Fields(can[name].Description), " ")
		if utf8.RuneCountInString(desc) > foundDescription {
			desc = string([]rune(desc)[:foundDescription]) + "…"
		}
		fmt.Fprintf(&b, "- %s: %s\n", name, cmp.Or(desc, "(no description)"))
		if !slices.Contains(t.Found, name) {
			t.Found = append(t.Found, name)
		}
	}
	// What a turn found stays bounded, however often the model looks.
	if over := len(t.Found) - s.toolsMax(); over > 0 {
		t.Found = slices.Delete(t.Found, 0, over)
	}
	return b.String(), false
}
