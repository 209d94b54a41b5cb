package slack

// Native streaming: Slack's chat.startStream / appendStream / stopStream
// show a reply growing as the model writes it, without the edits' one-a-
// second limit and in Slack's own Markdown rendering (markdown_text). Where
// the workspace or the place does not take it (the feature is off, an old
// workspace, a reply nobody in particular asked for in a channel), replies
// are posted and edited instead (follow.flush).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"
)

// nativeLimit is the most characters one streamed message holds before the
// reply continues in the next: Slack takes 12,000 of markdown_text.
const nativeLimit = 11_000

// nativeStream is a reply being streamed natively.
type nativeStream struct {
	ts        string // the message being streamed now
	sent      int    // bytes of the reply sent so far, over all its messages
	inMsg     int    // characters in the current message
	fenceOpen bool   // the text sent so far leaves a code fence open
	piece     int
}

// flushNative sends what the reply gained since the last flush to its
// stream, starting one (or the next, past nativeLimit) as needed. It
// reports false when the reply is to be posted and edited instead.
func (f *follow) flushNative(ctx context.Context, r *streamed) bool {
	if r.native == nil {
		if r.tried || len(r.posted) > 0 || !f.l.nativeOK.Load() || (!isDM(f.at.channel) && f.asker == "") {
			return false
		}
		r.tried = true
		r.native = &nativeStream{}
	}
	n := r.native
	full := r.text.String()
	if len(full) < n.sent {
		return true // the final text is shorter: nothing more to send
	}
	pending := full[n.sent:]
	for pending != "" {
		chunk := pending
		room := nativeLimit - n.inMsg
		if n.ts != "" && utf8.RuneCountInString(chunk) > room {
			if room > 1000 { // fill this message at a line break first
				cut := cutAt(chunk, room)
				if err := f.append(ctx, n, chunk[:cut]); err != nil {
					return true // tried again at the next flush
				}
				pending = pending[cut:]
				continue
			}
			// Continue in the next message, closing and reopening a
			// code block the cut falls in.
			tail := ""
			if n.fenceOpen {
				tail = "\n```"
			}
			f.stopStream(ctx, n, tail, false)
			n.ts, n.inMsg = "", 0
			n.piece++
			continue
		}
		if utf8.RuneCountInString(chunk) > nativeLimit {
			chunk = chunk[:cutAt(chunk, nativeLimit)]
		}
		if n.ts == "" {
			head := ""
			if n.fenceOpen {
				head = "```\n"
			}
			ts, err := f.startStream(ctx, head+chunk)
			if err != nil {
				var se slackapi.SlackErrorResponse
				if errors.As(err, &se) && n.sent == 0 {
					// The workspace does not stream: edit messages from now on.
					if f.l.nativeOK.CompareAndSwap(true, false) {
						f.l.log.Info("slack: native streaming unavailable, editing messages instead", "err", err)
					}
					r.native = nil
					return false
				}
				f.l.log.Warn("slack: start a stream", "place", f.b.Address, "err", err)
				return true
			}
			n.ts, n.inMsg = ts, utf8.RuneCountInString(head)
			f.saveStream(ctx, n.ts, r.id, n.piece)
			n.sent += len(chunk)
			n.inMsg += utf8.RuneCountInString(chunk)
			n.fenceOpen = fenceOpenAfter(n.fenceOpen, chunk)
			pending = pending[len(chunk):]
			continue
		}
		if err := f.append(ctx, n, chunk); err != nil {
			return true
		}
		pending = pending[len(chunk):]
	}
	r.dirty = false
	r.lastOut = time.Now()
	return true
}

func (f *follow) append(ctx context.Context, n *nativeStream, chunk string) error {
	err := f.l.retry(ctx, func() error {
		_, _, err := f.l.api.AppendStreamContext(ctx, f.at.channel, n.ts, slackapi.MsgOptionMarkdownText(chunk))
		return err
	})
	if err != nil {
		f.l.log.Warn("slack: append to a stream", "place", f.b.Address, "err", err)
		return err
	}
	n.sent += len(chunk)
	n.inMsg += utf8.RuneCountInString(chunk)
	n.fenceOpen = fenceOpenAfter(n.fenceOpen, chunk)
	return nil
}

func (f *follow) startStream(ctx context.Context, text string) (string, error) {
	opts := []slackapi.MsgOption{slackapi.MsgOptionMarkdownText(text)}
	if f.at.threadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(f.at.threadTS))
	}
	if !isDM(f.at.channel) {
		opts = append(opts, slackapi.MsgOptionRecipientUserID(f.asker), slackapi.MsgOptionRecipientTeamID(f.l.teamID))
	}
	var ts string
	err := f.l.retry(ctx, func() (err error) {
		_, ts, err = f.l.api.StartStreamContext(ctx, f.at.channel, opts...)
		return err
	})
	return ts, err
}

// stopStream ends a streamed message with tail, and marks it with the
// reply and piece it holds (message metadata, see shown), and whether it
// is the reply's last.
func (f *follow) stopStream(ctx context.Context, n *nativeStream, tail string, last bool) {
	f.curReply, f.curPiece = f.reply.id, n.piece
	meta := f.meta()
	f.curReply = ""
	if last { // the reply's end: a replay shows none of it again
		meta.EventPayload["done"] = true
	}
	opts := []slackapi.MsgOption{slackapi.MsgOptionMetadata(meta)}
	if tail != "" {
		opts = append(opts, slackapi.MsgOptionMarkdownText(tail))
	}
	if err := f.l.retry(ctx, func() error {
		_, _, err := f.l.api.StopStreamContext(ctx, f.at.channel, n.ts, opts...)
		return err
	}); err != nil {
		f.l.log.Warn("slack: stop a stream", "place", f.b.Address, "err", err)
	}
	f.saveStream(ctx, "", "", 0)
}

// openStream is the stream a place has under way, kept with its binding
// (Binding.State): Slack's startStream takes no metadata, so a restart
// learns of a stream it left open only from here.
type openStream struct {
	TS    string `json:"stream"`
	Reply string `json:"reply"`
	Piece int    `json:"piece"`
}

func (f *follow) saveStream(ctx context.Context, ts, reply string, piece int) {
	state := ""
	if ts != "" {
		b, _ := json.Marshal(openStream{TS: ts, Reply: reply, Piece: piece})
		state = string(b)
	}
	// Noted even if the listener is stopping now: the store outlives it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := f.l.sessions.SetState(ctx, f.b, state); err != nil {
		f.l.log.Warn("slack: keeping the open stream", "place", f.b.Address, "err", err)
	}
}

// stopLeftStream stops a stream the listener left open when it stopped
// (killed mid-reply), marking it with the reply and piece it holds: the
// replay then finds it (shown) and edits it to the whole reply.
func (f *follow) stopLeftStream(ctx context.Context) {
	b, err := f.l.sessions.Binding(ctx, Channel, f.b.Address)
	if err != nil || b.SessionID != f.b.SessionID || b.State == "" {
		return
	}
	var open openStream
	if json.Unmarshal([]byte(b.State), &open) != nil || open.TS == "" {
		return
	}
	meta := slackapi.SlackMetadata{EventType: metaType, EventPayload: map[string]any{
		"session": f.b.SessionID, "reply": open.Reply, "piece": open.Piece}}
	if err := f.l.retry(ctx, func() error {
		_, _, err := f.l.api.StopStreamContext(ctx, f.at.channel, open.TS, slackapi.MsgOptionMetadata(meta))
		return err
	}); err != nil {
		f.l.log.Info("slack: a stream left open by the last run", "place", f.b.Address, "err", err)
	}
	f.saveStream(ctx, "", "", 0)
}

// endReply shows the reply as it is, for the last time: a stream is
// stopped, an edited message gets its last edit.
func (f *follow) endReply(ctx context.Context) {
	r := f.reply
	if r == nil {
		return
	}
	f.flush(ctx, true)
	if r.native != nil && r.native.ts != "" {
		f.stopStream(ctx, r.native, "", true)
	}
	f.reply = nil
}

// cutAt is where to cut s to keep at most n characters: the last line
// break in that span, else the last space, else n characters.
func cutAt(s string, n int) int {
	end := len(s)
	if utf8.RuneCountInString(s) > n {
		end = 0
		for range n {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
		}
	}
	if end == len(s) {
		return end
	}
	if i := strings.LastIndexByte(s[:end], '\n'); i > end/2 {
		return i + 1
	}
	if i := strings.LastIndexByte(s[:end], ' '); i > end/2 {
		return i + 1
	}
	return end
}

// fenceOpenAfter reports whether a code fence is open after text, given
// whether one was open before it.
func fenceOpenAfter(open bool, text string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			open = !open
		}
	}
	return open
}
