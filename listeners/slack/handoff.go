package slack

import (
	"context"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// handoff shows the conversation passing to another guide as a message
// of its own, one context block (small grey text, Slack's own line for
// what is about the conversation rather than in it): "Passed to billing:
// …". The reply under way, if any, is finished first: what follows is
// the other guide's.
func (f *follow) handoff(ctx context.Context, d *switchboard.HandoffData) {
	f.endReply(ctx)
	line := places.Handoff(*d, mrkdwnEscape)
	f.post(ctx, line, []slackapi.Block{contextLine(line)})
}
