package slack

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// Block Kit builders: pure functions from the gateway's events to Slack
// blocks. Every text is cut to Slack's documented limits, so a message
// the model wrote can never make Slack refuse the post (invalid_blocks).
// What a user must read is split rather than cut: long card text goes
// into several sections.
//
// Interactive elements never carry the model's ids: their values are
// tokens from a ref function the listener provides (it keeps the
// mapping), their action ids are "sb_btn_0", "sb_sel_0", "sb_form_0",
// unique within the message.

// Slack's limits (https://docs.slack.dev/reference/block-kit/). Not here:
// button values (2000) and option values (150), which are ref's short
// tokens or confirmation ids; private_metadata (3000), the caller's; a
// context block's 10 elements, of which these builders write one.
const (
	maxBlocks         = 50   // blocks in a message
	maxModalBlocks    = 100  // blocks in a modal
	maxSectionText    = 3000 // a section's text
	maxFields         = 10   // fields in a section
	maxFieldText      = 2000 // one field
	maxHeaderText     = 150  // a header's plain_text
	maxContextText    = 3000 // a context element's text (a text object's limit)
	maxActionElements = 25   // elements in an actions block
	maxButtonText     = 75   // a button's label
	maxActionID       = 255  // action_id, block_id
	maxSelectOptions  = 100  // options in a static_select
	maxOptionText     = 75   // an option's label
	maxPlaceholder    = 150  // a select's or input's placeholder
	maxAltText        = 2000 // an image's alt_text
	maxImageURL       = 3000 // an image's URL
	maxModalTitle     = 24   // a modal's title
	maxModalButton    = 24   // a modal's submit and close labels
	maxInputLabel     = 2000 // an input block's label
)

// Bounds of our own, well inside Slack's.
const (
	maxFallbackText = 3000 // a message's "text", shown in notifications
	maxCardFields   = 100  // fields of a card shown (10 sections)
	maxCardButtons  = 250  // buttons of a card shown (10 actions blocks)
	maxCardSelects  = maxActionElements
	maxArgsSections = 3 // sections of an approval's arguments
)

// Kinds passed to ref; the same words as the tools package's action kinds.
const (
	refButton = "button"
	refSelect = "select"
	refForm   = "form"
)

// Action ids of the approval buttons and the form modal.
const (
	approveActionID = "sb_approve"
	denyActionID    = "sb_deny"
	alwaysActionID  = "sb_always"
	formCallbackID  = "sb_form"
)

// plainText is a plain_text object of s cut to n characters. plain_text is
// not parsed, so it is not escaped.
func plainText(s string, n int) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.PlainTextType, places.Clip(s, n), true, false)
}

// mrkdwnText is a mrkdwn object of s, which is escaped and short enough.
// It is verbatim: Slack then links and parses only what the text marks up
// itself, so a model's "@here" or "#general" stays text (toMrkdwn writes
// its links out as <url|label>).
func mrkdwnText(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, true)
}

// contextLine is a context block of one mrkdwn line.
func contextLine(s string) *slackapi.ContextBlock {
	return slackapi.NewContextBlock("", mrkdwnText(truncateMrkdwn(s, maxContextText)))
}

// fallback cuts a message's fallback text and makes sure there is one.
func fallback(s, otherwise string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		s = otherwise
	}
	return truncateMrkdwn(s, maxFallbackText)
}

// codeSafe keeps text inside a ``` block from closing it: a zero-width
// space goes between the backticks.
func codeSafe(s string) string {
	return strings.ReplaceAll(s, "```", "`\u200b`\u200b`")
}

// uiBlocks renders a card: a header for the title, the Markdown text in as
// many sections as it needs, the fields ten to a section, an image given
// by URL, the buttons (and a button that opens the form, which in Slack is
// a modal: see formModal) in actions blocks of 25, and the select as one
// static_select per 100 options. An image given as data cannot be shown
// by a block: it is returned as upload, for the listener to upload with
// files.uploadV2. text is the message's fallback, never empty; blocks is
// empty for a card with nothing but such an image (post text alone).
//
// ref gives the opaque value of each button ("button", its action id, its
// value), option ("select", the select's action id, the option's value)
// and the form's button ("form", the form's action id, "").
func uiBlocks(ui switchboard.UI, ref func(kind, actionID, value string) string) (text string, blocks []slackapi.Block, upload *switchboard.UIImage) {
	var head, tail []slackapi.Block
	var notes []string
	title := places.OneLine(ui.Title)
	if title != "" {
		head = append(head, slackapi.NewHeaderBlock(plainText(title, maxHeaderText)))
	}

	// Fields, ten to a section.
	fields := ui.Fields
	if len(fields) > maxCardFields {
		notes = append(notes, fmt.Sprintf("%d more fields not shown", len(fields)-maxCardFields))
		fields = fields[:maxCardFields]
	}
	var objs []*slackapi.TextBlockObject
	for _, f := range fields {
		if s := fieldText(f); s != "" {
			objs = append(objs, mrkdwnText(s))
		}
	}
	for len(objs) > 0 {
		n := min(len(objs), maxFields)
		tail = append(tail, slackapi.NewSectionBlock(nil, objs[:n], nil))
		objs = objs[n:]
	}

	// The image.
	if img := ui.Image; img != nil {
		block, up, note := imageBlock(*img, title)
		if block != nil {
			tail = append(tail, block)
		}
		upload = up
		if note != "" {
			notes = append(notes, note)
		}
	}

	// Buttons and the form's button.
	var elements []slackapi.BlockElement
	buttons := ui.Buttons
	if len(buttons) > maxCardButtons {
		notes = append(notes, fmt.Sprintf("%d more buttons not shown", len(buttons)-maxCardButtons))
		buttons = buttons[:maxCardButtons]
	}
	for i, b := range buttons {
		label := places.OneLine(b.Label)
		if label == "" {
			label = fmt.Sprintf("Button %d", i+1)
		}
		btn := slackapi.NewButtonBlockElement(fmt.Sprintf("sb_btn_%d", i), ref(refButton, b.ActionID, b.Value), plainText(label, maxButtonText))
		switch b.Style {
		case "primary":
			btn.WithStyle(slackapi.StylePrimary)
		case "danger":
			btn.WithStyle(slackapi.StyleDanger)
		}
		elements = append(elements, btn)
	}
	if f := ui.Form; f != nil {
		label := places.OneLine(f.SubmitLabel)
		if label == "" {
			label = "Open form"
		}
		elements = append(elements, slackapi.NewButtonBlockElement("sb_form_0", ref(refForm, f.ActionID, ""), plainText(label, maxButtonText)))
	}
	for len(elements) > 0 {
		n := min(len(elements), maxActionElements)
		tail = append(tail, slackapi.NewActionBlock("", elements[:n]...))
		elements = elements[n:]
	}

	// The select, 100 options to a static_select.
	if sel := ui.Select; sel != nil && len(sel.Options) > 0 {
		selects, note := selectElements(*sel, ref)
		tail = append(tail, slackapi.NewActionBlock("", selects...))
		if note != "" {
			notes = append(notes, note)
		}
	}

	if len(notes) > 0 {
		tail = append(tail, contextLine("_"+mrkdwnEscape(strings.Join(notes, "; "))+"_"))
	}

	// The text, in the room the rest leaves.
	sections := textSections(toMrkdwn(ui.Text), maxBlocks-len(head)-len(tail))
	blocks = append(blocks, head...)
	blocks = append(blocks, sections...)
	blocks = append(blocks, tail...)

	// The fallback: the title, the text and the fields.
	var fb []string
	if title != "" {
		fb = append(fb, mrkdwnEscape(title))
	}
	if t := toPlainText(ui.Text); t != "" {
		fb = append(fb, t)
	}
	for _, f := range fields {
		if l, v := places.OneLine(f.Label), strings.TrimSpace(f.Value); l != "" && v != "" {
			fb = append(fb, mrkdwnEscape(l+": "+v))
		} else if l+v != "" {
			fb = append(fb, mrkdwnEscape(l+v))
		}
	}
	return fallback(strings.Join(fb, "\n"), "Card"), blocks, upload
}

// textSections puts mrkdwn into at most room sections; what does not fit
// ends the last with a note that the text was cut.
func textSections(md string, room int) []slackapi.Block {
	pieces := splitMrkdwn(md, maxSectionText)
	if room < 1 || len(pieces) == 0 {
		return nil
	}
	if len(pieces) > room {
		const note = "\n_(text cut: too long for one message)_"
		last := truncateMrkdwn(pieces[room-1], maxSectionText-utf8.RuneCountInString(note))
		pieces = append(pieces[:room-1], last+note)
	}
	blocks := make([]slackapi.Block, len(pieces))
	for i, p := range pieces {
		blocks[i] = slackapi.NewSectionBlock(mrkdwnText(p), nil, nil)
	}
	return blocks
}

// fieldText is a field as "*Label*" and its value on the next line.
// Labels and values are plain text.
func fieldText(f switchboard.UIField) string {
	label, value := mrkdwnEscape(places.OneLine(f.Label)), mrkdwnEscape(strings.TrimSpace(f.Value))
	var s string
	switch {
	case label != "" && value != "":
		s = "*" + label + "*\n" + value
	case label != "":
		s = "*" + label + "*"
	default:
		s = value
	}
	return truncateMrkdwn(s, maxFieldText)
}

// imageBlock renders an image given by an http(s) URL; an image given as
// data (or as a data: URL) is returned for upload instead. note says why
// an image could not be shown.
func imageBlock(img switchboard.UIImage, title string) (block slackapi.Block, upload *switchboard.UIImage, note string) {
	alt := places.OneLine(img.Alt)
	if alt == "" {
		alt = title
	}
	if alt == "" {
		alt = "Image"
	}
	alt = places.Clip(alt, maxAltText)
	u, upload, note := places.ImageOf(img, maxImageURL)
	if u == "" {
		return nil, upload, note
	}
	return slackapi.NewImageBlock(u, alt, "", nil), nil, ""
}

// selectElements makes static_selects of at most 100 options each, their
// placeholders saying which options each holds when there are several.
func selectElements(sel switchboard.UISelect, ref func(kind, actionID, value string) string) (elements []slackapi.BlockElement, note string) {
	pages, note := places.SelectPages(sel, maxSelectOptions, maxCardSelects*maxSelectOptions, maxPlaceholder)
	for page, p := range pages {
		var options []*slackapi.OptionBlockObject
		for _, c := range p.Choices {
			options = append(options, slackapi.NewOptionBlockObject(ref(refSelect, sel.ActionID, c.Value), plainText(c.Label, maxOptionText), nil))
		}
		elements = append(elements, slackapi.NewOptionsSelectBlockElement(slackapi.OptTypeStatic, plainText(p.Placeholder, maxPlaceholder), fmt.Sprintf("sb_sel_%d", page), options...))
	}
	return elements, note
}

// approvalBlocks asks for consent to a tool call: the tool, a summary of
// it (plain text, may be empty), its arguments as code, the security
// warning, and Approve, Deny and Always allow buttons whose value is the
// confirmation id.
func approvalBlocks(req switchboard.ConfirmationRequestData, toolSummary string) (text string, blocks []slackapi.Block) {
	blocks = approvalCard(req, toolSummary, true)
	id := req.ConfirmationID
	blocks = append(blocks, slackapi.NewActionBlock(confirmationBlockID(id),
		slackapi.NewButtonBlockElement(approveActionID, id, plainText("Approve", maxButtonText)).WithStyle(slackapi.StylePrimary),
		slackapi.NewButtonBlockElement(denyActionID, id, plainText("Deny", maxButtonText)).WithStyle(slackapi.StyleDanger),
		slackapi.NewButtonBlockElement(alwaysActionID, id, plainText("Always allow", maxButtonText)),
	))
	text = "Approval needed: " + mrkdwnEscape(places.ToolName(req.ToolName))
	if w := places.OneLine(req.SecurityWarning); w != "" {
		text += "\nSecurity warning: " + mrkdwnEscape(w)
	}
	return fallback(text, "Approval needed"), blocks
}

// confirmationBlockID is the block id of an approval's buttons, which
// carries the confirmation id where it fits.
func confirmationBlockID(id string) string {
	if b := "sb_confirm:" + id; len(b) <= maxActionID {
		return b
	}
	return ""
}

// approvalCard is an approval without its buttons. An open one asks
// ("Approve `tool`?") and warns; a decided one only names the call, its
// decision said after it (resolvedBlocks).
func approvalCard(req switchboard.ConfirmationRequestData, toolSummary string, open bool) []slackapi.Block {
	name := strings.ReplaceAll(mrkdwnEscape(places.ToolName(req.ToolName)), "`", "'")
	head := "*Approve `" + name + "`?*"
	if !open {
		head = "*Tool call `" + name + "`*"
	}
	if s := strings.TrimSpace(toolSummary); s != "" {
		head += "\n" + mrkdwnEscape(s)
	}
	blocks := []slackapi.Block{slackapi.NewSectionBlock(mrkdwnText(truncateMrkdwn(head, maxSectionText)), nil, nil)}
	if args := places.PrettyArgs(req.Args); args != "" {
		code := "```\n" + codeSafe(mrkdwnEscape(args)) + "\n```"
		pieces := splitMrkdwn(code, maxSectionText)
		if len(pieces) > maxArgsSections {
			pieces = pieces[:maxArgsSections]
			shown := strings.NewReplacer("```", "", "\u200b", "").Replace(strings.Join(pieces, ""))
			for _, p := range pieces {
				blocks = append(blocks, slackapi.NewSectionBlock(mrkdwnText(p), nil, nil))
			}
			blocks = append(blocks, contextLine(fmt.Sprintf("_Arguments cut: about %d of %d characters shown._", utf8.RuneCountInString(mrkdwnUnescape(shown)), utf8.RuneCountInString(args))))
		} else {
			for _, p := range pieces {
				blocks = append(blocks, slackapi.NewSectionBlock(mrkdwnText(p), nil, nil))
			}
		}
	}
	if w := strings.TrimSpace(req.SecurityWarning); w != "" && open {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwnText(truncateMrkdwn("⚠ *Security warning:* "+mrkdwnEscape(w), maxSectionText)), nil, nil))
	}
	return blocks
}

// resolvedBlocks is an answered approval: the card without its buttons,
// its question and its warning, ending in who answered, from which channel
// when res says, and when ("Approved by <@U123> · Slack · <!date^…>"), or
// that it expired or was cancelled, and when. byMention is how to show who
// answered: a <@U…> mention is used as it is, anything else as text;
// without it res.By is shown. at is shown in each reader's own time zone
// (slackDate); a zero at is left out.
func resolvedBlocks(req switchboard.ConfirmationRequestData, res switchboard.ConfirmationResolvedData, byMention string, at time.Time) (text string, blocks []slackapi.Block) {
	blocks = approvalCard(req, "", false)
	by := strings.TrimSpace(byMention)
	name := places.OneLine(res.By)
	switch {
	case by == "":
		by = mrkdwnEscape(name)
	case !isUserMention(by):
		by = mrkdwnEscape(places.OneLine(by)) // a name, not a mention
	}
	var status, plain string
	switch res.Why() { // never by the name: a person may be called "Expired"
	case switchboard.ReasonExpired:
		status, plain = "Expired", "Expired"
	case switchboard.ReasonCancelled:
		status, plain = "Cancelled", "Cancelled"
		if res.Reason != "" && name != "" { // By is who stopped the turn (a legacy one says "cancelled")
			status += " by " + by
			plain += " by " + mrkdwnEscape(name) // no mention: it would notify
		}
	default:
		verb := "Denied"
		switch {
		case res.Approved && res.Scope == switchboard.ScopeSession:
			verb = "Always allowed"
		case res.Approved:
			verb = "Approved"
		}
		status, plain = verb, verb
		if by != "" {
			status += " by " + by
		}
		if name != "" {
			plain += " by " + mrkdwnEscape(name) // no mention: it would notify
		}
		if res.Channel != "" { // where the answer came from, in a shared conversation
			status += " · " + mrkdwnEscape(switchboard.ChannelName(res.Channel))
			plain += " · " + mrkdwnEscape(switchboard.ChannelName(res.Channel))
		}
	}
	if !at.IsZero() {
		status += " · " + slackDate(at)
	}
	blocks = append(blocks, contextLine(status))
	return fallback(plain+": "+mrkdwnEscape(places.ToolName(req.ToolName)), plain), blocks
}

// isUserMention reports whether s is a user mention, <@U123> or <@W123>.
func isUserMention(s string) bool {
	id, ok := strings.CutPrefix(s, "<@")
	if !ok {
		return false
	}
	if id, ok = strings.CutSuffix(id, ">"); !ok || id == "" || len(id) > 40 {
		return false
	}
	for _, r := range id {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// slackDate is a moment as Slack shows it to each reader, in their own
// time zone ("Jan 2nd, 2025 3:05 PM", "Today 3:05 PM"); clients that
// cannot format it show the fallback, in UTC.
func slackDate(at time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", at.Unix(), at.UTC().Format("2006-01-02 15:04 UTC"))
}

// errorBlocks is a user-facing error as one section.
func errorBlocks(e switchboard.ErrorData) (text string, blocks []slackapi.Block) {
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = "Something went wrong."
	}
	body := "⚠ " + mrkdwnEscape(msg)
	blocks = []slackapi.Block{slackapi.NewSectionBlock(mrkdwnText(truncateMrkdwn(body, maxSectionText)), nil, nil)}
	return fallback("Error: "+mrkdwnEscape(msg), "Error"), blocks
}

// formModal is a card's form as a modal: one input block per input, block
// and action ids "sb_in_0", "sb_in_1", … in the form's order (the model's
// input names are not sent to Slack; formSubmission maps them back).
// privateMetadata is passed through: keep it a short token, Slack takes
// at most 3000 characters.
func formModal(form switchboard.UIForm, title string, privateMetadata string) slackapi.ModalViewRequest {
	if title = places.OneLine(title); title == "" {
		title = "Form"
	}
	submit := places.OneLine(form.SubmitLabel)
	if submit == "" {
		submit = "Submit"
	}
	var blocks []slackapi.Block
	for i, in := range form.Inputs[:min(len(form.Inputs), maxModalBlocks)] {
		id := formInputID(i)
		var placeholder *slackapi.TextBlockObject
		if p := places.OneLine(in.Placeholder); p != "" {
			placeholder = plainText(p, maxPlaceholder)
		}
		var el slackapi.BlockElement
		switch in.Type {
		case "textarea":
			el = slackapi.NewPlainTextInputBlockElement(placeholder, id).WithMultiline(true)
		case "number":
			el = slackapi.NewNumberInputBlockElement(placeholder, id, true)
		case "email":
			el = slackapi.NewEmailTextInputBlockElement(placeholder, id)
		default:
			el = slackapi.NewPlainTextInputBlockElement(placeholder, id)
		}
		label := places.OneLine(in.Label)
		if label == "" {
			label = places.OneLine(in.Name)
		}
		if label == "" {
			label = fmt.Sprintf("Field %d", i+1)
		}
		blocks = append(blocks, slackapi.NewInputBlock(id, plainText(label, maxInputLabel), nil, el).WithOptional(!in.Required))
	}
	return slackapi.ModalViewRequest{
		Type:            slackapi.VTModal,
		Title:           plainText(title, maxModalTitle),
		Submit:          plainText(submit, maxModalButton),
		Close:           plainText("Cancel", maxModalButton),
		Blocks:          slackapi.Blocks{BlockSet: blocks},
		CallbackID:      formCallbackID,
		PrivateMetadata: privateMetadata,
	}
}

func formInputID(i int) string { return fmt.Sprintf("sb_in_%d", i) }

// formSubmission turns a submitted formModal's state (view.state.values)
// into the JSON object of input name → value that the gateway takes as the
// form's action value. Inputs left empty are left out.
func formSubmission(form switchboard.UIForm, values map[string]map[string]slackapi.BlockAction) string {
	out := map[string]string{}
	for i, in := range form.Inputs[:min(len(form.Inputs), maxModalBlocks)] {
		id := formInputID(i)
		if a, ok := values[id][id]; ok && a.Value != "" {
			out[in.Name] = a.Value
		}
	}
	b, _ := json.Marshal(out) // a map of strings always encodes
	return string(b)
}
