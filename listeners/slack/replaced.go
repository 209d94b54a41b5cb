package slack

// A reply whose final text is not what its native stream showed: a
// guardrail blocked the answer after some of it was shown (sessions'
// guardrails.go, docs/guardrails.md), and the final message carries the
// rule's message instead. Slack cannot take back what a stream appended,
// so the stream is stopped and its message edited to the final text, as
// a posted reply is: the text that streamed does not stay in the thread.

import (
	"context"
	"strings"
)

// replacesStream reports whether final does not go on from what r's
// native stream sent.
func replacesStream(r *streamed, final string) bool {
	n := r.native
	if n == nil || n.ts == "" || n.sent == 0 {
		return false
	}
	sent := r.text.String()
	return n.sent > len(sent) || !strings.HasPrefix(final, sent[:n.sent])
}

// unstream stops r's native stream and makes its message a posted piece
// of the reply, which the next flush edits to the reply's text. A reply
// that filled more than one streamed message (past nativeLimit) keeps
// its earlier ones.
func (f *follow) unstream(ctx context.Context, r *streamed) {
	n := r.native
	f.stopStream(ctx, n, "", true)
	r.native = nil
	r.posted = []postedPiece{{ts: n.ts}}
}
