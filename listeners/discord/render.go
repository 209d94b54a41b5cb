package discord

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// Message builders: pure functions from the gateway's events to discordgo
// messages. Every text is cut to Discord's documented limits, so nothing
// the model writes can make Discord refuse a message (50035 Invalid Form
// Body); what a user must read is split rather than cut: long card text
// continues in further embeds, many buttons or options in further
// messages.
//
// A card (a UI event) is rendered as embeds plus action rows of buttons
// and selects, the classic components, not as Components V2: the reply's
// text stays in a message's content, Discord Markdown streamed by edits,
// and a card is a message of its own, while a V2 message can have neither
// content nor embeds.
//
// Custom ids never carry the model's text, only ids: "sb:approve:<id>",
// "sb:deny:<id>" and "sb:always:<id>" for an approval's buttons (the
// confirmation id), "sb:btn:<actionID>" for a card's button,
// "sb:form:<actionID>" for the button that opens its form and
// "sb:modal:<actionID>" for the form's modal, "sb:sel:<n>" for the n-th
// select of a card, whose option values are "<actionID>|<index>" (the
// option's index in the card's select). Present's action ids and the
// gateway's confirmation ids are short (about 25 characters); one that
// would not fit in Discord's 100 is replaced by a hash (sbCustomID).

// Discord's limits (https://discord.com/developers/docs/resources/message
// and …/interactions/message-components), counted in characters (code
// points).
const (
	limContent          = 2000 // a message's content
	limEmbeds           = 10   // embeds in a message
	limEmbedTitle       = 256  // an embed's title
	limEmbedDescription = 4096 // an embed's description
	limEmbedFields      = 25   // fields in an embed
	limFieldName        = 256  // a field's name
	limFieldValue       = 1024 // a field's value
	limFooter           = 2048 // an embed's footer text
	limEmbedTotal       = 6000 // titles, descriptions, field names and values, footers of all a message's embeds
	limRows             = 5    // action rows in a message (and text inputs in a modal)
	limRowButtons       = 5    // buttons in a row; a select is alone in its row
	limSelectOptions    = 25   // options in a select
	limButtonLabel      = 80   // a button's label
	limOption           = 100  // an option's label, value and description
	limPlaceholder      = 150  // a select's placeholder
	limCustomID         = 100  // a component's or modal's custom_id
	limModalTitle       = 45   // a modal's title
	limInputLabel       = 45   // a text input's label
	limInputPlaceholder = 100  // a text input's placeholder
)

// Bounds of our own, well inside what a channel can take.
const (
	cardMaxFields     = 100 // fields of a card shown
	cardMaxButtons    = 100 // buttons of a card shown (20 rows)
	cardMaxOptions    = 250 // options of a card's select shown (10 selects)
	cardMaxTextEmbeds = 6   // embeds of a card's text: about 24,000 characters
)

// Embed colours.
const (
	colorCard     = 0x5865F2 // blurple
	colorPending  = 0xF0B232 // amber: waiting for an answer
	colorApproved = 0x23A55A // green
	colorDenied   = 0xF23F43 // red
	colorClosed   = 0x80848E // grey: expired or cancelled
)

// Custom id prefixes.
const (
	idApprove = "sb:approve:"
	idDeny    = "sb:deny:"
	idAlways  = "sb:always:"
	idButton  = "sb:btn:"
	idSelect  = "sb:sel:"
	idForm    = "sb:form:"
	idModal   = "sb:modal:"
	idInput   = "sb:in:"
)

// mentionsNone lets a message ping no one (an empty parse list).
func mentionsNone() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// sbCustomID is prefix+id where that fits in a custom_id, else prefix, "#"
// and 32 hex digits of id's SHA-256: the listener cannot read an id back
// from that, but can recognise it by hashing the ids it knows.
func sbCustomID(prefix, id string) string {
	if s := prefix + id; utf8.RuneCountInString(s) <= limCustomID {
		return s
	}
	return prefix + idHash(id)
}

func idHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "#" + hex.EncodeToString(sum[:16])
}

// optionValue is a select option's value: the select's action id and the
// option's index, "<actionID>|<index>" (a hash for the action id where
// that would not fit).
func optionValue(actionID string, index int) string {
	suffix := "|" + strconv.Itoa(index)
	if utf8.RuneCountInString(actionID+suffix) <= limOption {
		return actionID + suffix
	}
	return idHash(actionID) + suffix
}

// codeName is a name to put between backticks.
func codeName(name string, n int) string {
	return places.Clip(strings.ReplaceAll(places.ToolName(name), "`", "'"), n)
}

// uiMessages renders a card: an embed with the title, the text (converted
// with toDiscord; what does not fit in one embed's description continues
// in the next), the fields (inline where short; 25 to an embed) and an
// image given by URL; then its buttons, five to a row, and the button that
// opens its form (formModal), then its select, 25 options to a select, a
// select to a row. Embeds go 10 and 6,000 characters to a message and
// rows 5 to a message, the rows after the last embed, so a large card is
// several messages, each valid on its own; every button and option of a
// card within our bounds (cardMax…) is shown. An image given as data (or
// as a data: URL) is returned in uploads for the listener to attach; msgs
// is empty for a card with nothing but such an image.
func uiMessages(ui switchboard.UI) (msgs []*discordgo.MessageSend, uploads []*switchboard.UIImage) {
	var notes []string

	// The embeds: the title and text, the fields, the image, the notes.
	var embeds []*discordgo.MessageEmbed
	newEmbed := func() *discordgo.MessageEmbed {
		e := &discordgo.MessageEmbed{Type: discordgo.EmbedTypeRich, Color: colorCard}
		embeds = append(embeds, e)
		return e
	}
	cur := newEmbed()
	cur.Title = places.Clip(escapeMassMentions(places.OneLine(ui.Title)), limEmbedTitle)
	for i, p := range cardText(ui.Text) {
		if i > 0 {
			cur = newEmbed()
		}
		cur.Description = p
	}

	fields := ui.Fields
	if len(fields) > cardMaxFields {
		notes = append(notes, fmt.Sprintf("%d more fields not shown", len(fields)-cardMaxFields))
		fields = fields[:cardMaxFields]
	}
	for _, f := range fields {
		field := embedField(f)
		if field == nil {
			continue
		}
		if len(cur.Fields) == limEmbedFields || embedSize(cur)+fieldSize(field) > limEmbedTotal {
			cur = newEmbed()
		}
		cur.Fields = append(cur.Fields, field)
	}

	if img := ui.Image; img != nil {
		image, upload, note := embedImage(*img)
		switch {
		case image != nil:
			cur.Image = image
		case upload != nil:
			uploads = append(uploads, upload)
		}
		if note != "" {
			notes = append(notes, note)
		}
	}

	// The rows: buttons and the form's button, then the selects.
	buttons, buttonNotes := cardButtons(ui)
	notes = append(notes, buttonNotes...)
	var rows []discordgo.MessageComponent
	for len(buttons) > 0 {
		n := min(len(buttons), limRowButtons)
		rows = append(rows, discordgo.ActionsRow{Components: buttons[:n]})
		buttons = buttons[n:]
	}
	if sel := ui.Select; sel != nil && len(sel.Options) > 0 {
		selects, note := cardSelects(*sel)
		for _, s := range selects {
			rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{s}})
		}
		if note != "" {
			notes = append(notes, note)
		}
	}

	if len(notes) > 0 {
		footer := &discordgo.MessageEmbedFooter{Text: places.Clip(strings.Join(notes, "; "), limFooter)}
		if embedSize(cur)+utf8.RuneCountInString(footer.Text) > limEmbedTotal {
			cur = newEmbed()
		}
		cur.Footer = footer
	}

	// Embeds into messages: at most 10 and 6,000 characters to one.
	newMsg := func() *discordgo.MessageSend {
		m := &discordgo.MessageSend{AllowedMentions: mentionsNone()}
		msgs = append(msgs, m)
		return m
	}
	var m *discordgo.MessageSend
	total := 0
	for _, e := range embeds {
		if embedEmpty(e) {
			continue
		}
		size := embedSize(e)
		if m == nil || len(m.Embeds) == limEmbeds || total+size > limEmbedTotal {
			m, total = newMsg(), 0
		}
		m.Embeds = append(m.Embeds, e)
		total += size
	}

	// Rows from the last of them on, five to a message.
	for _, row := range rows {
		if m == nil || len(m.Components) == limRows {
			m = newMsg()
		}
		m.Components = append(m.Components, row)
	}
	if len(msgs) == 0 && len(uploads) == 0 {
		newMsg().Content = "-# (an empty card)"
	}
	return msgs, uploads
}

// cardText is a card's text as embed descriptions: split where it is
// longer than one, and cut, with a note, past cardMaxTextEmbeds of them.
func cardText(md string) []string {
	pieces := splitDiscord(toDiscord(md), limEmbedDescription)
	if len(pieces) > cardMaxTextEmbeds {
		const note = "\n-# (text cut: too long for Discord)"
		last := truncateDiscord(pieces[cardMaxTextEmbeds-1], limEmbedDescription-utf8.RuneCountInString(note))
		pieces = append(pieces[:cardMaxTextEmbeds-1], last+note)
	}
	return pieces
}

// embedField is a card's field: its label plain, its value Markdown, both
// cut to Discord's limits; inline where both are short. Discord refuses
// an empty name or value, so a zero-width space stands in for one; a field
// with neither is left out.
func embedField(f switchboard.UIField) *discordgo.MessageEmbedField {
	name := places.Clip(escapeMassMentions(places.OneLine(f.Label)), limFieldName)
	value := truncateDiscord(toDiscord(f.Value), limFieldValue)
	if name == "" && value == "" {
		return nil
	}
	inline := utf8.RuneCountInString(name) <= 32 && utf8.RuneCountInString(value) <= 48 && !strings.Contains(value, "\n")
	if name == "" {
		name = "\u200b"
	}
	if value == "" {
		value = "\u200b"
	}
	return &discordgo.MessageEmbedField{Name: name, Value: value, Inline: inline}
}

func fieldSize(f *discordgo.MessageEmbedField) int {
	return utf8.RuneCountInString(f.Name) + utf8.RuneCountInString(f.Value)
}

// embedSize is what an embed counts toward a message's 6,000 characters.
func embedSize(e *discordgo.MessageEmbed) int {
	n := utf8.RuneCountInString(e.Title) + utf8.RuneCountInString(e.Description)
	for _, f := range e.Fields {
		n += fieldSize(f)
	}
	if e.Footer != nil {
		n += utf8.RuneCountInString(e.Footer.Text)
	}
	if e.Author != nil {
		n += utf8.RuneCountInString(e.Author.Name)
	}
	return n
}

func embedEmpty(e *discordgo.MessageEmbed) bool {
	return e.Title == "" && e.Description == "" && len(e.Fields) == 0 && e.Image == nil && e.Footer == nil
}

// maxImageURL bounds an embed image's URL (Discord documents none; its
// URL fields take 2048 elsewhere).
const maxImageURL = 2048

// embedImage shows an image given by an http(s) URL; one given as data
// (or as a data: URL) is returned for upload instead. note says why an
// image could not be shown.
func embedImage(img switchboard.UIImage) (image *discordgo.MessageEmbedImage, upload *switchboard.UIImage, note string) {
	u, upload, note := places.ImageOf(img, maxImageURL)
	if u == "" {
		return nil, upload, note
	}
	return &discordgo.MessageEmbedImage{URL: u}, nil, ""
}

// cardButtons are a card's buttons and the button that opens its form.
// A button whose custom_id another already has (two buttons with one
// action id) is left out: Discord refuses the message otherwise.
func cardButtons(ui switchboard.UI) (buttons []discordgo.MessageComponent, notes []string) {
	list := ui.Buttons
	if len(list) > cardMaxButtons {
		notes = append(notes, fmt.Sprintf("%d more buttons not shown", len(list)-cardMaxButtons))
		list = list[:cardMaxButtons]
	}
	seen := map[string]bool{}
	dupes := 0
	for i, b := range list {
		id := sbCustomID(idButton, b.ActionID)
		if seen[id] {
			dupes++
			continue
		}
		seen[id] = true
		label := places.OneLine(b.Label)
		if label == "" {
			label = fmt.Sprintf("Button %d", i+1)
		}
		style := discordgo.SecondaryButton
		switch b.Style {
		case "primary":
			style = discordgo.PrimaryButton
		case "danger":
			style = discordgo.DangerButton
		}
		buttons = append(buttons, discordgo.Button{Label: places.Clip(label, limButtonLabel), Style: style, CustomID: id})
	}
	if dupes > 0 {
		notes = append(notes, fmt.Sprintf("%d buttons with a repeated action id not shown", dupes))
	}
	if f := ui.Form; f != nil {
		label := places.OneLine(f.SubmitLabel)
		if label == "" {
			label = "Open form"
		}
		buttons = append(buttons, discordgo.Button{Label: places.Clip(label, limButtonLabel), Style: discordgo.PrimaryButton, CustomID: sbCustomID(idForm, f.ActionID)})
	}
	return buttons, notes
}

// cardSelects makes string selects of at most 25 options each, their
// placeholders saying which options each holds when there are several.
func cardSelects(sel switchboard.UISelect) (selects []discordgo.MessageComponent, note string) {
	pages, note := places.SelectPages(sel, limSelectOptions, cardMaxOptions, limPlaceholder)
	for page, p := range pages {
		options := make([]discordgo.SelectMenuOption, 0, len(p.Choices))
		for _, c := range p.Choices {
			options = append(options, discordgo.SelectMenuOption{Label: places.Clip(c.Label, limOption), Value: optionValue(sel.ActionID, c.Index)})
		}
		selects = append(selects, discordgo.SelectMenu{
			MenuType:    discordgo.StringSelectMenu,
			CustomID:    idSelect + strconv.Itoa(page),
			Placeholder: p.Placeholder,
			Options:     options,
		})
	}
	return selects, note
}

// Bounds of an approval's embed.
const (
	argsNoteRoom = 80 // the note that arguments were cut
)

// approvalMessage asks for consent to a tool call: an embed with the
// tool, its arguments as a code block (cut, with a note, to what the
// embed takes), when it expires and the security warning; and a row of
// Approve, Deny and Always allow buttons carrying the confirmation id.
func approvalMessage(req switchboard.ConfirmationRequestData) *discordgo.MessageSend {
	id := req.ConfirmationID
	return &discordgo.MessageSend{
		Embeds: []*discordgo.MessageEmbed{approvalEmbed(req, 0, true)},
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Approve", Style: discordgo.SuccessButton, CustomID: sbCustomID(idApprove, id)},
			discordgo.Button{Label: "Deny", Style: discordgo.DangerButton, CustomID: sbCustomID(idDeny, id)},
			discordgo.Button{Label: "Always allow", Style: discordgo.SecondaryButton, CustomID: sbCustomID(idAlways, id)},
		}}},
		AllowedMentions: mentionsNone(),
	}
}

// approvalEmbed is an approval's embed, leaving reserve characters of its
// description free. A pending one asks ("Approve `tool`?"), says when it
// expires and warns; a decided one only names the call, its decision said
// after it (resolvedEdit).
func approvalEmbed(req switchboard.ConfirmationRequestData, reserve int, pending bool) *discordgo.MessageEmbed {
	e := &discordgo.MessageEmbed{
		Type:  discordgo.EmbedTypeRich,
		Title: "Approve `" + codeName(req.ToolName, limEmbedTitle-12) + "`?",
		Color: colorPending,
	}
	if !pending {
		e.Title = decidedTitle + "`" + codeName(req.ToolName, limEmbedTitle-12) + "`"
	}
	var tail string
	if pending && !req.ExpiresAt.IsZero() {
		tail = fmt.Sprintf("Expires <t:%d:R>", req.ExpiresAt.Unix())
	}
	room := limEmbedDescription - reserve - utf8.RuneCountInString(tail) - 2
	var parts []string
	if args := places.PrettyArgs(req.Args); args != "" {
		parts = append(parts, argsBlock(args, json.Valid([]byte(args)), room))
	}
	if tail != "" {
		parts = append(parts, tail)
	}
	e.Description = strings.Join(parts, "\n")
	if w := strings.TrimSpace(req.SecurityWarning); w != "" && pending {
		e.Fields = []*discordgo.MessageEmbedField{{
			Name:  "⚠️ Security warning",
			Value: places.Clip(mdEscape(w), limFieldValue),
		}}
	}
	return e
}

// argsBlock is arguments as a code block of at most room characters;
// arguments that do not fit are cut at a line break where one is near
// the end (else anywhere) and followed by a note of how much is shown.
func argsBlock(args string, isJSON bool, room int) string {
	lang := ""
	if isJSON {
		lang = "json"
	}
	body := codeSafe(args)
	open, closing := "```"+lang+"\n", "\n```"
	if n := utf8.RuneCountInString(open + body + closing); n <= room {
		return open + body + closing
	}
	total := utf8.RuneCountInString(args)
	keep := max(room-utf8.RuneCountInString(open+closing)-argsNoteRoom-2, 0)
	rs := []rune(body)[:keep]
	cut := string(rs)
	if i := strings.LastIndexByte(cut, '\n'); i >= 0 && utf8.RuneCountInString(cut[:i]) >= keep*3/4 {
		cut = cut[:i]
	}
	cut = strings.TrimRight(cut, " \t\n")
	shown := utf8.RuneCountInString(strings.ReplaceAll(cut, "\u200b", ""))
	return open + cut + "\n…" + closing + fmt.Sprintf("\n-# Arguments cut: %d of %d characters shown.", shown, total)
}

// userMentionRe is a user mention, <@123> or <@!123>.
var userMentionRe = regexp.MustCompile(`^<@!?[0-9]{1,25}>$`)

// resolvedEdit turns an answered approval's message into its record: the
// embed without its question, expiry and warning ("Tool call `name`" and
// the arguments), coloured for the answer, without its buttons (an empty
// list, so that Discord removes them), and a line saying who answered,
// from where and when, "Approved by <@123> · Slack · <t:1735826700:f>"
// (Discord shows the time in each reader's own time zone), or that it
// expired or was cancelled, and when. byMention is how to show who
// answered: a <@id> mention is used as it is (mentions in embeds never
// ping), anything else as a name; without it res.By is shown. A zero at is
// left out. The caller sets the edit's ID and Channel.
func resolvedEdit(req switchboard.ConfirmationRequestData, res switchboard.ConfirmationResolvedData, byMention string, at time.Time) *discordgo.MessageEdit {
	status, color := resolvedStatus(res, byMention, at)
	e := approvalEmbed(req, utf8.RuneCountInString(status)+2, false)
	e.Color = color
	if e.Description == "" {
		e.Description = status
	} else {
		e.Description += "\n\n" + status
	}
	embeds := []*discordgo.MessageEmbed{e}
	components := []discordgo.MessageComponent{}
	return &discordgo.MessageEdit{Embeds: &embeds, Components: &components, AllowedMentions: mentionsNone()}
}

// resolvedStatus is the line that ends an answered approval, and its colour.
func resolvedStatus(res switchboard.ConfirmationResolvedData, byMention string, at time.Time) (string, int) {
	name := places.OneLine(res.By)
	by := strings.TrimSpace(byMention)
	switch {
	case by == "":
		by = mdEscape(places.Clip(name, 100))
	case !userMentionRe.MatchString(by):
		by = mdEscape(places.Clip(places.OneLine(by), 100)) // a name, not a mention
	}
	var status string
	color := colorDenied
	switch res.Why() { // never by the name: a person may be called "Expired"
	case switchboard.ReasonExpired:
		status, color = "⌛ Expired", colorClosed
	case switchboard.ReasonCancelled:
		status, color = "🚫 Cancelled", colorClosed
		if res.Reason != "" && by != "" { // By is who stopped the turn (a legacy one says "cancelled")
			status += " by " + by
		}
	default:
		status = "❌ Denied"
		switch {
		case res.Approved && res.Scope == switchboard.ScopeSession:
			status, color = "✅ Always allowed", colorApproved
		case res.Approved:
			status, color = "✅ Approved", colorApproved
		}
		if by != "" {
			status += " by " + by
		}
		if res.Channel != "" { // where the answer came from, in a shared conversation
			status += " · " + mdEscape(switchboard.ChannelName(res.Channel))
		}
	}
	if !at.IsZero() {
		status += fmt.Sprintf(" · <t:%d:f>", at.Unix())
	}
	return status, color
}

// decidedTitle begins a decided approval's title, before the tool's name.
const decidedTitle = "Tool call "

// redecided is the embed of an approval card posted before a restart, as
// Discord holds it, decided as resolvedEdit decides one: its question
// becomes the call's name, its expiry and warning go, the status ends it.
func redecided(old *discordgo.MessageEmbed, res switchboard.ConfirmationResolvedData, byMention string, at time.Time) *discordgo.MessageEmbed {
	status, color := resolvedStatus(res, byMention, at)
	e := &discordgo.MessageEmbed{Type: discordgo.EmbedTypeRich, Color: color, Title: old.Title}
	if name, ok := strings.CutPrefix(old.Title, "Approve "); ok {
		e.Title = decidedTitle + strings.TrimSuffix(name, "?")
	}
	desc := old.Description
	if i := strings.LastIndex(desc, "Expires <t:"); i >= 0 && !strings.Contains(desc[i:], "\n") {
		desc = strings.TrimRight(desc[:i], "\n")
	}
	room := limEmbedDescription - utf8.RuneCountInString(status) - 2
	if utf8.RuneCountInString(desc) > room {
		desc = truncateDiscord(desc, room)
	}
	if desc == "" {
		e.Description = status
	} else {
		e.Description = desc + "\n\n" + status
	}
	return e
}

// formModal is a card's form as a modal (the data of an interaction
// response of type 9): custom_id "sb:modal:<actionID>" (actionID, else
// the form's own), a text input per form input, their custom_ids
// "sb:in:<i>" with i the input's index in the form (the model's names are
// not sent; formValues maps them back). Discord takes five inputs: a
// longer form shows the required inputs first, then optional ones, in the
// form's order, and its title says how many of the fields it shows.
// Discord has no number or email inputs: their placeholders say what is
// asked for, and the gateway checks the values (tools.DescribeAction).
func formModal(form switchboard.UIForm, title, actionID string) *discordgo.InteractionResponseData {
	if actionID == "" {
		actionID = form.ActionID
	}
	shown := modalInputs(form)
	title = places.OneLine(title)
	if title == "" {
		title = "Form"
	}
	if len(shown) < len(form.Inputs) {
		suffix := fmt.Sprintf(" (%d of %d fields)", len(shown), len(form.Inputs))
		title = places.Clip(title, limModalTitle-utf8.RuneCountInString(suffix)) + suffix
	}
	var rows []discordgo.MessageComponent
	for _, i := range shown {
		in := form.Inputs[i]
		label := places.OneLine(in.Label)
		if label == "" {
			label = places.OneLine(in.Name)
		}
		if label == "" {
			label = fmt.Sprintf("Field %d", i+1)
		}
		placeholder := places.OneLine(in.Placeholder)
		style := discordgo.TextInputShort
		switch in.Type {
		case "textarea":
			style = discordgo.TextInputParagraph
		case "number":
			if placeholder == "" {
				placeholder = "A number"
			}
		case "email":
			if placeholder == "" {
				placeholder = "name@example.com"
			}
		}
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{
			CustomID:    idInput + strconv.Itoa(i),
			Label:       places.Clip(label, limInputLabel),
			Style:       style,
			Placeholder: places.Clip(placeholder, limInputPlaceholder),
			Required:    in.Required,
		}}})
	}
	return &discordgo.InteractionResponseData{
		CustomID:   sbCustomID(idModal, actionID),
		Title:      places.Clip(title, limModalTitle),
		Components: rows,
	}
}

// modalInputs are the indexes of the inputs a modal shows: all of them up
// to five, else the required ones first, then the optional ones, in the
// form's order.
func modalInputs(form switchboard.UIForm) []int {
	var shown []int
	if len(form.Inputs) <= limRows {
		for i := range form.Inputs {
			shown = append(shown, i)
		}
		return shown
	}
	take := map[int]bool{}
	for _, required := range []bool{true, false} {
		for i, in := range form.Inputs {
			if in.Required == required && len(take) < limRows {
				take[i] = true
			}
		}
	}
	for i := range form.Inputs {
		if take[i] {
			shown = append(shown, i)
		}
	}
	return shown
}

// formValues turns a submitted formModal into the JSON object of input
// name → value that the gateway takes as the form's action value
// (tools.DescribeAction). Inputs left empty, and anything that is not one
// of the form's inputs, are left out.
func formValues(form switchboard.UIForm, data discordgo.ModalSubmitInteractionData) string {
	out := map[string]string{}
	var walk func(cs []discordgo.MessageComponent)
	walk = func(cs []discordgo.MessageComponent) {
		for _, c := range cs {
			var input *discordgo.TextInput
			switch c := c.(type) {
			case discordgo.ActionsRow:
				walk(c.Components)
			case *discordgo.ActionsRow:
				walk(c.Components)
			case discordgo.TextInput:
				input = &c
			case *discordgo.TextInput:
				input = c
			}
			if input == nil || input.Value == "" {
				continue
			}
			s, ok := strings.CutPrefix(input.CustomID, idInput)
			i, err := strconv.Atoi(s)
			if ok && err == nil && i >= 0 && i < len(form.Inputs) && strconv.Itoa(i) == s {
				out[form.Inputs[i].Name] = input.Value
			}
		}
	}
	walk(data.Components)
	b, _ := json.Marshal(out) // a map of strings always encodes
	return string(b)
}

// errorLine is a user-facing error as a message's content.
func errorLine(e switchboard.ErrorData) string {
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = "Something went wrong."
	}
	return truncateDiscord("⚠️ "+mdEscape(msg), limContent)
}
