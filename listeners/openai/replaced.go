package openai

import (
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// streamedText is what a turn's deltas showed of each assistant message,
// by its id. A message normally ends as its deltas added up; one whose
// final text is not that was replaced after part of it streamed (a
// guardrail blocked the answer, docs/guardrails.md). An answer built from
// deltas cannot take back what was sent, so it goes on with the final
// text: the client reads the rule's message, not a silence.
type streamedText map[string]string

func (s streamedText) delta(d *switchboard.DeltaData) { s[d.MessageID] += d.Content }

// rest is what an assistant message adds to the answer: nothing when its
// deltas showed it whole, else the text they did not show.
func (s streamedText) rest(d *switchboard.MessageData) string {
	if d.Role != switchboard.RoleAssistant {
		return ""
	}
	shown := s[d.ID]
	delete(s, d.ID)
	if rest, ok := strings.CutPrefix(d.Content, shown); ok {
		return rest
	}
	return "\n\n" + d.Content
}
