package slack

// Native streaming: Slack's chat.startStream / appendStream / stopStream
// show a reply growing as the model writes it, without the edits' one-a-
// second limit and in Slack's own Markdown rendering (markdown_text). A
// streamed message is always a reply to a person's request: startStream
// requires thread_ts, so in a channel the reply streams into the thread,
// and at a DM's top level under the message it answers (asks). Where the
// app, the place or the reply does not take it (the method is not the
// app's, a channel Slack streams nowhere in, a reply nobody in particular
// asked for in a channel, a DM message whose ts is unknown), replies are
// posted and edited instead (follow.flush).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
)

// nativeLimit is the most characters one streamed message holds before the
// reply continues in the next: Slack takes 12,000 of markdown_text.
const nativeLimit = 11_000

// nativeStream is a reply being streamed natively.
type nativeStream struct {
	thread    string // the thread_ts it streams under
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
		if r.tried || len(r.posted) > 0 {
			return false
		}
		thread := f.streamThread()
		if thread == "" {
			return false
		}
		r.tried = true
		r.native = &nativeStream{thread: thread}
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
			ts, err := f.startStream(ctx, n.thread, slackapi.MsgOptionMarkdownText(head+chunk))
			if err != nil {
				var se slackapi.SlackErrorResponse
				if errors.As(err, &se) && n.sent == 0 {
					f.streamRefused(se)
					r.native = nil
					return false // this reply is edited into place
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

// streamThread is the thread_ts a stream in the place goes under now, ""
// where none may be started: the app or the place does not take streams,
// a channel's reply has no one in particular to stream to, or there is
// nothing to stream under (Slack streams only replies).
func (f *follow) streamThread() string {
	if !f.l.nativeOK.Load() || f.stream.refused != "" || (!isDM(f.at.channel) && f.asker == "") {
		return ""
	}
	if f.at.threadTS != "" {
		return f.at.threadTS
	}
	return f.stream.answering // a DM's top level: under the message answered
}

// startStream starts a stream under thread with what content gives
// (markdown_text, chunks) and returns its ts.
func (f *follow) startStream(ctx context.Context, thread string, content ...slackapi.MsgOption) (string, error) {
	opts := append(content[:len(content):len(content)], slackapi.MsgOptionTS(thread))
	if !isDM(f.at.channel) {
		opts = append(opts, slackapi.MsgOptionRecipientUserID(f.asker), slackapi.MsgOptionRecipientTeamID(f.l.teamID))
	}
	// A start under way finishes even if the listener is stopping: cut
	// off, Slack may have opened the stream while we lose its ts, and a
	// stream (which carries no metadata) is found again only by the ts
	// saveStream keeps.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var ts string
	err := f.l.retry(sctx, func() (err error) {
		_, ts, err = f.l.api.StartStreamContext(sctx, f.at.channel, opts...)
		return err
	})
	return ts, err
}

// streamRefused handles Slack refusing a reply's first stream: the reply
// is edited into place instead. Only an answer that says the method is not
// this app's turns streaming off for every place (until a restart); one
// about the place keeps this place editing; any other (the call's
// arguments, a passing fault) concerns this reply alone.
func (f *follow) streamRefused(se slackapi.SlackErrorResponse) {
	switch scope, fix := streamRefusal(se.Err); scope {
	case refusedForApp:
		if f.l.nativeOK.CompareAndSwap(true, false) {
			f.l.log.Warn("slack: Slack refused chat.startStream for this app: replies are edited into place, not streamed, until a restart",
				"error", se.Err, "fix", fix)
		}
	case refusedForPlace:
		f.stream.refused = se.Err
		f.l.log.Info("slack: Slack streams no replies here: they are edited into place", "place", f.b.Address, "error", se.Err)
	default:
		f.l.log.Warn("slack: Slack refused a stream: this reply is edited into place", "place", f.b.Address,
			"error", se.Err, "messages", se.ResponseMetadata.Messages)
	}
}

// How far a refusal of chat.startStream reaches.
const (
	refusedForReply = iota // the call's arguments, or a fault: this reply
	refusedForPlace        // the conversation: every reply in this place
	refusedForApp          // the method is not this app's: every place
)

// streamRefusal is how far Slack's error code for chat.startStream
// reaches, and for the app-wide ones what would fix it. The codes are
// those Slack documents for the method; an unknown one concerns the reply.
func streamRefusal(code string) (scope int, fix string) {
	switch code {
	case "unknown_method", "method_deprecated", "deprecated_endpoint":
		return refusedForApp, "Slack offers no chat.startStream to this app or workspace; nothing to fix, replies are edited"
	case "feature_not_enabled":
		return refusedForApp, "a feature streaming needs is off for this app or workspace (the app's settings: Agents & AI Apps); turn it on, then restart the gateway"
	case "missing_scope":
		return refusedForApp, "add the chat:write bot scope (OAuth & Permissions), reinstall the app, then restart the gateway"
	case "not_allowed_token_type", "is_bot":
		return refusedForApp, "listeners.slack.bot_token must be the app's bot token (xoxb-), not a user, legacy bot or app-level token"
	case "enterprise_is_restricted":
		return refusedForApp, "the app is installed at the Enterprise level; install it in the workspace"
	case "channel_not_found", "channel_type_not_supported", "not_in_channel", "is_archived", "no_permission", "access_denied",
		"ekm_access_denied", "messages_tab_disabled", "restricted_action", "restricted_action_read_only_channel",
		"restricted_action_thread_only_channel", "restricted_action_non_threadable_channel", "restricted_action_thread_locked":
		return refusedForPlace, ""
	}
	return refusedForReply, ""
}

// streamPlace is what a place's follower knows for streaming there.
type streamPlace struct {
	// answering is the ts of the person's message the session answers
	// now, where known (asks): a stream at a DM's top level is a reply to
	// it.
	answering string
	// refused is Slack's error when it refused a stream for the place
	// itself (streamRefusal): replies here are edited from then on.
	refused string
}

// asked notes the person's message the session answers now, from its
// event: its author (a stream into a channel names its reader) and, at a
// DM's top level, its ts (a stream is a reply to it).
func (f *follow) asked(d *switchboard.MessageData) {
	f.asker, f.stream.answering = d.AuthorID, ""
	if f.at.threadTS == "" {
		f.stream.answering = f.l.asks.take(f.b.Address, d.AuthorID, d.Content)
	}
}

// asks are the messages people wrote at a DM's top level and gave the
// session, by place, so that the stream answering one can be a reply to
// it: the session's event of a message carries its author and text, not
// its Slack ts (the input's ClientID, which the session keeps to itself).
type asks struct {
	mu sync.Mutex
	m  map[string][]ask // address → the latest, oldest first
	// roots are the messages answers were streamed under ("address/ts"):
	// a reply in such a thread goes on with the DM's conversation
	// (threadRoot), not a new one.
	roots map[string]struct{}
}

type ask struct{ user, text, ts string }

// asksKept is how many messages a place keeps not yet answered: those the
// session refused or took as commands are dropped as later ones are
// answered (take), or past this.
const asksKept = 16

// note keeps a message given to the session at address, before it is
// submitted (its event follows). Only a DM's top level needs them: a
// thread is streamed into under its own ts.
func (a *asks) note(address string, at place, user, text, ts string) {
	if at.threadTS != "" || !isDM(at.channel) || ts == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) > 10_000 {
		a.m = map[string][]ask{} // bounded; forgetting edits a reply instead
	}
	list := a.m[address]
	for _, k := range list {
		if k.ts == ts {
			return // delivered again: answered once
		}
	}
	list = append(list, ask{user: user, text: text, ts: ts})
	if len(list) > asksKept {
		list = list[len(list)-asksKept:]
	}
	a.m[address] = list
}

// take returns the ts of user's oldest kept message with text at address,
// forgetting it and that person's older ones (never answered: refused, or
// commands), or "" when none is kept (written before a restart).
func (a *asks) take(address, user, text string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.m[address]
	for i, k := range list {
		if k.user != user || k.text != text {
			continue
		}
		rest := list[:0:0]
		for j, o := range list {
			if j > i || o.user != user {
				rest = append(rest, o)
			}
		}
		if len(rest) == 0 {
			delete(a.m, address)
		} else {
			a.m[address] = rest
		}
		if a.roots == nil || len(a.roots) > 10_000 {
			a.roots = map[string]struct{}{} // bounded; forgetting makes a reply there a new conversation
		}
		a.roots[address+"/"+k.ts] = struct{}{}
		return k.ts
	}
	return ""
}

// threadRoot reports whether ts, at a DM's address, is a message an
// answer was streamed under: a person replying in that thread goes on
// with the DM's conversation.
func (a *asks) threadRoot(address, ts string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.roots[address+"/"+ts]
	return ok
}

// stopStream ends a streamed message with tail, and marks it with the
// reply and piece it holds (message metadata, see shown), and whether it
// is the reply's last, which ends in the reply's tool lines (blocks that
// Slack shows at the bottom of the finished message).
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
	stop := func(opts []slackapi.MsgOption) error {
		return f.l.retry(ctx, func() error {
			_, _, err := f.l.api.StopStreamContext(ctx, f.at.channel, n.ts, opts...)
			return err
		})
	}
	var err error
	if tools := f.reply.tools; last && len(tools) > 0 {
		err = stop(append(opts[:len(opts):len(opts)], slackapi.MsgOptionBlocks(toolsContext(tools))))
		if err != nil && isRefusedPayload(err) {
			f.l.log.Warn("slack: tool lines refused at a stream's end, stopped without them", "place", f.b.Address, "err", err)
			err = stop(opts) // a stream is never left open
		}
	} else {
		err = stop(opts)
	}
	if err != nil {
		// Left noted: the next start stops it (stopLeftStream).
		f.l.log.Warn("slack: stop a stream", "place", f.b.Address, "err", err)
		return
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
	if err := f.l.places.SetState(ctx, f.b, state); err != nil {
		f.l.log.Warn("slack: keeping the open stream", "place", f.b.Address, "err", err)
	}
}

// stopLeftStream stops a stream the listener left open when it stopped
// (killed mid-reply), marking it with the reply and piece it holds: the
// replay then finds it (shown) and edits it to the whole reply.
func (f *follow) stopLeftStream(ctx context.Context) {
	b, err := f.l.places.Binding(ctx, f.b.Address)
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
	f.tools.Shown(r.id)
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
