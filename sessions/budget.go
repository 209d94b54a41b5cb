package sessions

// Budget: a request is built to fit the model's context window. The
// window kept in memory is the guide's last messages (memory.window); a
// request made of it is measured with a cheap estimate
// (providers.EstimateTokens) scaled by what the provider reported for
// this session's earlier requests, and when it would not fit it loses its
// oldest exchanges, cut only before a user message so that a tool call is
// never parted from its results. Before that, tool results older than the
// guide's memory.keep_tool_results (3) are a one-line stub when they are
// large (stubResults). What still does not fit — one pasted
// document, one huge tool result — is cut, with a note the model reads.
// A provider that refuses a request as too long anyway
// (providers.ErrContextTooLong: the window was not known, or the estimate
// was off) gets one shorter request, and the session keeps the tighter
// budget. Nothing stored changes: the history keeps every message whole.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// replyReserve is what a request leaves of the context window for the
// answer when the guide sets no max_tokens.
const replyReserve = 4096

// minKept is the least a message cut to fit keeps, in tokens.
const minKept = 256

// fitting is a session's measure of its requests.
type fitting struct {
	// scale turns an estimate into the provider's count: the ratio of
	// the prompt tokens it reported to the estimate of what was sent,
	// smoothed (1 until it reports).
	scale float64
	// squeeze is the budget a refusal as too long left, 0 for none.
	squeeze int
}

func (f *fitting) tokens(n int) int {
	return int(math.Ceil(float64(n) * cmp.Or(f.scale, 1)))
}

// observe calibrates the estimate with the prompt tokens the provider
// reported for a request estimated at estimate.
func (f *fitting) observe(estimate, reported int) {
	if estimate <= 0 || reported <= 0 {
		return
	}
	r := float64(reported) / float64(estimate)
	if f.scale == 0 {
		f.scale = 1
	}
	f.scale = min(max(0.7*f.scale+0.3*r, 0.5), 4)
}

// budget is how many prompt tokens a request may hold, 0 when no bound is
// known: the model's window less room for the answer, the guide's
// memory.max_context_tokens, and what a refusal left, whichever is least.
func (s *session) budget() int {
	b := 0
	if p := s.m.providers().of(s.guide); p != nil && p.ContextWindow > 0 {
		b = p.ContextWindow - cmp.Or(s.guide.MaxTokens, min(replyReserve, p.ContextWindow/4))
	}
	for _, limit := range []int{s.guide.Memory.MaxContextTokens, s.fitting.squeeze} {
		if limit > 0 && (b <= 0 || limit < b) {
			b = limit
		}
	}
	return b
}

// bulkyResult is the size past which an old tool result is a stub in a
// request (see stubResults).
const bulkyResult = 1024

// stubResults replaces, in a request's messages, each tool result older
// than the latest keep that is longer than bulkyResult by a line naming
// the tool and its size: a sandbox run's or an MCP server's 64 KiB output
// is read by the model when it comes, and need not fill every request
// after. The stored message keeps it whole. msgs is not modified.
func stubResults(msgs []switchboard.Message, keep int) []switchboard.Message {
	var out []switchboard.Message
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != switchboard.RoleTool {
			continue
		}
		if seen++; seen <= keep || len(m.Content) <= bulkyResult {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i].Content = fmt.Sprintf("[The result of %s, %d bytes, is left out here to save the model's context; call the tool again if it is needed.]",
			cmp.Or(m.ToolName, "the tool"), len(m.Content))
	}
	if out == nil {
		return msgs
	}
	return out
}

// fit shortens req's messages to the session's budget (see the top of
// this file). It reports how many messages it left out and how many it
// cut; req.Messages is never modified in place.
func (s *session) fit(req providers.Request) (out providers.Request, dropped, cut int) {
	req.Messages = stubResults(req.Messages, s.guide.Memory.ToolResultsKept())
	budget := s.budget()
	if budget <= 0 || len(req.Messages) == 0 {
		return req, 0, 0
	}
	f := &s.fitting
	total := f.tokens(providers.EstimateTokens(providers.Request{System: req.System, Tools: req.Tools}))
	costs := make([]int, len(req.Messages))
	for i, m := range req.Messages {
		costs[i] = f.tokens(providers.EstimateMessage(m))
		total += costs[i]
	}
	if total <= budget {
		return req, 0, 0
	}
	msgs, start := req.Messages, 0
	for c := 1; c < len(msgs) && total > budget; c++ {
		if msgs[c].Role != switchboard.RoleUser {
			continue
		}
		for _, n := range costs[start:c] {
			total -= n
		}
		start = c
	}
	kept := slices.Clone(msgs[start:])
	costs = costs[start:]
	for total > budget {
		j := -1 // the largest message not cut yet
		for i, m := range kept {
			if costs[i] > minKept && !isCut(m) && (j < 0 || costs[i] > costs[j]) {
				j = i
			}
		}
		if j < 0 {
			break // as short as it goes: the provider may still refuse it
		}
		keep := max(costs[j]-(total-budget), minKept)
		kept[j].Content = cutTo(kept[j].Content, int(float64(keep*4)/cmp.Or(f.scale, 1)))
		n := f.tokens(providers.EstimateMessage(kept[j]))
		total -= costs[j] - n
		costs[j] = n
		cut++
	}
	req.Messages = kept
	return req, start, cut
}

// cutNote ends a message fit had to cut.
const cutNote = "\n\n[The rest of this message was left out here: it does not fit in the model's context. It is stored whole.]"

func isCut(m switchboard.Message) bool {
	return len(m.Content) >= len(cutNote) && m.Content[len(m.Content)-len(cutNote):] == cutNote
}

// cutTo keeps about n bytes of s (at a character boundary) and the note.
func cutTo(s string, n int) string {
	if n >= len(s) {
		return s + cutNote
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + cutNote
}
