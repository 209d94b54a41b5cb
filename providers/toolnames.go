package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// Tools from MCP servers are named "server.tool" in the gateway, in guides
// and in what people see; OpenAI and Anthropic accept only
// ^[A-Za-z0-9_-]{1,64}$ as a function name. So a request's tool names that
// do not fit are sent under a wire name ("github__create_issue", cut and
// given a hash when too long), and the model's calls are read back through
// the request's own table: the mapping needs no state, and a name that
// already fits costs nothing.

var wireSafe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// wireNames returns req with every tool name made wire-safe, and the table
// from wire name back to the gateway's; nil when every name fits.
func wireNames(req Request) (Request, map[string]string) {
	toWire := map[string]string{}
	taken := map[string]bool{}
	for _, t := range req.Tools {
		taken[t.Name] = true
	}
	for _, t := range req.Tools {
		if wireSafe.MatchString(t.Name) {
			continue
		}
		w := wireName(t.Name)
		for taken[w] { // never collides with a tool of the request
			w = wireName(w + "'")
		}
		taken[w] = true
		toWire[t.Name] = w
	}
	if len(toWire) == 0 {
		return req, nil
	}
	out := req
	out.Tools = make([]ToolSpec, len(req.Tools))
	for i, t := range req.Tools {
		if w, ok := toWire[t.Name]; ok {
			t.Name = w
		}
		out.Tools[i] = t
	}
	// The history names the same tools: the model must see one name.
	out.Messages = make([]switchboard.Message, len(req.Messages))
	for i, m := range req.Messages {
		if w, ok := toWire[m.ToolName]; ok {
			m.ToolName = w
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]switchboard.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				if w, ok := toWire[c.Name]; ok {
					c.Name = w
				}
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		out.Messages[i] = m
	}
	back := make(map[string]string, len(toWire))
	for name, w := range toWire {
		back[w] = name
	}
	return out, back
}

// wireName is name with dots as "__", other characters dropped, and a
// hash of the whole added when something was dropped or it is longer
// than 64.
func wireName(name string) string {
	w := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return -1
	}, strings.ReplaceAll(name, ".", "__"))
	if w == "" || len(w) > 64 || w != strings.ReplaceAll(name, ".", "__") {
		sum := sha256.Sum256([]byte(name))
		w = w[:min(len(w), 55)] + "_" + hex.EncodeToString(sum[:4])
	}
	return w
}
