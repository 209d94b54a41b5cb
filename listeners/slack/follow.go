package slack

// Render: a bound session's events, whoever caused them, into its Slack
// place. One follower per place runs while the session is loaded: it
// attaches from how far the place was rendered, streams replies by editing
// a message at most once per UpdateInterval, continues a long answer in the
// next message, turns approval requests into cards with buttons and
// updates them when answered anywhere, and folds the tool calls into the
// reply that follows them as one short line each (toolnotes.go).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// pieceLimit is the most characters one message of a reply holds: Slack
// shows about 4,000 before folding a message, and a reply is continued in
// the next message rather than cut.
const pieceLimit = 3500

// follow is a place's Room (places.Room): it renders the session's
// events there, on the place's follower goroutine.
type follow struct {
	l  *Listener
	b  switchboard.Binding
	at place

	reply *streamed
	cards map[string]card // open approval cards by confirmation id
	// tools are the tool calls whose lines are not shown yet, or shown
	// by the reply under way (toolnotes.go).
	tools places.ToolNotes

	// What is being posted, for the message's metadata (see shown).
	cur      int64
	curReply string
	curPiece int
	curCard  *switchboard.ConfirmationRequestData
	// asker is the Slack user whose message the session answers now: a
	// native stream into a channel must name them.
	asker string
	// stream is what the place knows for native streaming (stream.go).
	stream streamPlace
	// plan is the turn's plan, shown since its first version (plan.go).
	plan *slackPlan
	// replayTo is the session's last event when this run attached: events
	// up to it may have been posted before a restart recorded progress;
	// shown is what the thread already holds of them.
	replayTo int64
	shown    *shown
}

// newRoom is the Room of a place (places.Config.NewRoom).
func (l *Listener) newRoom(b switchboard.Binding) (places.Room, error) {
	at, err := parseAddress(b.Address)
	if err != nil {
		return nil, err
	}
	return &follow{l: l, b: b, at: at, cards: map[string]card{}}, nil
}

// metaType marks the messages the listener posts: each carries the event
// it shows (session, seq) or the piece of the reply it holds, so a restart
// that replays events it had posted but not yet recorded as rendered (a
// kill -9 between the two) finds them in the thread and edits or skips
// them instead of posting them twice.
const metaType = "switchboard_event"

// shown is what a place already holds of its session's events.
type shown struct {
	seqs   map[int64]string    // event seq → ts
	pieces map[string][]string // reply message id → ts of each piece
	whole  map[string]bool     // replies whose stream was stopped: complete
	cards  map[string]card     // approval cards by confirmation id (ts, tool)
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
	// native is the reply's Slack stream (stream.go), nil when it is shown
	// by posting and editing.
	native *nativeStream
	// tried: whether a native stream was tried for this reply.
	tried bool
	// whole: the reply is in the thread already, complete (a replay after
	// a restart): nothing to show.
	whole bool
	// tools are the lines of the tool calls it shows at its end; plain:
	// Slack refused them in blocks, the reply is edited as text alone.
	tools []string
	plain bool
}

// postedPiece is a message of a reply: its ts, its text, and whether it
// ends in the reply's tool lines (the last piece does).
type postedPiece struct {
	ts, text string
	tools    bool
}

// Attached finds, after a restart, what the thread holds of the events
// it is to be shown again, and stops a native stream a restart left open.
func (f *follow) Attached(ctx context.Context, b switchboard.Binding, rendered, last int64) {
	f.b, f.replayTo, f.shown = b, last, nil
	f.stopLeftStream(ctx)
	if rendered < last {
		f.shown = f.loadShown(ctx)
	}
}

// Tick shows the reply under way as it is now.
func (f *follow) Tick(ctx context.Context) { f.flush(ctx, false) }

// Finish shows the reply under way for the last time.
func (f *follow) Finish(ctx context.Context) { f.endReply(ctx) }

// Show renders one event; it reports whether a restart may resume after
// it: not in the middle of a reply, nor past a tool call whose line is
// not shown yet (a restart replays it: toolnotes.go).
func (f *follow) Show(ctx context.Context, ev switchboard.Event, p any) bool {
	done := true
	f.cur = ev.Seq
	if ev.Seq > 0 && f.plan == nil {
		f.tools.Note(p, ev.Time, toolLine) // shown or replayed: the same lines; a plan shows them as tasks
	}
	adopted := false
	if ev.Seq > 0 && ev.Seq <= f.replayTo && f.shown != nil {
		if ts, ok := f.shown.seqs[ev.Seq]; ok {
			// Posted before a restart: adopt it rather than post it again.
			adopted = true
			switch d := p.(type) {
			case *switchboard.ConfirmationRequestData:
				f.cards[d.ConfirmationID] = card{ts: ts, req: *d}
			case *switchboard.PlanData:
				f.adoptPlan(ts, d)
			case *switchboard.ErrorData:
				f.tools.Take() // it showed them
			case *switchboard.StateData:
				if d.State == switchboard.StateIdle {
					f.tools.Take() // the turn's last lines, shown (endTools)
					f.tools.Forget()
				}
			}
		}
	}
	if !adopted {
		done = f.show(ctx, ev, p)
	}
	return done && f.reply == nil && len(f.tools) == 0
}

// show renders an event the place does not hold yet. It reports whether a
// restart may resume after it (not in the middle of a reply).
func (f *follow) show(ctx context.Context, ev switchboard.Event, p any) bool {
	switch d := p.(type) {
	case *switchboard.DeltaData:
		if f.reply == nil || f.reply.id != d.MessageID {
			f.endReply(ctx)
			f.reply = f.newReply(d.MessageID)
		}
		f.reply.text.WriteString(d.Content)
		f.reply.dirty = true
		if time.Since(f.reply.lastOut) >= f.l.cfg.UpdateInterval {
			f.flush(ctx, false)
		}
		return false
	case *switchboard.MessageData:
		f.message(ctx, d)
	case *switchboard.ToolCallData, *switchboard.ToolResponseData, *switchboard.PlanData:
		// A tool call is shown as a line of the next reply
		// (places.ToolNotes), never alone; or, under the turn's plan, as
		// a task of it (plan.go).
		f.planEvent(ctx, d)
	case *switchboard.ConfirmationRequestData:
		text, blocks := approvalBlocks(*d, "")
		f.curCard = d
		ts := f.post(ctx, text, blocks)
		f.curCard = nil
		if ts != "" {
			f.cards[d.ConfirmationID] = card{ts: ts, req: *d}
		}
	case *switchboard.ConfirmationResolvedData:
		f.resolved(ctx, d, ev.Time)
	case *switchboard.UI:
		text, blocks, img := uiBlocks(*d, uiRef(*d))
		if len(blocks) > 0 {
			f.post(ctx, text, blocks)
		}
		if img != nil {
			f.upload(ctx, img, d.Title)
		}
	case *switchboard.ErrorData:
		f.notice(ctx, ev, d)
	case *switchboard.HandoffData:
		f.handoff(ctx, d) // handoff.go
	case *switchboard.StateData:
		f.status(ctx, d)
		if d.State == switchboard.StateIdle && ev.Seq > 0 {
			f.endTools(ctx)
			f.endPlan(ctx)
		}
		return f.reply == nil
	default:
		return f.reply == nil // usage: nothing to show
	}
	return true
}

// endTools shows, as the turn ends, the lines no reply or notice showed
// (a turn that ended without a word after its tools), in one small
// message; calls that never answered are forgotten.
func (f *follow) endTools(ctx context.Context) {
	if lines := f.tools.Take(); len(lines) > 0 {
		f.post(ctx, toolsText(lines), []slackapi.Block{toolsContext(lines)})
	}
	f.tools.Forget()
}

// message shows a whole message: the assistant's answer replaces its
// stream; a person's message from another channel is shown with who wrote
// it and where (Slack's own are already in the thread).
func (f *follow) message(ctx context.Context, d *switchboard.MessageData) {
	switch d.Role {
	case switchboard.RoleAssistant:
		if f.reply == nil || f.reply.id != d.ID {
			f.endReply(ctx)
			f.reply = f.newReply(d.ID)
		}
		if replacesStream(f.reply, d.Content) {
			f.unstream(ctx, f.reply) // replaced.go
		}
		f.reply.text.Reset()
		f.reply.text.WriteString(d.Content)
		f.reply.dirty = true
		f.endReply(ctx)
	case switchboard.RoleSystem:
		// The gateway's own lines (/help, /usage, who reset): plain text,
		// its lines kept.
		f.post(ctx, mrkdwnEscape(d.Content), nil)
	case switchboard.RoleUser:
		if f.l.places.WrittenHere(f.b, d) {
			f.asked(d) // a stream names its reader, and answers the message
			return     // written here: it is in the thread already
		}
		// Written elsewhere: shown with who and where; its answer is
		// edited into place here (a stream would need a reader here).
		f.asker, f.stream.answering = "", ""
		text, blocks := elsewhere(f.l.places, d)
		f.post(ctx, text, blocks)
	}
}

// elsewhere is how a person's message written in another place shows
// here: who and where in a context line, then what they wrote, then the
// files they shared ("Alice shared rain.csv (27 B)": the files are in
// the conversation's workspace, not in Slack). A message of files alone
// is that line with who and where.
func elsewhere(layer *places.Layer, d *switchboard.MessageData) (string, []slackapi.Block) {
	who := places.Byline(d)
	if d.Content == "" && len(d.Files) > 0 {
		line := layer.Shared(who, d.Files)
		return line, []slackapi.Block{slackapi.NewSectionBlock(mrkdwnText(":paperclip: "+line), nil, nil)}
	}
	text := mrkdwnEscape(who + ": " + d.Content)
	blocks := []slackapi.Block{
		slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, "*"+mrkdwnEscape(who)+"*", false, false)),
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, truncateMrkdwn(toMrkdwn(d.Content), 3000), false, false), nil, nil),
	}
	if len(d.Files) > 0 {
		line := layer.Shared(d.Author, d.Files)
		text += "\n" + line
		blocks = append(blocks, contextLine(":paperclip: "+line))
	}
	return text, blocks
}

// flush shows the streamed reply as it is now: the first pieces edit the
// messages already posted, new pieces are posted after them. Without
// force, only if UpdateInterval passed since the last edit.
func (f *follow) flush(ctx context.Context, force bool) {
	r := f.reply
	if r == nil || r.whole || !r.dirty || (!force && time.Since(r.lastOut) < f.l.cfg.UpdateInterval) {
		return
	}
	if f.flushNative(ctx, r) {
		return
	}
	pieces := splitMrkdwn(toMrkdwn(r.text.String()), pieceLimit)
	for i, text := range pieces {
		// The last piece ends in the reply's tool lines.
		withTools := len(r.tools) > 0 && !r.plain && i == len(pieces)-1
		if i < len(r.posted) {
			if r.posted[i].text == text && r.posted[i].tools == withTools {
				continue
			}
			update := func(withTools bool) error {
				return f.l.retry(ctx, func() error {
					_, _, _, err := f.l.api.UpdateMessageContext(ctx, f.at.channel, r.posted[i].ts, r.pieceOptions(text, withTools, r.posted[i].tools)...)
					return err
				})
			}
			err := update(withTools)
			if err != nil && withTools && isRefusedPayload(err) {
				f.l.log.Warn("slack: a reply's tool lines refused, edited as text", "place", f.b.Address, "err", err)
				r.plain, withTools = true, false
				err = update(false)
			}
			if err != nil {
				f.l.log.Warn("slack: update a reply", "place", f.b.Address, "err", err)
				continue
			}
			r.posted[i].text, r.posted[i].tools = text, withTools
			continue
		}
		ts := ""
		if f.shown != nil && i < len(f.shown.pieces[r.id]) && f.shown.pieces[r.id][i] != "" {
			ts = f.shown.pieces[r.id][i] // posted before a restart
			update := func(withTools bool) error {
				return f.l.retry(ctx, func() error {
					_, _, _, err := f.l.api.UpdateMessageContext(ctx, f.at.channel, ts, r.pieceOptions(text, withTools, true)...)
					return err
				})
			}
			err := update(withTools)
			if err != nil && withTools && isRefusedPayload(err) {
				r.plain, withTools = true, false
				err = update(false)
			}
			if err != nil {
				ts = ""
			}
		}
		if ts == "" {
			var blocks []slackapi.Block
			if withTools {
				blocks = replyBlocks(text, r.tools)
			}
			f.curReply, f.curPiece = r.id, i
			ts = f.post(ctx, text, blocks)
			f.curReply = ""
		}
		if ts == "" {
			break // shown at the next flush
		}
		r.posted = append(r.posted, postedPiece{ts: ts, text: text, tools: withTools})
	}
	r.dirty = len(r.posted) < len(pieces)
	r.lastOut = time.Now()
}

// pieceOptions is how a piece of the reply is edited: its text, and in
// blocks with the reply's tool lines at its end when it shows them; the
// blocks it had are removed when it no longer does.
func (r *streamed) pieceOptions(text string, withTools, had bool) []slackapi.MsgOption {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	switch {
	case withTools:
		opts = append(opts, slackapi.MsgOptionBlocks(replyBlocks(text, r.tools)...))
	case had:
		opts = append(opts, slackapi.MsgOptionBlocks()) // "[]": none
	}
	return opts
}

// upload puts an inline image of a card into the place, as Slack shows
// images it holds (files.uploadV2); an image that cannot be is said so.
func (f *follow) upload(ctx context.Context, img *switchboard.UIImage, title string) {
	name, raw, err := places.Upload(img)
	if err != nil {
		f.post(ctx, "(An image could not be shown: it is "+err.Error()+".)", nil)
		return
	}
	if err := f.l.retry(ctx, func() error {
		_, err := f.l.api.UploadFileContext(ctx, slackapi.UploadFileParameters{
			Reader: bytes.NewReader(raw), FileSize: len(raw), Filename: name, Title: cmp.Or(title, img.Alt, "Image"),
			AltTxt: img.Alt, Channel: f.at.channel, ThreadTimestamp: f.at.threadTS,
		})
		return err
	}); err != nil {
		f.l.log.Warn("slack: upload an image", "place", f.b.Address, "bytes", len(raw), "err", err)
		f.post(ctx, "(An image could not be uploaded here.)", nil)
	}
}

// status shows what the session is doing as the thread's status, where
// Slack has one: a DM's thread (the AI-app surface). Idle clears it.
func (f *follow) status(ctx context.Context, d *switchboard.StateData) {
	if !isDM(f.at.channel) || f.at.threadTS == "" {
		return
	}
	text := ""
	switch d.State {
	case switchboard.StateThinking:
		text = "is thinking…"
	case switchboard.StateExecutingTool:
		text = "is running " + d.Tool + "…"
	case switchboard.StateAwaitingConfirmation:
		text = "is waiting for approval…"
	}
	if err := f.l.retry(ctx, func() error {
		return f.l.api.SetAssistantThreadsStatusContext(ctx, slackapi.AssistantThreadsSetStatusParameters{
			ChannelID: f.at.channel, ThreadTS: f.at.threadTS, Status: text})
	}); err != nil && ctx.Err() == nil {
		f.l.log.Debug("slack: thread status", "place", f.b.Address, "err", err)
	}
}

// newReply starts showing a reply, unless the thread holds it whole
// already (replayed after a restart).
func (f *follow) newReply(id string) *streamed {
	lines, _ := f.tools.For(id)
	r := &streamed{id: id, tools: lines}
	if f.shown != nil {
		r.whole = f.shown.whole[id]
		// Posted in part before: go on editing those messages.
		r.tried = len(f.shown.pieces[id]) > 0
	}
	return r
}

// resolved turns an approval card into what was decided, by whom and when.
func (f *follow) resolved(ctx context.Context, d *switchboard.ConfirmationResolvedData, at time.Time) {
	c, ok := f.cards[d.ConfirmationID]
	if !ok {
		// Posted before a restart: find it in the thread.
		if f.shown == nil {
			f.shown = f.loadShown(ctx)
		}
		if c, ok = f.shown.cards[d.ConfirmationID]; !ok {
			f.post(ctx, resolvedLine(*d, at), nil) // gone: say what was decided
			return
		}
	}
	delete(f.cards, d.ConfirmationID)
	text, blocks := resolvedBlocks(c.req, *d, d.By, at)
	if err := f.l.retry(ctx, func() error {
		_, _, _, err := f.l.api.UpdateMessageContext(ctx, f.at.channel, c.ts, slackapi.MsgOptionText(text, false), slackapi.MsgOptionBlocks(blocks...))
		return err
	}); err != nil {
		f.l.log.Warn("slack: update an approval card", "place", f.b.Address, "err", err)
		f.post(ctx, resolvedLine(*d, at), nil)
	}
}

// resolvedLine says what was decided, by whom and when (in the reader's
// time zone; a zero at is left out), where the card is gone.
func resolvedLine(d switchboard.ConfirmationResolvedData, at time.Time) string {
	return places.DecisionAt(d, at, mrkdwnEscape, slackDate)
}

// Tell shows a notice to one person alone, in the place (ephemeral).
func (f *follow) Tell(ctx context.Context, user string, d *switchboard.ErrorData) {
	f.l.ephemeral(ctx, f.at, user, mrkdwnEscape(d.Message))
}

// notice shows an error for everyone in the place, with the turn's tool
// lines it ends.
func (f *follow) notice(ctx context.Context, ev switchboard.Event, d *switchboard.ErrorData) {
	var blocks []slackapi.Block
	if ev.Seq > 0 {
		if lines := f.tools.Take(); len(lines) > 0 { // it ends the turn's tools
			blocks = []slackapi.Block{slackapi.NewSectionBlock(mrkdwnText(truncateMrkdwn(mrkdwnEscape(d.Message), maxSectionText)), nil, nil), toolsContext(lines)}
		}
	}
	f.post(ctx, mrkdwnEscape(d.Message), blocks)
}

// post posts a message in the place; a payload Slack refuses is posted
// again as plain text, so the answer is never lost. It returns the
// message's ts, "" if it could not be posted.
func (f *follow) post(ctx context.Context, text string, blocks []slackapi.Block) string {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false), slackapi.MsgOptionMetadata(f.meta())}
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
		size := 0
		if raw, jerr := json.Marshal(blocks); jerr == nil {
			size = len(raw)
		}
		f.l.log.Warn("slack: message refused, sent as plain text", "place", f.b.Address, "err", err, "text_chars", len(text), "blocks", len(blocks), "blocks_bytes", size)
		if f.curCard != nil {
			text += "\nWrite *approve*, *deny* or *approve always* in this thread to answer."
		}
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

// meta is the metadata of the message being posted.
func (f *follow) meta() slackapi.SlackMetadata {
	p := map[string]any{"session": f.b.SessionID}
	if f.curReply != "" {
		p["reply"], p["piece"] = f.curReply, f.curPiece
	} else if f.cur > 0 {
		p["seq"] = f.cur
	}
	if f.curCard != nil {
		p["confirmation"], p["tool"] = f.curCard.ConfirmationID, f.curCard.ToolName
	}
	return slackapi.SlackMetadata{EventType: metaType, EventPayload: p}
}

// loadShown reads what the place holds of this session's events: the
// thread's bot messages (a DM's latest 200) and their metadata.
func (f *follow) loadShown(ctx context.Context) *shown {
	sh := &shown{seqs: map[int64]string{}, pieces: map[string][]string{}, whole: map[string]bool{}, cards: map[string]card{}}
	var msgs []slackapi.Message
	cursor := ""
	for page := 0; page < 20; page++ {
		var batch []slackapi.Message
		var more bool
		var err error
		if f.at.threadTS != "" {
			err = f.l.retry(ctx, func() (err error) {
				batch, more, cursor, err = f.l.api.GetConversationRepliesContext(ctx, &slackapi.GetConversationRepliesParameters{
					ChannelID: f.at.channel, Timestamp: f.at.threadTS, Cursor: cursor, Limit: 200, IncludeAllMetadata: true})
				return err
			})
		} else {
			var h *slackapi.GetConversationHistoryResponse
			err = f.l.retry(ctx, func() (err error) {
				h, err = f.l.api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{
					ChannelID: f.at.channel, Limit: 200, IncludeAllMetadata: true})
				return err
			})
			if h != nil {
				batch = h.Messages
			}
		}
		if err != nil {
			f.l.log.Warn("slack: reading the thread to resume", "place", f.b.Address, "err", err)
			break
		}
		msgs = append(msgs, batch...)
		if !more || cursor == "" || f.at.threadTS == "" {
			break
		}
	}
	for _, m := range msgs {
		md := m.Metadata
		if md.EventType != metaType || md.EventPayload["session"] != f.b.SessionID {
			continue
		}
		if seq, ok := md.EventPayload["seq"].(float64); ok {
			sh.seqs[int64(seq)] = m.Timestamp
		}
		if id, ok := md.EventPayload["confirmation"].(string); ok {
			tool, _ := md.EventPayload["tool"].(string)
			sh.cards[id] = card{ts: m.Timestamp, req: switchboard.ConfirmationRequestData{ConfirmationID: id, ToolName: tool}}
		}
		if id, ok := md.EventPayload["reply"].(string); ok {
			piece, _ := md.EventPayload["piece"].(float64)
			ts := sh.pieces[id]
			for len(ts) <= int(piece) {
				ts = append(ts, "")
			}
			ts[int(piece)] = m.Timestamp
			sh.pieces[id] = ts
			if done, _ := md.EventPayload["done"].(bool); done {
				sh.whole[id] = true
			}
		}
	}
	return sh
}

// uiRef is what a card's controls carry back when used, kept short for
// Slack's limits (an option's value: 150 characters) whatever the model
// chose: a button or form its action id (the card's id and the control's
// place), a select's option "<action id>|<position>", read back against
// the stored card (selectedOption).
func uiRef(ui switchboard.UI) func(kind, actionID, value string) string {
	return func(kind, actionID, value string) string {
		if kind != refSelect || ui.Select == nil {
			return actionID
		}
		for i, o := range ui.Select.Options {
			if o.Value == value {
				return places.OptionValue(actionID, i)
			}
		}
		return actionID
	}
}

// isRefusedPayload reports whether Slack refused a message for what it
// holds (its blocks, its length), not for where or who: sent again as
// plain text, it goes through.
func isRefusedPayload(err error) bool {
	var se slackapi.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "invalid_blocks", "msg_too_long", "invalid_attachments":
		return true
	}
	return false
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
