package slack

// Render: a bound session's events, whoever caused them, into its Slack
// place. One follower per place runs while the session is loaded: it
// attaches from how far the place was rendered, streams replies by editing
// a message at most once per UpdateInterval, continues a long answer in the
// next message, turns approval requests into cards with buttons and
// updates them when answered anywhere.

import (
	"context"
	"errors"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// pieceLimit is the most characters one message of a reply holds: Slack
// shows about 4,000 before folding a message, and a reply is continued in
// the next message rather than cut.
const pieceLimit = 3500

// Follow is told by the session manager that a bound session is loaded (or
// has events its place was not shown): it starts rendering that place,
// unless it already does.
func (l *Listener) Follow(b switchboard.Binding) {
	l.followMu.Lock()
	defer l.followMu.Unlock()
	if l.ctx == nil {
		l.early = append(l.early, b) // Run starts it
		return
	}
	if f, ok := l.following[b.Address]; ok {
		f.again, f.next = true, b // once this run ends, attach again
		return
	}
	at, err := parseAddress(b.Address)
	if err != nil {
		l.log.Error("slack: binding", "err", err)
		return
	}
	f := &follow{l: l, b: b, at: at}
	l.following[b.Address] = f
	l.wg.Go(f.run)
}

// follow renders one place.
type follow struct {
	l  *Listener
	b  switchboard.Binding
	at place

	// again and next are set by Follow while this runs; guarded by
	// l.followMu.
	again bool
	next  switchboard.Binding

	rendered int64 // the last event handled
	reply    *streamed
	cards    map[string]card // open approval cards by confirmation id
}

type card struct {
	ts  string
	req switchboard.ConfirmationRequestData
}

// streamed is an assistant reply being shown: its Markdown so far and the
// Slack messages that hold it, one per piece.
type streamed struct {
	id      string
	text    strings.Builder
	posted  []postedPiece
	dirty   bool
	lastOut time.Time
}

type postedPiece struct{ ts, text string }

func (f *follow) run() {
	ctx := f.l.ctx
	for {
		f.once(ctx)
		f.l.followMu.Lock()
		if !f.again || ctx.Err() != nil {
			delete(f.l.following, f.b.Address)
			f.l.followMu.Unlock()
			return
		}
		f.again = false
		if f.next.SessionID != f.b.SessionID {
			f.b, f.rendered, f.reply = f.next, f.next.RenderedSeq, nil
		}
		f.l.followMu.Unlock()
	}
}

// once attaches and renders until the session unloads.
func (f *follow) once(ctx context.Context) {
	if f.rendered < f.b.RenderedSeq {
		f.rendered = f.b.RenderedSeq
	}
	sub, err := f.l.sessions.Attach(ctx, sessions.AttachOptions{SessionID: f.b.SessionID, Follow: Channel, AfterSeq: f.rendered})
	if err != nil {
		if ctx.Err() == nil {
			f.l.log.Error("slack: follow a session", "session", f.b.SessionID, "place", f.b.Address, "err", err)
		}
		return
	}
	defer sub.Close()
	if f.cards == nil {
		f.cards = map[string]card{}
	}
	tick := time.NewTicker(f.l.cfg.UpdateInterval)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				f.flush(ctx, true)
				return
			}
			f.render(ctx, ev)
		case <-tick.C:
			f.flush(ctx, false)
		case <-ctx.Done():
			return
		}
	}
}

// render shows one event.
func (f *follow) render(ctx context.Context, ev switchboard.Event) {
	if ev.Seq > 0 && ev.Seq <= f.rendered {
		return
	}
	p, err := ev.Payload()
	if err != nil {
		f.l.log.Error("slack: event", "session", ev.Session, "err", err)
		return
	}
	done := true // a point a restart may resume after
	switch d := p.(type) {
	case *switchboard.DeltaData:
		if f.reply == nil || f.reply.id != d.MessageID {
			f.flush(ctx, true)
			f.reply = &streamed{id: d.MessageID}
		}
		f.reply.text.WriteString(d.Content)
		f.reply.dirty = true
		if time.Since(f.reply.lastOut) >= f.l.cfg.UpdateInterval {
			f.flush(ctx, false)
		}
		done = false
	case *switchboard.MessageData:
		f.message(ctx, d)
	case *switchboard.ToolCallData:
		f.post(ctx, "→ "+d.Name, []slackapi.Block{toolCallContext(*d)})
	case *switchboard.ToolResponseData:
		f.post(ctx, "← "+d.Name, []slackapi.Block{toolResultContext(*d)})
	case *switchboard.ConfirmationRequestData:
		text, blocks := approvalBlocks(*d, "")
		if ts := f.post(ctx, text, blocks); ts != "" {
			f.cards[d.ConfirmationID] = card{ts: ts, req: *d}
		}
	case *switchboard.ConfirmationResolvedData:
		f.resolved(ctx, d, ev.Time)
	case *switchboard.UI:
		text, blocks, _ := uiBlocks(*d, f.ref)
		f.post(ctx, text, blocks)
	case *switchboard.ErrorData:
		f.notice(ctx, ev, d)
	default:
		done = f.reply == nil // state, usage: nothing to show
	}
	if ev.Seq > 0 {
		f.rendered = ev.Seq
		if done && f.reply == nil {
			if err := f.l.sessions.Rendered(ctx, f.b, ev.Seq); err != nil && ctx.Err() == nil {
				f.l.log.Warn("slack: recording progress", "place", f.b.Address, "err", err)
			}
		}
	}
}

// message shows a whole message: the assistant's answer replaces its
// stream; a person's message from another channel is shown with who wrote
// it and where (Slack's own are already in the thread).
func (f *follow) message(ctx context.Context, d *switchboard.MessageData) {
	switch d.Role {
	case switchboard.RoleAssistant:
		if f.reply == nil || f.reply.id != d.ID {
			f.flush(ctx, true)
			f.reply = &streamed{id: d.ID}
		}
		f.reply.text.Reset()
		f.reply.text.WriteString(d.Content)
		f.reply.dirty = true
		f.flush(ctx, true)
		f.reply = nil
	case switchboard.RoleUser:
		if d.Channel == Channel {
			return
		}
		who := d.Author
		if d.Channel != "" {
			who += " · " + channelName(d.Channel)
		}
		f.post(ctx, who+": "+d.Content, []slackapi.Block{
			slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, "*"+mrkdwnEscape(who)+"*", false, false)),
			slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, truncateMrkdwn(toMrkdwn(d.Content), 3000), false, false), nil, nil),
		})
	}
}

// flush shows the streamed reply as it is now: the first pieces edit the
// messages already posted, new pieces are posted after them. Without
// force, only if UpdateInterval passed since the last edit.
func (f *follow) flush(ctx context.Context, force bool) {
	r := f.reply
	if r == nil || !r.dirty || (!force && time.Since(r.lastOut) < f.l.cfg.UpdateInterval) {
		return
	}
	pieces := splitMrkdwn(toMrkdwn(r.text.String()), pieceLimit)
	for i, text := range pieces {
		if i < len(r.posted) {
			if r.posted[i].text == text {
				continue
			}
			if err := f.l.retry(ctx, func() error {
				_, _, _, err := f.l.api.UpdateMessageContext(ctx, f.at.channel, r.posted[i].ts, slackapi.MsgOptionText(text, false))
				return err
			}); err != nil {
				f.l.log.Warn("slack: update a reply", "place", f.b.Address, "err", err)
				continue
			}
			r.posted[i].text = text
			continue
		}
		ts := f.post(ctx, text, nil)
		if ts == "" {
			break // shown at the next flush
		}
		r.posted = append(r.posted, postedPiece{ts: ts, text: text})
	}
	r.dirty = len(r.posted) < len(pieces)
	r.lastOut = time.Now()
}

// resolved turns an approval card into who decided and when.
func (f *follow) resolved(ctx context.Context, d *switchboard.ConfirmationResolvedData, at time.Time) {
	c, ok := f.cards[d.ConfirmationID]
	if !ok {
		// Posted before a restart: say what was decided, below it.
		f.post(ctx, resolvedLine(*d), nil)
		return
	}
	delete(f.cards, d.ConfirmationID)
	text, blocks := resolvedBlocks(c.req, *d, d.By, at)
	if err := f.l.retry(ctx, func() error {
		_, _, _, err := f.l.api.UpdateMessageContext(ctx, f.at.channel, c.ts, slackapi.MsgOptionText(text, false), slackapi.MsgOptionBlocks(blocks...))
		return err
	}); err != nil {
		f.l.log.Warn("slack: update an approval card", "place", f.b.Address, "err", err)
		f.post(ctx, resolvedLine(*d), nil)
	}
}

func resolvedLine(d switchboard.ConfirmationResolvedData) string {
	switch {
	case d.By == "expired", d.By == "cancelled":
		return "The tool call was " + d.By + "."
	case d.Approved && d.Scope == switchboard.ScopeSession:
		return "Always allowed by " + d.By + "."
	case d.Approved:
		return "Approved by " + d.By + "."
	}
	return "Denied by " + d.By + "."
}

// notice shows an error: one meant for one person (a command's answer,
// their mistake) to them alone; a redelivery's "already received" to no
// one, since Slack redelivering is not the person's doing.
func (f *follow) notice(ctx context.Context, ev switchboard.Event, d *switchboard.ErrorData) {
	if d.Code == switchboard.ErrCodeDuplicate {
		return
	}
	if user, ok := strings.CutPrefix(d.For, Channel+":"); ok && ev.Seq == 0 {
		f.l.ephemeral(ctx, f.at, user, d.Message)
		return
	}
	if d.For != "" && ev.Seq == 0 {
		return // someone else's, in another channel
	}
	f.post(ctx, d.Message, nil)
}

// post posts a message in the place; a payload Slack refuses is posted
// again as plain text, so the answer is never lost. It returns the
// message's ts, "" if it could not be posted.
func (f *follow) post(ctx context.Context, text string, blocks []slackapi.Block) string {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	if len(blocks) > 0 {
		opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
	}
	if f.at.threadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(f.at.threadTS))
	}
	var ts string
	err := f.l.retry(ctx, func() (err error) {
		_, ts, err = f.l.api.PostMessageContext(ctx, f.at.channel, opts...)
		return err
	})
	if err != nil && len(blocks) > 0 && isRefusedPayload(err) {
		f.l.log.Warn("slack: message refused, sent as plain text", "place", f.b.Address, "err", err, "text_chars", len(text), "blocks", len(blocks))
		return f.post(ctx, text, nil)
	}
	if err != nil {
		if ctx.Err() == nil {
			f.l.log.Error("slack: post a message", "place", f.b.Address, "err", err)
		}
		return ""
	}
	return ts
}

// ref is what a card's interactive element carries back when clicked.
func (f *follow) ref(kind, actionID, value string) string {
	return kind + ":" + actionID + ":" + value
}

func isRefusedPayload(err error) bool {
	s := err.Error()
	return strings.Contains(s, "invalid_blocks") || strings.Contains(s, "msg_too_long") || strings.Contains(s, "invalid_attachments")
}

// retry runs call, waiting as long as Slack asks when it is rate limited
// (429 with Retry-After), up to three times.
func (l *Listener) retry(ctx context.Context, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		var rl *slackapi.RateLimitedError
		if !errors.As(err, &rl) || attempt == 3 {
			return err
		}
		l.log.Info("slack: rate limited, waiting as asked", "retry_after", rl.RetryAfter)
		select {
		case <-time.After(rl.RetryAfter):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func channelName(c string) string {
	switch c {
	case "web":
		return "Web"
	case "stdin":
		return "Terminal"
	case "discord":
		return "Discord"
	case "slack":
		return "Slack"
	}
	return c
}
