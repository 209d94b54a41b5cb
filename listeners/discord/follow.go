package discord

// Render: a bound session's events, whoever caused them, into its Discord
// place. One follower per place runs while the session is loaded. It
// attaches from how far the place was rendered, sends a reply and edits
// it as the model writes (at most once per EditInterval; discordgo honours
// the rate-limit headers and 429s), continues a long reply in the next
// message, shows the typing indicator while the model thinks or a tool
// runs, turns approval requests into messages with buttons that are
// edited when answered anywhere, and folds the tool calls into the reply
// that follows them as one subtext line each (toolnotes.go).
//
// Discord messages carry no metadata, so what a restart needs to finish
// (the messages of the reply under way, the open approval cards, the tool
// lines not shown yet) is kept with the binding (Binding.State); other
// events are recorded as rendered as soon as they are posted.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// contentLimit is the most characters of a message's content.
const contentLimit = 2000

// follow is a place's Room (places.Room): it renders the session's
// events there, on the place's follower goroutine.
type follow struct {
	l      *Listener
	b      switchboard.Binding
	reply  *streamed
	state  placeState
	reqs   map[string]switchboard.ConfirmationRequestData // open requests, for their answered card
	typing time.Time                                      // when the typing indicator was last sent; zero: off
	plan   *discordPlan                                   // the turn's plan, shown since its first version (plan.go)
}

// newRoom is the Room of a place (places.Config.NewRoom).
func (l *Listener) newRoom(b switchboard.Binding) (places.Room, error) {
	return &follow{l: l, b: b, reqs: map[string]switchboard.ConfirmationRequestData{}}, nil
}

// placeState is what a restart needs to finish in a place, kept with its
// binding.
type placeState struct {
	Reply  string            `json:"reply,omitempty"`  // the reply under way
	Pieces []string          `json:"pieces,omitempty"` // its messages
	Cards  map[string]string `json:"cards,omitempty"`  // open approval cards: confirmation id → message id
	Tools  places.ToolNotes  `json:"tools,omitempty"`  // tool calls whose line is not shown yet, or shown by the reply under way
	Plan   string            `json:"plan,omitempty"`   // the turn's plan's message (plan.go)
}

// streamed is an assistant reply being shown.
type streamed struct {
	id      string
	text    strings.Builder
	posted  []postedPiece
	dirty   bool
	lastOut time.Time
	tools   []string // the lines of the tool calls it shows at its end
}

type postedPiece struct{ id, text string }

// Attached reads what a restart needs to finish in the place, kept with
// its binding.
func (f *follow) Attached(_ context.Context, b switchboard.Binding, _, _ int64) {
	f.b, f.state = b, placeState{}
	if b.State != "" {
		_ = json.Unmarshal([]byte(b.State), &f.state)
	}
}

// Tick shows the reply under way as it is now, and renews the typing
// indicator.
func (f *follow) Tick(ctx context.Context) {
	f.flush(ctx, false)
	f.keepTyping(ctx)
}

// Finish shows the reply under way for the last time.
func (f *follow) Finish(ctx context.Context) { f.endReply(ctx) }

// Show renders one event; it reports whether a restart may resume after
// it (not in the middle of a reply).
func (f *follow) Show(ctx context.Context, ev switchboard.Event, p any) bool {
	done := true
	if ev.Seq > 0 && f.plan == nil && f.state.Tools.Note(p, ev.Time, toolLine) { // a plan shows them as tasks
		f.save(ctx) // before the place is recorded as shown past it
	}
	switch d := p.(type) {
	case *switchboard.DeltaData:
		if f.reply == nil || f.reply.id != d.MessageID {
			f.endReply(ctx)
			f.reply = f.newReply(ctx, d.MessageID)
		}
		f.reply.text.WriteString(d.Content)
		f.reply.dirty = true
		if time.Since(f.reply.lastOut) >= f.l.cfg.EditInterval {
			f.flush(ctx, false)
		}
		done = false
	case *switchboard.MessageData:
		f.message(ctx, d)
	case *switchboard.ToolCallData, *switchboard.ToolResponseData, *switchboard.PlanData:
		// A tool call is shown as a line of the next reply
		// (places.ToolNotes), never alone; or, under the turn's plan, as
		// a task of it (plan.go).
		f.planEvent(ctx, d)
	case *switchboard.ConfirmationRequestData:
		f.reqs[d.ConfirmationID] = *d
		if _, ok := f.state.Cards[d.ConfirmationID]; !ok { // not posted before a restart
			if m := f.send(ctx, approvalMessage(*d)); m != nil {
				if f.state.Cards == nil {
					f.state.Cards = map[string]string{}
				}
				f.state.Cards[d.ConfirmationID] = m.ID
				f.save(ctx)
				return true // a wait for a person: the place is shown up to here
			}
		}
	case *switchboard.ConfirmationResolvedData:
		f.resolved(ctx, d, ev.Time)
	case *switchboard.UI:
		msgs, uploads := uiMessages(*d)
		for _, m := range msgs {
			f.send(ctx, m)
		}
		for _, img := range uploads {
			f.upload(ctx, img, d.Title)
		}
	case *switchboard.ErrorData:
		f.notice(ctx, ev, d)
	case *switchboard.HandoffData:
		f.endReply(ctx)
		f.send(ctx, handoffMessage(*d)) // handoff.go
	case *switchboard.StateData:
		if d.State == switchboard.StateThinking || d.State == switchboard.StateExecutingTool {
			f.typing = time.Time{}
			f.startTyping(ctx)
		} else {
			f.typing = time.Time{} // idle, or waiting for a person
		}
		if d.State == switchboard.StateIdle && ev.Seq > 0 {
			f.endTools(ctx)
			f.endPlan(ctx)
		}
		done = f.reply == nil
	default:
		done = f.reply == nil
	}
	return done && f.reply == nil
}

// endTools shows, as the turn ends, the lines no reply or notice showed
// (a turn that ended without a word after its tools), in one small
// message; calls that never answered are forgotten.
func (f *follow) endTools(ctx context.Context) {
	lines := f.state.Tools.Take()
	if len(lines) > 0 {
		f.send(ctx, &discordgo.MessageSend{Content: toolsText(lines)})
	}
	if f.state.Tools.Forget() || len(lines) > 0 {
		f.save(ctx)
	}
}

// newReply starts showing a reply, adopting the messages a restart left
// of it, with the tool lines it is to show.
func (f *follow) newReply(ctx context.Context, id string) *streamed {
	r := &streamed{id: id}
	if f.state.Reply == id {
		for _, p := range f.state.Pieces {
			r.posted = append(r.posted, postedPiece{id: p})
		}
	}
	var changed bool
	if r.tools, changed = f.state.Tools.For(id); changed {
		f.save(ctx)
	}
	return r
}

// message shows a whole message.
func (f *follow) message(ctx context.Context, d *switchboard.MessageData) {
	switch d.Role {
	case switchboard.RoleAssistant:
		if f.reply == nil || f.reply.id != d.ID {
			f.endReply(ctx)
			f.reply = f.newReply(ctx, d.ID)
		}
		f.reply.text.Reset()
		f.reply.text.WriteString(d.Content)
		f.reply.dirty = true
		f.endReply(ctx)
	case switchboard.RoleSystem:
		for _, piece := range splitDiscord("```\n"+strings.ReplaceAll(d.Content, "```", "`\u200b``")+"\n```", contentLimit) {
			f.send(ctx, &discordgo.MessageSend{Content: piece})
		}
	case switchboard.RoleUser:
		if f.l.places.WrittenHere(f.b, d) {
			return // written here: it is in the thread already
		}
		for _, piece := range splitDiscord(elsewhere(f.l.places, d), contentLimit) {
			f.send(ctx, &discordgo.MessageSend{Content: piece})
		}
	}
}

// elsewhere is how a person's message written in another place shows
// here: who and where, what they wrote, then the files they shared
// ("📎 **Alice** shared rain.csv (27 B)": the files are in the
// conversation's workspace, not in Discord). A message of files alone is
// that line with who and where.
func elsewhere(layer *places.Layer, d *switchboard.MessageData) string {
	who := places.Byline(d)
	if d.Content == "" && len(d.Files) > 0 {
		return "📎 " + layer.Shared(who, d.Files)
	}
	text := "**" + mdEscape(who) + "**: " + toDiscord(d.Content)
	if len(d.Files) > 0 {
		text += "\n📎 " + layer.Shared(d.Author, d.Files)
	}
	return text
}

// flush shows the reply as it is now: the first pieces edit the messages
// already sent, new pieces are sent after them.
func (f *follow) flush(ctx context.Context, force bool) {
	r := f.reply
	if r == nil || !r.dirty || (!force && time.Since(r.lastOut) < f.l.cfg.EditInterval) {
		return
	}
	pieces := withTools(splitDiscord(toDiscord(r.text.String()), contentLimit), r.tools)
	for i, text := range pieces {
		if i < len(r.posted) {
			if r.posted[i].text == text {
				continue
			}
			content := text
			_, err := f.l.dg.ChannelMessageEditComplex(&discordgo.MessageEdit{
				ID: r.posted[i].id, Channel: f.b.Address, Content: &content, AllowedMentions: noMentions,
			}, discordgo.WithContext(ctx))
			if err != nil {
				f.l.log.Warn("discord: edit a reply", "place", f.b.Address, "err", err)
				continue
			}
			r.posted[i].text = text
			continue
		}
		m := f.send(ctx, &discordgo.MessageSend{Content: text})
		if m == nil {
			break // sent at the next flush
		}
		r.posted = append(r.posted, postedPiece{id: m.ID, text: text})
		f.state.Reply, f.state.Pieces = r.id, append(f.state.Pieces[:0:0], pieceIDs(r.posted)...)
		f.save(ctx)
	}
	r.dirty = len(r.posted) < len(pieces)
	r.lastOut = time.Now()
}

func pieceIDs(ps []postedPiece) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.id
	}
	return ids
}

// endReply shows the reply for the last time and forgets it.
func (f *follow) endReply(ctx context.Context) {
	if f.reply == nil {
		return
	}
	f.flush(ctx, true)
	id := f.reply.id
	f.reply = nil
	shown := f.state.Tools.Shown(id)
	if f.state.Reply != "" || shown {
		f.state.Reply, f.state.Pieces = "", nil
		f.save(ctx)
	}
}

// resolved edits an approval card to say what was decided, by whom and
// when, without its question and its buttons.
func (f *follow) resolved(ctx context.Context, d *switchboard.ConfirmationResolvedData, at time.Time) {
	req, known := f.reqs[d.ConfirmationID]
	delete(f.reqs, d.ConfirmationID)
	msgID, ok := f.state.Cards[d.ConfirmationID]
	if !ok {
		f.send(ctx, &discordgo.MessageSend{Content: resolvedText(*d, at)})
		return
	}
	var edit *discordgo.MessageEdit
	if known {
		edit = resolvedEdit(req, *d, d.By, at)
	} else {
		// Requested before a restart: the card as Discord holds it,
		// decided.
		edit = f.resolvedCard(ctx, msgID, *d, at)
	}
	edit.ID, edit.Channel = msgID, f.b.Address
	if _, err := f.l.dg.ChannelMessageEditComplex(edit, discordgo.WithContext(ctx)); err != nil {
		f.l.log.Warn("discord: edit an approval card", "place", f.b.Address, "err", err)
		f.send(ctx, &discordgo.MessageSend{Content: resolvedText(*d, at)})
	}
	delete(f.state.Cards, d.ConfirmationID)
	f.save(ctx)
}

// resolvedCard is the edit that decides a card posted before a restart,
// whose request is not known now: its embed as Discord holds it, decided
// (redecided); a card that cannot be read loses its embed for a line that
// says what was decided.
func (f *follow) resolvedCard(ctx context.Context, msgID string, d switchboard.ConfirmationResolvedData, at time.Time) *discordgo.MessageEdit {
	none := []discordgo.MessageComponent{}
	m, err := f.l.dg.ChannelMessage(f.b.Address, msgID, discordgo.WithContext(ctx))
	if err == nil && len(m.Embeds) > 0 {
		embeds := []*discordgo.MessageEmbed{redecided(m.Embeds[0], d, d.By, at)}
		return &discordgo.MessageEdit{Embeds: &embeds, Components: &none, AllowedMentions: mentionsNone()}
	}
	if err != nil {
		f.l.log.Warn("discord: read an approval card", "place", f.b.Address, "err", err)
	}
	text, noEmbeds := resolvedText(d, at), []*discordgo.MessageEmbed{}
	return &discordgo.MessageEdit{Content: &text, Embeds: &noEmbeds, Components: &none, AllowedMentions: mentionsNone()}
}

// resolvedText says what was decided, by whom and when (in the reader's
// time zone; a zero at is left out), where there is no card to edit.
func resolvedText(d switchboard.ConfirmationResolvedData, at time.Time) string {
	return "-# " + places.DecisionAt(d, at, mdEscape, func(at time.Time) string { return fmt.Sprintf("<t:%d:f>", at.Unix()) })
}

// Tell shows a notice to one person alone: an ephemeral follow-up of
// their interaction, else a message that names them (tell).
func (f *follow) Tell(ctx context.Context, user string, d *switchboard.ErrorData) {
	f.l.tell(ctx, f.b.Address, user, noticeText(*d))
}

// notice shows an error for everyone in the place, with the turn's tool
// lines it ends.
func (f *follow) notice(ctx context.Context, ev switchboard.Event, d *switchboard.ErrorData) {
	var lines []string
	if ev.Seq > 0 {
		lines = f.state.Tools.Take() // it ends the turn's tools
	}
	if len(lines) == 0 {
		f.send(ctx, &discordgo.MessageSend{Content: errorLine(*d)})
		return
	}
	foot := toolsText(lines)
	f.send(ctx, &discordgo.MessageSend{Content: truncateDiscord(errorLine(*d), contentLimit-utf8.RuneCountInString(foot)-1) + "\n" + foot})
	f.save(ctx)
}

// noticeText is a notice for one person as Discord shows it: the
// session's words escaped, its link (an invite's) left clickable.
func noticeText(d switchboard.ErrorData) string {
	text := mdEscape(d.Message)
	if d.Link != "" {
		text = strings.ReplaceAll(text, mdEscape(d.Link), d.Link)
	}
	return truncateDiscord(text, contentLimit-30) // room for the mention tell may add
}

// send sends a message in the place; one Discord refuses (50035) is sent
// again as plain text, so nothing is lost.
func (f *follow) send(ctx context.Context, m *discordgo.MessageSend) *discordgo.Message {
	m.AllowedMentions = noMentions
	// A send under way finishes even if the listener is stopping: cut
	// off, Discord may have the message while we lose its id.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	msg, err := f.l.dg.ChannelMessageSendComplex(f.b.Address, m, discordgo.WithContext(sctx))
	if err != nil && (len(m.Embeds) > 0 || len(m.Components) > 0) && isInvalidForm(err) {
		f.l.log.Warn("discord: message refused, sent as plain text", "place", f.b.Address, "err", err,
			"content_chars", len(m.Content), "embeds", len(m.Embeds), "components", len(m.Components))
		return f.send(ctx, &discordgo.MessageSend{Content: plainOf(m)})
	}
	if err != nil {
		if ctx.Err() == nil {
			f.l.log.Error("discord: send a message", "place", f.b.Address, "err", err)
		}
		return nil
	}
	return msg
}

func isInvalidForm(err error) bool {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code == discordgo.ErrCodeInvalidFormBody
	}
	return false
}

// plainOf is a refused message's content as text: its content, its
// embeds' titles, text and fields.
func plainOf(m *discordgo.MessageSend) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for _, e := range m.Embeds {
		for _, s := range []string{e.Title, e.Description} {
			if s != "" {
				b.WriteString("\n" + s)
			}
		}
		for _, fl := range e.Fields {
			b.WriteString("\n" + fl.Name + ": " + fl.Value)
		}
	}
	text := strings.TrimSpace(b.String())
	if text == "" {
		text = "(A card could not be shown here.)"
	}
	return splitDiscord(text, contentLimit)[0]
}

// save keeps the place's state with its binding.
func (f *follow) save(ctx context.Context) {
	raw, _ := json.Marshal(f.state)
	state := string(raw)
	if state == "{}" {
		state = ""
	}
	// What was just posted must be noted even if the listener is
	// stopping now: the store outlives the listeners.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := f.l.places.SetState(ctx, f.b, state); err != nil {
		f.l.log.Warn("discord: keeping the place's state", "place", f.b.Address, "err", err)
	}
}

// startTyping shows "… is typing" (Discord shows it 10 seconds), on the
// side: the reply's first text does not wait for it.
func (f *follow) startTyping(ctx context.Context) {
	f.typing = time.Now()
	channel := f.b.Address
	go func() {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = f.l.dg.ChannelTyping(channel, discordgo.WithContext(tctx))
	}()
}

// keepTyping renews the indicator while the model thinks or a tool runs.
func (f *follow) keepTyping(ctx context.Context) {
	if !f.typing.IsZero() && f.reply == nil && time.Since(f.typing) > 8*time.Second {
		f.startTyping(ctx)
	}
}

// upload attaches a card's inline image to a message of its own.
func (f *follow) upload(ctx context.Context, img *switchboard.UIImage, title string) {
	name, raw, err := places.Upload(img)
	if err != nil {
		f.send(ctx, &discordgo.MessageSend{Content: "-# (An image could not be shown: it is " + err.Error() + ".)"})
		return
	}
	f.send(ctx, &discordgo.MessageSend{
		Content: cmp.Or(title, img.Alt),
		Files:   []*discordgo.File{{Name: name, ContentType: cmp.Or(img.MIMEType, "image/png"), Reader: bytes.NewReader(raw)}},
	})
}
