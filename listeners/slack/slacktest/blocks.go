package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Block Kit limits, from Slack's Block Kit reference.
const (
	MaxMessageBlocks        = 50
	MaxModalBlocks          = 100
	MaxBlockIDChars         = 255
	MaxActionIDChars        = 255
	MaxSectionTextChars     = 3000
	MaxSectionFields        = 10
	MaxSectionFieldChars    = 2000
	MaxHeaderChars          = 150
	MaxContextElements      = 10
	MaxActionsElements      = 25
	MaxButtonTextChars      = 75
	MaxButtonValueChars     = 2000
	MaxURLChars             = 3000
	MaxSelectOptions        = 100
	MaxOptionTextChars      = 75
	MaxOptionValueChars     = 150
	MaxPlaceholderChars     = 150
	MaxImageAltTextChars    = 2000
	MaxMarkdownBlockChars   = 12000 // all markdown blocks of one payload together
	MaxTextObjectChars      = 3000
	MaxViewTitleChars       = 24
	MaxViewButtonChars      = 24 // submit and close
	MaxCallbackIDChars      = 255
	MaxPrivateMetadataChars = 3000
)

// ValidationError is a payload Slack would reject. Code is the Web API error
// ("invalid_blocks" for ValidateBlocks, "invalid_arguments" for ValidateView)
// and each problem reads like Slack's, "must be less than 76 characters
// [json-pointer:/blocks/0/elements/0/text/text]".
type ValidationError struct {
	Code     string
	Problems []string
}

func (e *ValidationError) Error() string {
	return e.Code + ": " + strings.Join(e.Problems, "; ")
}

// ValidateBlocks checks a message's blocks array against Block Kit's
// documented limits: it returns nil, or a *ValidationError whose text starts
// with "invalid_blocks:". chat.postMessage, chat.update, chat.postEphemeral,
// chat.stopStream, files.completeUploadExternal and response_url posts of the
// fake apply it.
//
// Checked: at most 50 blocks; known block types only (section, divider,
// header, image, actions, context, context_actions, markdown, rich_text,
// file, video, table; input only in modals); block_id ≤255 and unique; text
// objects of type plain_text or mrkdwn, plain_text where Slack requires it
// (header, buttons, options of menus, placeholders), 1–3000 characters;
// section text ≤3000 and ≤10 fields of ≤2000; header ≤150; context ≤10
// elements; actions ≤25 elements; action_id ≤255 and unique within its block
// (Slack: "unique among all other action_ids in the containing block");
// buttons (text ≤75, value ≤2000, url ≤3000, style primary|danger); selects
// (placeholder ≤150, ≤100 options or option groups, option text ≤75, value
// ≤150); overflow 1–5 options; radio buttons and checkboxes ≤10 options;
// confirm dialogs; images (image_url ≤3000 or slack_file, alt_text required
// ≤2000); markdown text ≤12000 for all markdown blocks together.
func ValidateBlocks(raw json.RawMessage) error {
	v := newValidator(surfaceMessage)
	v.blocks("/blocks", raw, MaxMessageBlocks)
	return v.err("invalid_blocks")
}

// ValidateView checks a modal view object (the "view" argument of
// views.open, views.push and views.update): type modal, title plain_text
// ≤24 characters, submit and close plain_text ≤24 (submit required when
// the view has input blocks), ≤100 blocks validated as in ValidateBlocks
// with input blocks allowed, callback_id and external_id ≤255,
// private_metadata ≤3000. It returns nil or a *ValidationError with code
// "invalid_arguments", the error Slack's views methods answer.
func ValidateView(raw json.RawMessage) error {
	v := newValidator(surfaceModal)
	obj, ok := v.object("/view", decode(raw))
	if ok {
		v.view(obj)
	}
	return v.err("invalid_arguments")
}

type surface int

const (
	surfaceMessage surface = iota
	surfaceModal
)

type validator struct {
	surface       surface
	problems      []string
	blockIDs      map[string]bool
	markdownChars int
	tables        int
	inputs        int
}

func newValidator(s surface) *validator {
	return &validator{surface: s, blockIDs: map[string]bool{}}
}

func (v *validator) err(code string) error {
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Code: code, Problems: v.problems}
}

func (v *validator) addf(ptr, format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...)+" [json-pointer:"+ptr+"]")
}

// decode parses JSON keeping numbers as json.Number; undecodable input
// yields a value every check rejects.
func decode(raw json.RawMessage) any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return invalidJSON{}
	}
	return x
}

type invalidJSON struct{}

func (v *validator) object(ptr string, x any) (map[string]any, bool) {
	m, ok := x.(map[string]any)
	if !ok {
		v.addf(ptr, "must provide an object")
	}
	return m, ok
}

func (v *validator) array(ptr string, x any) ([]any, bool) {
	a, ok := x.([]any)
	if !ok {
		v.addf(ptr, "must provide an array")
	}
	return a, ok
}

// str checks an optional string field's length; it reports whether the
// field is present.
func (v *validator) str(ptr string, obj map[string]any, key string, maxChars int, required bool) (string, bool) {
	x, present := obj[key]
	if !present || x == nil {
		if required {
			v.addf(ptr, "missing required field: %s", key)
		}
		return "", false
	}
	s, ok := x.(string)
	if !ok {
		v.addf(ptr+"/"+key, "must be a string")
		return "", true
	}
	if required && s == "" {
		v.addf(ptr+"/"+key, "must be more than 0 characters")
	}
	if n := utf8.RuneCountInString(s); maxChars > 0 && n > maxChars {
		v.addf(ptr+"/"+key, "must be less than %d characters", maxChars+1)
	}
	return s, true
}

// items checks an array field's element count.
func (v *validator) items(ptr string, obj map[string]any, key string, minItems, maxItems int, required bool) ([]any, bool) {
	x, present := obj[key]
	if !present || x == nil {
		if required {
			v.addf(ptr, "missing required field: %s", key)
		}
		return nil, false
	}
	a, ok := v.array(ptr+"/"+key, x)
	if !ok {
		return nil, false
	}
	if len(a) < minItems {
		v.addf(ptr+"/"+key, "must provide at least %d items", minItems)
	}
	if maxItems > 0 && len(a) > maxItems {
		v.addf(ptr+"/"+key, "no more than %d items allowed", maxItems)
	}
	return a, true
}

type textKind int

const (
	plainOnly textKind = iota
	plainOrMrkdwn
)

// text checks a text object under obj[key].
func (v *validator) text(ptr string, obj map[string]any, key string, kind textKind, maxChars int, required bool) {
	x, present := obj[key]
	if !present || x == nil {
		if required {
			v.addf(ptr, "missing required field: %s", key)
		}
		return
	}
	v.textObject(ptr+"/"+key, x, kind, maxChars)
}

func (v *validator) textObject(ptr string, x any, kind textKind, maxChars int) {
	t, ok := v.object(ptr, x)
	if !ok {
		return
	}
	typ, _ := t["type"].(string)
	switch {
	case typ == "plain_text":
	case typ == "mrkdwn" && kind == plainOrMrkdwn:
	case kind == plainOnly:
		v.addf(ptr+"/type", "must be plain_text")
		return
	default:
		v.addf(ptr+"/type", "must be one of: plain_text, mrkdwn")
		return
	}
	if maxChars <= 0 || maxChars > MaxTextObjectChars {
		maxChars = MaxTextObjectChars
	}
	v.str(ptr, t, "text", maxChars, true)
	if _, ok := t["emoji"]; ok && typ != "plain_text" {
		v.addf(ptr+"/emoji", "emoji is only allowed on plain_text")
	}
}

func (v *validator) blocks(ptr string, raw json.RawMessage, maxBlocks int) {
	arr, ok := v.array(ptr, decode(raw))
	if !ok {
		return
	}
	if len(arr) > maxBlocks {
		v.addf(ptr, "no more than %d items allowed", maxBlocks)
	}
	for i, b := range arr {
		v.block(ptr+"/"+strconv.Itoa(i), b)
	}
}

func (v *validator) block(ptr string, x any) {
	b, ok := v.object(ptr, x)
	if !ok {
		return
	}
	typ, _ := b["type"].(string)
	if typ == "" {
		v.addf(ptr, "missing required field: type")
		return
	}
	if id, present := v.str(ptr, b, "block_id", MaxBlockIDChars, false); present {
		if v.blockIDs[id] {
			v.addf(ptr+"/block_id", "duplicate block_id: %s", id)
		}
		v.blockIDs[id] = true
	}
	if messageOnlyBlock(typ) && v.surface != surfaceMessage {
		v.addf(ptr+"/type", "unsupported block type in this surface: %s", typ)
		return
	}
	actionIDs := map[string]bool{}
	switch typ {
	case "section":
		_, hasText := b["text"]
		_, hasFields := b["fields"]
		if !hasText && !hasFields {
			v.addf(ptr, "must provide text or fields")
		}
		v.text(ptr, b, "text", plainOrMrkdwn, MaxSectionTextChars, false)
		if fields, ok := v.items(ptr, b, "fields", 1, MaxSectionFields, false); ok {
			for i, f := range fields {
				v.textObject(ptr+"/fields/"+strconv.Itoa(i), f, plainOrMrkdwn, MaxSectionFieldChars)
			}
		}
		if acc, ok := b["accessory"]; ok {
			v.element(ptr+"/accessory", acc, accessoryElements, actionIDs)
		}
	case "divider":
	case "header":
		v.text(ptr, b, "text", plainOnly, MaxHeaderChars, true)
	case "image":
		v.image(ptr, b)
		v.text(ptr, b, "title", plainOnly, 2000, false)
	case "actions":
		if els, ok := v.items(ptr, b, "elements", 1, MaxActionsElements, true); ok {
			for i, e := range els {
				v.element(ptr+"/elements/"+strconv.Itoa(i), e, actionsElements, actionIDs)
			}
		}
	case "context":
		if els, ok := v.items(ptr, b, "elements", 1, MaxContextElements, true); ok {
			for i, e := range els {
				eptr := ptr + "/elements/" + strconv.Itoa(i)
				if m, ok := e.(map[string]any); ok && m["type"] == "image" {
					v.image(eptr, m)
					continue
				}
				v.textObject(eptr, e, plainOrMrkdwn, 0)
			}
		}
	case "context_actions":
		if els, ok := v.items(ptr, b, "elements", 1, 5, true); ok {
			for i, e := range els {
				v.element(ptr+"/elements/"+strconv.Itoa(i), e, contextActionsElements, actionIDs)
			}
		}
	case "input":
		if v.surface != surfaceModal {
			v.addf(ptr+"/type", "input blocks are only allowed in modals")
			return
		}
		v.inputs++
		v.text(ptr, b, "label", plainOnly, 2000, true)
		v.text(ptr, b, "hint", plainOnly, 2000, false)
		if el, ok := b["element"]; ok {
			v.element(ptr+"/element", el, inputElements, actionIDs)
		} else {
			v.addf(ptr, "missing required field: element")
		}
	case "markdown":
		s, _ := v.str(ptr, b, "text", MaxMarkdownBlockChars, true)
		v.markdownChars += utf8.RuneCountInString(s)
		if v.markdownChars > MaxMarkdownBlockChars {
			v.addf(ptr+"/text", "markdown blocks must be less than %d characters in total", MaxMarkdownBlockChars+1)
		}
	case "rich_text":
		v.items(ptr, b, "elements", 0, 0, true)
	case "file":
		v.str(ptr, b, "external_id", 0, true)
		if src, _ := v.str(ptr, b, "source", 0, true); src != "" && src != "remote" {
			v.addf(ptr+"/source", "must be remote")
		}
	case "video":
		v.str(ptr, b, "alt_text", 0, true)
		v.text(ptr, b, "title", plainOnly, 199, true)
		v.str(ptr, b, "video_url", MaxURLChars, true)
		v.str(ptr, b, "thumbnail_url", MaxURLChars, true)
	case "table":
		v.tables++
		if v.tables > 1 {
			v.addf(ptr, "only one table block is allowed per message")
		}
		if rows, ok := v.items(ptr, b, "rows", 1, 100, true); ok {
			for i, r := range rows {
				if cells, ok := v.array(ptr+"/rows/"+strconv.Itoa(i), r); ok && len(cells) > 20 {
					v.addf(ptr+"/rows/"+strconv.Itoa(i), "no more than 20 items allowed")
				}
			}
		}
	default:
		v.addf(ptr+"/type", "unsupported block type: %s", typ)
	}
}

// image checks an image block or element: image_url or slack_file, and the
// required alt_text.
func (v *validator) image(ptr string, m map[string]any) {
	_, hasURL := m["image_url"]
	_, hasFile := m["slack_file"]
	switch {
	case hasURL:
		v.str(ptr, m, "image_url", MaxURLChars, true)
	case !hasFile:
		v.addf(ptr, "missing required field: image_url")
	}
	v.str(ptr, m, "alt_text", MaxImageAltTextChars, true)
}

// elementSet reports whether an element type may appear in a position.
type elementSet func(typ string) bool

// isSelect matches the select menus (static, external, users, conversations,
// channels; single and multi).
func isSelect(typ string) bool {
	switch strings.TrimPrefix(typ, "multi_") {
	case "static_select", "external_select", "users_select", "conversations_select", "channels_select":
		return true
	}
	return false
}

func actionsElements(typ string) bool {
	switch typ {
	case "button", "checkboxes", "datepicker", "datetimepicker", "overflow", "radio_buttons",
		"timepicker", "workflow_button", "rich_text_input":
		return true
	}
	return isSelect(typ)
}

func accessoryElements(typ string) bool {
	switch typ {
	case "button", "checkboxes", "datepicker", "image", "overflow", "radio_buttons", "timepicker", "workflow_button":
		return true
	}
	return isSelect(typ)
}

func inputElements(typ string) bool {
	switch typ {
	case "checkboxes", "datepicker", "datetimepicker", "email_text_input", "file_input", "number_input",
		"plain_text_input", "radio_buttons", "rich_text_input", "timepicker", "url_text_input":
		return true
	}
	return isSelect(typ)
}

func contextActionsElements(typ string) bool {
	return typ == "feedback_buttons" || typ == "icon_button"
}

// messageOnlyBlock reports block types Slack accepts in messages but not in
// modals.
func messageOnlyBlock(typ string) bool {
	return typ == "markdown" || typ == "context_actions" || typ == "table"
}

func (v *validator) element(ptr string, x any, allowed elementSet, actionIDs map[string]bool) {
	e, ok := v.object(ptr, x)
	if !ok {
		return
	}
	typ, _ := e["type"].(string)
	if !allowed(typ) {
		v.addf(ptr+"/type", "unsupported element type here: %q", typ)
		return
	}
	if typ == "image" {
		v.image(ptr, e)
		return
	}
	if id, present := v.str(ptr, e, "action_id", MaxActionIDChars, false); present {
		if actionIDs[id] {
			v.addf(ptr+"/action_id", "duplicate action_id in block: %s", id)
		}
		actionIDs[id] = true
	}
	if c, ok := e["confirm"]; ok {
		v.confirm(ptr+"/confirm", c)
	}
	v.text(ptr, e, "placeholder", plainOnly, MaxPlaceholderChars, false)
	switch typ {
	case "button", "workflow_button":
		v.text(ptr, e, "text", plainOnly, MaxButtonTextChars, true)
		v.str(ptr, e, "value", MaxButtonValueChars, false)
		v.str(ptr, e, "url", MaxURLChars, false)
		v.str(ptr, e, "accessibility_label", 75, false)
		v.style(ptr, e)
	case "static_select", "multi_static_select":
		_, hasOpts := e["options"]
		_, hasGroups := e["option_groups"]
		switch {
		case hasOpts && hasGroups:
			v.addf(ptr, "must provide either options or option_groups, not both")
		case hasGroups:
			if groups, ok := v.items(ptr, e, "option_groups", 1, MaxSelectOptions, true); ok {
				for i, g := range groups {
					gptr := ptr + "/option_groups/" + strconv.Itoa(i)
					if gm, ok := v.object(gptr, g); ok {
						v.text(gptr, gm, "label", plainOnly, MaxOptionTextChars, true)
						v.options(gptr, gm, 1, MaxSelectOptions, plainOnly, false)
					}
				}
			}
		default:
			v.options(ptr, e, 1, MaxSelectOptions, plainOnly, false)
		}
		if io, ok := e["initial_option"]; ok {
			v.option(ptr+"/initial_option", io, plainOnly, false)
		}
	case "overflow":
		v.options(ptr, e, 1, 5, plainOnly, true)
	case "radio_buttons", "checkboxes":
		v.options(ptr, e, 1, 10, plainOrMrkdwn, false)
	case "plain_text_input":
		for _, k := range []string{"min_length", "max_length"} {
			if n, ok := e[k].(json.Number); ok {
				if i, err := n.Int64(); err != nil || i < 0 || i > 3000 {
					v.addf(ptr+"/"+k, "must be between 0 and 3000")
				}
			}
		}
	case "feedback_buttons":
		for _, k := range []string{"positive_button", "negative_button"} {
			if bm, ok := e[k].(map[string]any); ok {
				v.text(ptr+"/"+k, bm, "text", plainOnly, MaxButtonTextChars, true)
				v.str(ptr+"/"+k, bm, "value", MaxButtonValueChars, true)
			} else {
				v.addf(ptr, "missing required field: %s", k)
			}
		}
	case "icon_button":
		v.str(ptr, e, "icon", 0, true)
		v.text(ptr, e, "text", plainOnly, MaxButtonTextChars, true)
	}
	if strings.HasPrefix(typ, "multi_") {
		if n, ok := e["max_selected_items"].(json.Number); ok {
			if i, err := n.Int64(); err != nil || i < 1 {
				v.addf(ptr+"/max_selected_items", "must be at least 1")
			}
		}
	}
}

func (v *validator) style(ptr string, e map[string]any) {
	if st, present := v.str(ptr, e, "style", 0, false); present && !slices.Contains([]string{"primary", "danger"}, st) {
		v.addf(ptr+"/style", "must be one of: primary, danger")
	}
}

func (v *validator) options(ptr string, e map[string]any, minItems, maxItems int, kind textKind, urls bool) {
	opts, ok := v.items(ptr, e, "options", minItems, maxItems, true)
	if !ok {
		return
	}
	for i, o := range opts {
		v.option(ptr+"/options/"+strconv.Itoa(i), o, kind, urls)
	}
}

func (v *validator) option(ptr string, x any, kind textKind, urls bool) {
	o, ok := v.object(ptr, x)
	if !ok {
		return
	}
	v.text(ptr, o, "text", kind, MaxOptionTextChars, true)
	v.str(ptr, o, "value", MaxOptionValueChars, true)
	v.text(ptr, o, "description", kind, MaxOptionTextChars, false)
	if _, has := o["url"]; has {
		if !urls {
			v.addf(ptr+"/url", "url is only allowed in overflow menu options")
		} else {
			v.str(ptr, o, "url", MaxURLChars, false)
		}
	}
}

func (v *validator) confirm(ptr string, x any) {
	c, ok := v.object(ptr, x)
	if !ok {
		return
	}
	v.text(ptr, c, "title", plainOnly, 100, true)
	v.text(ptr, c, "text", plainOrMrkdwn, 300, true)
	v.text(ptr, c, "confirm", plainOnly, 30, true)
	v.text(ptr, c, "deny", plainOnly, 30, true)
	v.style(ptr, c)
}

func (v *validator) view(obj map[string]any) {
	const ptr = "/view"
	if typ, _ := obj["type"].(string); typ != "modal" {
		v.addf(ptr+"/type", "must be modal")
	}
	v.text(ptr, obj, "title", plainOnly, MaxViewTitleChars, true)
	v.text(ptr, obj, "close", plainOnly, MaxViewButtonChars, false)
	v.text(ptr, obj, "submit", plainOnly, MaxViewButtonChars, false)
	v.str(ptr, obj, "callback_id", MaxCallbackIDChars, false)
	v.str(ptr, obj, "external_id", 255, false)
	v.str(ptr, obj, "private_metadata", MaxPrivateMetadataChars, false)
	raw, err := json.Marshal(obj["blocks"])
	if _, present := obj["blocks"]; !present || err != nil {
		v.addf(ptr, "missing required field: blocks")
		return
	}
	v.blocks(ptr+"/blocks", raw, MaxModalBlocks)
	if _, hasSubmit := obj["submit"]; v.inputs > 0 && !hasSubmit {
		v.addf(ptr, "missing required field: submit (required when the view has input blocks)")
	}
}
