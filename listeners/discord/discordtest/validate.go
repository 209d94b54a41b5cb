package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits Discord documents for messages, embeds, components and modals.
const (
	MaxContentChars           = 2000
	MaxAttachments            = 10
	MaxEmbeds                 = 10
	MaxEmbedTitleChars        = 256
	MaxEmbedDescriptionChars  = 4096
	MaxEmbedFields            = 25
	MaxEmbedFieldNameChars    = 256
	MaxEmbedFieldValueChars   = 1024
	MaxEmbedFooterChars       = 2048
	MaxEmbedAuthorNameChars   = 256
	MaxEmbedTotalChars        = 6000
	MaxActionRows             = 5
	MaxRowButtons             = 5
	MaxButtonLabelChars       = 80
	MaxCustomIDChars          = 100
	MaxURLChars               = 512
	MaxSelectOptions          = 25
	MaxSelectValues           = 25
	MaxOptionLabelChars       = 100
	MaxOptionValueChars       = 100
	MaxOptionDescriptionChars = 100
	MaxPlaceholderChars       = 150
	MaxComponentsV2           = 40
	MaxTextDisplayTotalChars  = 4000
	MaxMediaDescriptionChars  = 1024
	MaxGalleryItems           = 10
	MaxSectionTexts           = 3
	MaxModalTitleChars        = 45
	MaxModalComponents        = 5
	MaxTextInputLabelChars    = 45
	MaxTextInputValueChars    = 4000
	MaxTextInputPlaceholder   = 100
	MaxLabelDescriptionChars  = 100
)

// Component types.
const (
	componentActionRow     = 1
	componentButton        = 2
	componentStringSelect  = 3
	componentTextInput     = 4
	componentUserSelect    = 5
	componentRoleSelect    = 6
	componentMentionSelect = 7
	componentChannelSelect = 8
	componentSection       = 9
	componentTextDisplay   = 10
	componentThumbnail     = 11
	componentMediaGallery  = 12
	componentFile          = 13
	componentSeparator     = 14
	componentContainer     = 17
	componentLabel         = 18
	componentFileUpload    = 19
)

func isSelect(t int) bool {
	return t == componentStringSelect || (t >= componentUserSelect && t <= componentChannelSelect)
}

// ValidateMessage checks a message payload (the JSON body of Create
// Message, or the data of an interaction response or follow-up) against
// Discord's documented limits. It returns nil or an *Error: 50006 "Cannot
// send an empty message" when the payload has no content, embeds,
// components, attachments, stickers or poll, and otherwise 50035 "Invalid
// Form Body" whose text names each problem's path, e.g.
//
//	50035 Invalid Form Body: components[0].components[BASE_TYPE_BAD_LENGTH]: Must be between 1 and 5 in length.
//
// Checked: content ≤2000 characters; ≤10 attachments; embeds ≤10 with
// title ≤256, description ≤4096, ≤25 fields (name 1–256, value 1–1024),
// footer text ≤2048, author name ≤256, color ≤0xFFFFFF and ≤6000 characters
// across all embeds; classic components (no IS_COMPONENTS_V2 flag): ≤5
// action rows at the top level, each with 1–5 buttons or exactly one
// select; buttons (style 1–6, label ≤80, custom_id ≤100 required for
// styles 1–4 and refused for link and premium buttons, link buttons need a
// url ≤512, premium buttons a sku_id); selects (custom_id ≤100,
// placeholder ≤150, min_values 0–25, max_values 1–25 and ≥min_values;
// string selects 1–25 options with label and value 1–100, description
// ≤100, unique values, max_values ≤ options); custom_id unique across the
// message. With IS_COMPONENTS_V2 (1<<15): content, embeds, poll and
// stickers must be absent; top-level components are action rows, sections,
// text displays, media galleries, files, separators or containers; ≤40
// components in all (nested ones counted); text displays ≤4000 characters
// together; sections hold 1–3 text displays and a button or thumbnail
// accessory; galleries 1–10 items; files reference attachment://…
func ValidateMessage(raw json.RawMessage) error {
	if e := validateMessage(raw, nil, 0); e != nil {
		return e
	}
	return nil
}

// ValidateModal checks the data of a MODAL interaction response (callback
// type 9): title 1–45 characters, custom_id 1–100, 1–5 components, each an
// action row holding exactly one text input, a label (type 18) wrapping a
// text input, select or file upload, or a text display. Text inputs need a
// custom_id ≤100 and style 1 or 2; label ≤45 (required in an action row),
// value ≤4000, placeholder ≤100, min_length 0–4000, max_length 1–4000 and
// not below min_length. Custom IDs must be unique. It returns nil or an
// *Error with code 50035 whose text names the path, e.g.
// "50035 Invalid Form Body: title[BASE_TYPE_MAX_LENGTH]: Must be 45 or fewer in length.".
func ValidateModal(raw json.RawMessage) error {
	v := newValidator(nil)
	v.modal(nil, decode(raw))
	if e := v.err(); e != nil {
		return e
	}
	return nil
}

// validateMessage validates a message payload whose problems are reported
// under prefix (e.g. "data" for an interaction callback). files is how
// many files the request uploads alongside it.
func validateMessage(raw json.RawMessage, prefix []any, files int) *Error {
	v := newValidator(prefix)
	doc, ok := decode(raw).(map[string]any)
	if !ok {
		v.add(nil, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
		return v.err()
	}
	v.message(doc, files)
	if e := v.err(); e != nil {
		return e
	}
	if messageEmpty(doc, files) {
		return errEmptyMessage
	}
	return nil
}

// messageEmpty reports whether a payload has nothing Discord could show.
func messageEmpty(doc map[string]any, files int) bool {
	if s, _ := doc["content"].(string); s != "" {
		return false
	}
	for _, k := range []string{"embeds", "components", "attachments", "sticker_ids"} {
		if l, _ := doc[k].([]any); len(l) > 0 {
			return false
		}
	}
	if p, ok := doc["poll"].(map[string]any); ok && p != nil {
		return false
	}
	return files == 0
}

func decode(raw json.RawMessage) any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

type validator struct {
	prefix    []any
	fields    []FieldError
	customIDs map[string]bool
	count     int // components, nested ones included (Components V2)
	textChars int // text display content (Components V2)
}

func newValidator(prefix []any) *validator {
	return &validator{prefix: prefix, customIDs: map[string]bool{}}
}

func (v *validator) err() *Error {
	if len(v.fields) == 0 {
		return nil
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidFormBody, Message: "Invalid Form Body", Fields: v.fields}
}

func (v *validator) add(path []any, code, msg string) {
	segs := append(append([]any{}, v.prefix...), path...)
	v.fields = append(v.fields, FieldError{Path: formatPath(segs), Code: code, Message: msg, segs: segs})
}

func formatPath(segs []any) string {
	var b strings.Builder
	for _, s := range segs {
		switch s := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, s)
		}
	}
	return b.String()
}

func at(path []any, more ...any) []any {
	return append(append(make([]any, 0, len(path)+len(more)), path...), more...)
}

func chars(s string) int { return utf8.RuneCountInString(s) }

// str checks an optional string field: its type and at most maxLen
// characters (0 for no limit). It returns the value and whether present.
func (v *validator) str(obj map[string]any, path []any, key string, maxLen int, required bool) (string, bool) {
	raw, present := obj[key]
	if !present || raw == nil {
		if required {
			v.add(at(path, key), "BASE_TYPE_REQUIRED", "This field is required")
		}
		return "", false
	}
	s, ok := raw.(string)
	if !ok {
		v.add(at(path, key), "BASE_TYPE_STRING", fmt.Sprintf("Could not interpret %q as string.", fmt.Sprint(raw)))
		return "", false
	}
	if required && s == "" {
		v.add(at(path, key), "BASE_TYPE_REQUIRED", "This field is required")
		return s, true
	}
	if maxLen > 0 && chars(s) > maxLen {
		v.add(at(path, key), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxLen))
	}
	return s, true
}

// integer reads an optional integer field, checking it lies in [lo, hi].
func (v *validator) integer(obj map[string]any, path []any, key string, lo, hi int64) (int64, bool) {
	raw, present := obj[key]
	if !present || raw == nil {
		return 0, false
	}
	n, ok := raw.(json.Number)
	var i int64
	var err error
	if ok {
		i, err = n.Int64()
	}
	if !ok || err != nil {
		v.add(at(path, key), "NUMBER_TYPE_COERCE", fmt.Sprintf("Value \"%v\" is not int.", raw))
		return 0, false
	}
	if i < lo {
		v.add(at(path, key), "NUMBER_TYPE_MIN", fmt.Sprintf("int value should be greater than or equal to %d.", lo))
	}
	if i > hi {
		v.add(at(path, key), "NUMBER_TYPE_MAX", fmt.Sprintf("int value should be less than or equal to %d.", hi))
	}
	return i, true
}

// list reads an optional array field (null counts as absent).
func (v *validator) list(obj map[string]any, path []any, key string) ([]any, bool) {
	raw, present := obj[key]
	if !present || raw == nil {
		return nil, false
	}
	l, ok := raw.([]any)
	if !ok {
		v.add(at(path, key), "BASE_TYPE_LIST", "Could not interpret the value as a list.")
		return nil, false
	}
	return l, true
}

func (v *validator) object(path []any, raw any) (map[string]any, bool) {
	o, ok := raw.(map[string]any)
	if !ok {
		v.add(path, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
	}
	return o, ok
}

func lengthBetween(lo, hi int) string {
	return fmt.Sprintf("Must be between %d and %d in length.", lo, hi)
}

func flagsOf(doc map[string]any) int64 {
	if n, ok := doc["flags"].(json.Number); ok {
		i, _ := n.Int64()
		return i
	}
	return 0
}

const errLegacyWithV2 = "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2"

func (v *validator) message(doc map[string]any, files int) {
	v.integer(doc, nil, "flags", 0, 1<<31-1)
	v2 := flagsOf(doc)&FlagIsComponentsV2 != 0
	content, _ := v.str(doc, nil, "content", MaxContentChars, false)
	if v2 && content != "" {
		v.add([]any{"content"}, errLegacyWithV2, "The 'content' field cannot be used when using MessageFlags.IS_COMPONENTS_V2")
	}
	if embeds, ok := v.list(doc, nil, "embeds"); ok {
		if v2 && len(embeds) > 0 {
			v.add([]any{"embeds"}, errLegacyWithV2, "The 'embeds' field cannot be used when using MessageFlags.IS_COMPONENTS_V2")
		}
		v.embeds(embeds)
	}
	if v2 {
		if p, ok := doc["poll"]; ok && p != nil {
			v.add([]any{"poll"}, errLegacyWithV2, "The 'poll' field cannot be used when using MessageFlags.IS_COMPONENTS_V2")
		}
		if l, _ := doc["sticker_ids"].([]any); len(l) > 0 {
			v.add([]any{"sticker_ids"}, errLegacyWithV2, "The 'sticker_ids' field cannot be used when using MessageFlags.IS_COMPONENTS_V2")
		}
	}
	if atts, ok := v.list(doc, nil, "attachments"); ok {
		if len(atts) > MaxAttachments {
			v.add([]any{"attachments"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxAttachments))
		}
		for i, a := range atts {
			if o, ok := v.object([]any{"attachments", i}, a); ok {
				v.str(o, []any{"attachments", i}, "description", 1024, false)
			}
		}
	}
	if files > MaxAttachments {
		v.add([]any{"files"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxAttachments))
	}
	if comps, ok := v.list(doc, nil, "components"); ok {
		if v2 {
			v.componentsV2(comps)
		} else {
			v.componentsV1(comps)
		}
	}
}

func (v *validator) embeds(embeds []any) {
	if len(embeds) > MaxEmbeds {
		v.add([]any{"embeds"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxEmbeds))
	}
	total := 0
	for i, e := range embeds {
		p := []any{"embeds", i}
		o, ok := v.object(p, e)
		if !ok {
			continue
		}
		t, _ := v.str(o, p, "title", MaxEmbedTitleChars, false)
		d, _ := v.str(o, p, "description", MaxEmbedDescriptionChars, false)
		total += chars(t) + chars(d)
		v.str(o, p, "url", 2048, false)
		v.integer(o, p, "color", 0, 0xFFFFFF)
		if ts, ok := v.str(o, p, "timestamp", 0, false); ok && ts != "" {
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				v.add(at(p, "timestamp"), "DATE_TIME_TYPE_PARSE", fmt.Sprintf("Could not parse %s. Should be ISO8601.", ts))
			}
		}
		if raw, ok := o["footer"]; ok && raw != nil {
			if f, ok := v.object(at(p, "footer"), raw); ok {
				s, _ := v.str(f, at(p, "footer"), "text", MaxEmbedFooterChars, true)
				total += chars(s)
			}
		}
		if raw, ok := o["author"]; ok && raw != nil {
			if a, ok := v.object(at(p, "author"), raw); ok {
				s, _ := v.str(a, at(p, "author"), "name", MaxEmbedAuthorNameChars, true)
				total += chars(s)
			}
		}
		fields, _ := v.list(o, p, "fields")
		if len(fields) > MaxEmbedFields {
			v.add(at(p, "fields"), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxEmbedFields))
		}
		for j, f := range fields {
			fp := at(p, "fields", j)
			fo, ok := v.object(fp, f)
			if !ok {
				continue
			}
			n, _ := v.str(fo, fp, "name", MaxEmbedFieldNameChars, true)
			val, _ := v.str(fo, fp, "value", MaxEmbedFieldValueChars, true)
			total += chars(n) + chars(val)
		}
	}
	if total > MaxEmbedTotalChars {
		v.add([]any{"embeds"}, "MAX_EMBED_SIZE_EXCEEDED", fmt.Sprintf("Embed size exceeds maximum size of %d", MaxEmbedTotalChars))
	}
}

func typeOf(o map[string]any) int {
	if n, ok := o["type"].(json.Number); ok {
		i, _ := n.Int64()
		return int(i)
	}
	return -1
}

func (v *validator) componentsV1(comps []any) {
	if len(comps) > MaxActionRows {
		v.add([]any{"components"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxActionRows))
	}
	for i, c := range comps {
		p := []any{"components", i}
		o, ok := v.object(p, c)
		if !ok {
			continue
		}
		if typeOf(o) != componentActionRow {
			v.add(p, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (1,).`)
			continue
		}
		v.actionRow(p, o)
	}
}

var v2TopLevel = map[int]bool{componentActionRow: true, componentSection: true, componentTextDisplay: true,
	componentMediaGallery: true, componentFile: true, componentSeparator: true, componentContainer: true}

func (v *validator) componentsV2(comps []any) {
	for i, c := range comps {
		p := []any{"components", i}
		o, ok := v.object(p, c)
		if !ok {
			continue
		}
		if !v2TopLevel[typeOf(o)] {
			v.add(p, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (1, 9, 10, 12, 13, 14, 17).`)
			continue
		}
		v.componentV2(p, o)
	}
	if v.count > MaxComponentsV2 {
		v.add([]any{"components"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxComponentsV2))
	}
	if v.textChars > MaxTextDisplayTotalChars {
		v.add([]any{"components"}, "MAX_TEXT_DISPLAY_LENGTH_EXCEEDED", fmt.Sprintf("The combined length of all text displays must be %d or fewer.", MaxTextDisplayTotalChars))
	}
}

// componentV2 validates one Components V2 layout or content component.
func (v *validator) componentV2(p []any, o map[string]any) {
	v.count++
	switch typeOf(o) {
	case componentActionRow:
		v.count-- // actionRow counts itself
		v.actionRow(p, o)
	case componentTextDisplay:
		s, _ := v.str(o, p, "content", 0, true)
		v.textChars += chars(s)
	case componentSection:
		texts, _ := v.list(o, p, "components")
		if len(texts) < 1 || len(texts) > MaxSectionTexts {
			v.add(at(p, "components"), "BASE_TYPE_BAD_LENGTH", lengthBetween(1, MaxSectionTexts))
		}
		for i, t := range texts {
			tp := at(p, "components", i)
			if to, ok := v.object(tp, t); ok {
				if typeOf(to) != componentTextDisplay {
					v.add(tp, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (10,).`)
					continue
				}
				v.componentV2(tp, to)
			}
		}
		acc, ok := o["accessory"].(map[string]any)
		if !ok {
			v.add(at(p, "accessory"), "BASE_TYPE_REQUIRED", "This field is required")
			break
		}
		ap := at(p, "accessory")
		switch typeOf(acc) {
		case componentButton:
			v.count++
			v.button(ap, acc)
		case componentThumbnail:
			v.componentV2(ap, acc)
		default:
			v.add(ap, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (2, 11).`)
		}
	case componentThumbnail:
		v.media(p, o, "media")
		v.str(o, p, "description", MaxMediaDescriptionChars, false)
	case componentMediaGallery:
		items, _ := v.list(o, p, "items")
		if len(items) < 1 || len(items) > MaxGalleryItems {
			v.add(at(p, "items"), "BASE_TYPE_BAD_LENGTH", lengthBetween(1, MaxGalleryItems))
		}
		for i, it := range items {
			ip := at(p, "items", i)
			if io, ok := v.object(ip, it); ok {
				v.media(ip, io, "media")
				v.str(io, ip, "description", MaxMediaDescriptionChars, false)
			}
		}
	case componentFile:
		if u := v.media(p, o, "file"); u != "" && !strings.HasPrefix(u, "attachment://") {
			v.add(at(p, "file", "url"), "UNFURLED_MEDIA_ITEM_ATTACHMENT_REQUIRED", "File components only support attachment:// URLs.")
		}
	case componentSeparator:
		v.integer(o, p, "spacing", 1, 2)
	case componentContainer:
		v.integer(o, p, "accent_color", 0, 0xFFFFFF)
		kids, _ := v.list(o, p, "components")
		if len(kids) == 0 {
			v.add(at(p, "components"), "BASE_TYPE_MIN_LENGTH", "Must be 1 or more in length.")
		}
		for i, k := range kids {
			kp := at(p, "components", i)
			ko, ok := v.object(kp, k)
			if !ok {
				continue
			}
			t := typeOf(ko)
			if !v2TopLevel[t] || t == componentContainer {
				v.add(kp, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (1, 9, 10, 12, 13, 14).`)
				continue
			}
			v.componentV2(kp, ko)
		}
	}
}

// media checks an unfurled media item field ({"url": …}) and returns its URL.
func (v *validator) media(p []any, o map[string]any, key string) string {
	mp := at(p, key)
	raw, ok := o[key]
	if !ok || raw == nil {
		v.add(mp, "BASE_TYPE_REQUIRED", "This field is required")
		return ""
	}
	mo, ok := v.object(mp, raw)
	if !ok {
		return ""
	}
	u, _ := v.str(mo, mp, "url", 2048, true)
	return u
}

// actionRow validates an action row of a message: 1–5 buttons or exactly
// one select menu.
func (v *validator) actionRow(p []any, o map[string]any) {
	v.count++
	kids, _ := v.list(o, p, "components")
	if len(kids) < 1 || len(kids) > MaxRowButtons {
		v.add(at(p, "components"), "BASE_TYPE_BAD_LENGTH", lengthBetween(1, MaxRowButtons))
	}
	selects := 0
	for i, k := range kids {
		kp := at(p, "components", i)
		ko, ok := v.object(kp, k)
		if !ok {
			continue
		}
		v.count++
		switch t := typeOf(ko); {
		case t == componentButton:
			v.button(kp, ko)
		case isSelect(t):
			selects++
			v.selectMenu(kp, ko, t)
		default:
			v.add(kp, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (2, 3, 5, 6, 7, 8).`)
		}
	}
	if selects > 0 && len(kids) > 1 {
		v.add(at(p, "components"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width")
	}
}

func (v *validator) customID(p []any, o map[string]any, required bool) {
	id, ok := v.str(o, p, "custom_id", MaxCustomIDChars, required)
	if !ok || id == "" {
		return
	}
	if v.customIDs[id] {
		v.add(at(p, "custom_id"), "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
	}
	v.customIDs[id] = true
}

func (v *validator) button(p []any, o map[string]any) {
	style, ok := v.integer(o, p, "style", 1, 6)
	if !ok {
		v.add(at(p, "style"), "BASE_TYPE_REQUIRED", "This field is required")
	}
	v.str(o, p, "label", MaxButtonLabelChars, false)
	cid, _ := o["custom_id"].(string)
	url, _ := o["url"].(string)
	switch style {
	case 5: // link
		if cid != "" {
			v.add(at(p, "custom_id"), "BUTTON_COMPONENT_CUSTOM_ID_NOT_ALLOWED", "A link button cannot have a custom_id")
		}
		if u, _ := v.str(o, p, "url", MaxURLChars, true); u != "" && !validButtonURL(u) {
			v.add(at(p, "url"), "URL_TYPE_INVALID_URL", "Not a well formed URL.")
		}
	case 6: // premium
		if cid != "" || url != "" {
			v.add(p, "BUTTON_COMPONENT_INVALID_PREMIUM_FIELDS", "A premium button cannot have a custom_id, url or label")
		}
		v.str(o, p, "sku_id", 0, true)
	default:
		if url != "" {
			v.add(at(p, "url"), "BUTTON_COMPONENT_URL_NOT_ALLOWED", "Only link buttons can have a url")
		}
		v.customID(p, o, true)
	}
}

var buttonURL = regexp.MustCompile(`^(https?|discord)://\S+$`)

func validButtonURL(u string) bool { return buttonURL.MatchString(u) }

func (v *validator) selectMenu(p []any, o map[string]any, typ int) {
	v.customID(p, o, true)
	v.str(o, p, "placeholder", MaxPlaceholderChars, false)
	minV, hasMin := v.integer(o, p, "min_values", 0, MaxSelectValues)
	maxV, hasMax := v.integer(o, p, "max_values", 1, MaxSelectValues)
	if !hasMin {
		minV = 1
	}
	if !hasMax {
		maxV = 1
	}
	if hasMin && hasMax && minV > maxV {
		v.add(at(p, "min_values"), "SELECT_COMPONENT_MIN_GREATER_THAN_MAX", "min_values must be less than or equal to max_values")
	}
	if typ != componentStringSelect {
		return
	}
	opts, _ := v.list(o, p, "options")
	if len(opts) < 1 || len(opts) > MaxSelectOptions {
		v.add(at(p, "options"), "BASE_TYPE_BAD_LENGTH", lengthBetween(1, MaxSelectOptions))
	} else if hasMax && maxV > int64(len(opts)) {
		v.add(at(p, "max_values"), "SELECT_COMPONENT_MAX_VALUES_EXCEEDS_OPTIONS", fmt.Sprintf("max_values must be %d or fewer (the number of options).", len(opts)))
	}
	seen := map[string]bool{}
	for i, op := range opts {
		opp := at(p, "options", i)
		oo, ok := v.object(opp, op)
		if !ok {
			continue
		}
		v.str(oo, opp, "label", MaxOptionLabelChars, true)
		val, _ := v.str(oo, opp, "value", MaxOptionValueChars, true)
		v.str(oo, opp, "description", MaxOptionDescriptionChars, false)
		if val != "" && seen[val] {
			v.add(at(opp, "value"), "SELECT_COMPONENT_OPTION_VALUE_DUPLICATED", "Select component option values must be unique")
		}
		seen[val] = true
	}
}

// modal validates the data of a MODAL callback.
func (v *validator) modal(p []any, raw any) {
	o, ok := v.object(p, raw)
	if !ok {
		return
	}
	v.str(o, p, "title", MaxModalTitleChars, true)
	v.str(o, p, "custom_id", MaxCustomIDChars, true)
	comps, _ := v.list(o, p, "components")
	if len(comps) < 1 || len(comps) > MaxModalComponents {
		v.add(at(p, "components"), "BASE_TYPE_BAD_LENGTH", lengthBetween(1, MaxModalComponents))
	}
	for i, c := range comps {
		cp := at(p, "components", i)
		co, ok := v.object(cp, c)
		if !ok {
			continue
		}
		switch typeOf(co) {
		case componentActionRow:
			kids, _ := v.list(co, cp, "components")
			if len(kids) != 1 {
				v.add(at(cp, "components"), "BASE_TYPE_BAD_LENGTH", lengthBetween(1, 1))
			}
			for j, k := range kids {
				kp := at(cp, "components", j)
				ko, ok := v.object(kp, k)
				if !ok {
					continue
				}
				if typeOf(ko) != componentTextInput {
					v.add(kp, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (4,).`)
					continue
				}
				v.textInput(kp, ko, true)
			}
		case componentLabel:
			v.str(co, cp, "label", MaxTextInputLabelChars, true)
			v.str(co, cp, "description", MaxLabelDescriptionChars, false)
			kp := at(cp, "component")
			ko, ok := co["component"].(map[string]any)
			if !ok {
				v.add(kp, "BASE_TYPE_REQUIRED", "This field is required")
				continue
			}
			switch t := typeOf(ko); {
			case t == componentTextInput:
				v.textInput(kp, ko, false)
			case isSelect(t):
				v.selectMenu(kp, ko, t)
			case t == componentFileUpload:
				v.customID(kp, ko, true)
				v.integer(ko, kp, "min_values", 0, 10)
				v.integer(ko, kp, "max_values", 1, 10)
			default:
				v.add(kp, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (3, 4, 5, 6, 7, 8, 19).`)
			}
		case componentTextDisplay:
			v.str(co, cp, "content", 0, true)
		default:
			v.add(cp, "UNION_TYPE_CHOICES", `Value of field "type" must be one of (1, 10, 18).`)
		}
	}
}

func (v *validator) textInput(p []any, o map[string]any, labelRequired bool) {
	v.customID(p, o, true)
	if _, ok := v.integer(o, p, "style", 1, 2); !ok {
		v.add(at(p, "style"), "BASE_TYPE_REQUIRED", "This field is required")
	}
	v.str(o, p, "label", MaxTextInputLabelChars, labelRequired)
	v.str(o, p, "value", MaxTextInputValueChars, false)
	v.str(o, p, "placeholder", MaxTextInputPlaceholder, false)
	minL, hasMin := v.integer(o, p, "min_length", 0, MaxTextInputValueChars)
	maxL, hasMax := v.integer(o, p, "max_length", 1, MaxTextInputValueChars)
	if hasMin && hasMax && minL > maxL {
		v.add(at(p, "min_length"), "TEXT_INPUT_MIN_GREATER_THAN_MAX", "min_length must be less than or equal to max_length")
	}
}

// --- application commands ---

var commandName = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

// validateCommands checks a bulk overwrite body: at most 100 commands (per
// type), names 1–32 characters (lowercase for chat input commands),
// descriptions 1–100 for chat input commands, names unique per type; per
// level of options ≤25 options with unique names, required ones first,
// subcommands not mixed with other options; ≤25 choices of 1–100
// characters, only on string, integer and number options, of that type;
// min_value and max_value only on numbers, in order; and at most 8,000
// characters of names, descriptions and choices in one command.
func validateCommands(raw json.RawMessage) *Error {
	v := newValidator(nil)
	list, ok := decode(raw).([]any)
	if !ok {
		v.add(nil, "BASE_TYPE_LIST", "Could not interpret the value as a list.")
		return v.err()
	}
	if len(list) > 100 {
		v.add(nil, "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
	}
	seen := map[string]bool{}
	for i, c := range list {
		p := []any{i}
		o, ok := v.object(p, c)
		if !ok {
			continue
		}
		typ := int64(1)
		if t, ok := v.integer(o, p, "type", 1, 4); ok {
			typ = t
		}
		name, _ := v.str(o, p, "name", 32, true)
		if name != "" {
			if typ == 1 && (!commandName.MatchString(name) || strings.ToLower(name) != name) {
				v.add(at(p, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
			}
			key := strconv.FormatInt(typ, 10) + "/" + name
			if seen[key] {
				v.add(at(p, "name"), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
			}
			seen[key] = true
		}
		if typ == 1 {
			v.str(o, p, "description", 100, true)
		}
		v.commandOptions(p, o, 0)
		if n := commandChars(o); n > 8000 {
			v.add(p, "APPLICATION_COMMAND_TOO_LARGE", fmt.Sprintf("Command exceeds maximum size (8000), %d characters", n))
		}
	}
	return v.err()
}

// commandChars counts what Discord counts against a command's 8,000
// characters: names, descriptions and choices' names and values, at
// every level.
func commandChars(o map[string]any) int {
	n := 0
	for _, k := range []string{"name", "description"} {
		if s, ok := o[k].(string); ok {
			n += chars(s)
		}
	}
	if choices, ok := o["choices"].([]any); ok {
		for _, c := range choices {
			if co, ok := c.(map[string]any); ok {
				if s, ok := co["name"].(string); ok {
					n += chars(s)
				}
				n += chars(fmt.Sprint(co["value"]))
			}
		}
	}
	if opts, ok := o["options"].([]any); ok {
		for _, op := range opts {
			if oo, ok := op.(map[string]any); ok {
				n += commandChars(oo)
			}
		}
	}
	return n
}

func (v *validator) commandOptions(p []any, o map[string]any, depth int) {
	opts, _ := v.list(o, p, "options")
	if len(opts) > 25 {
		v.add(at(p, "options"), "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	names := map[string]bool{}
	subs, others, optional := 0, 0, false
	for i, op := range opts {
		opp := at(p, "options", i)
		oo, ok := v.object(opp, op)
		if !ok {
			continue
		}
		t, ok := v.integer(oo, opp, "type", 1, 11)
		if !ok {
			v.add(at(opp, "type"), "BASE_TYPE_REQUIRED", "This field is required")
		}
		name, _ := v.str(oo, opp, "name", 32, true)
		if name != "" && (!commandName.MatchString(name) || strings.ToLower(name) != name) {
			v.add(at(opp, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
		}
		if names[name] && name != "" {
			v.add(at(opp, "name"), "APPLICATION_COMMAND_OPTIONS_DUPLICATE_NAME", "Option names must be unique")
		}
		names[name] = true
		v.str(oo, opp, "description", 100, true)
		if t == 1 || t == 2 {
			subs++
		} else {
			others++
			required, _ := oo["required"].(bool)
			if required && optional {
				v.add(at(opp, "required"), "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options")
			}
			optional = optional || !required
		}
		v.choices(opp, oo, t)
		_, hasMin := oo["min_value"]
		_, hasMax := oo["max_value"]
		if (hasMin || hasMax) && t != 4 && t != 10 {
			v.add(at(opp, "min_value"), "APPLICATION_COMMAND_OPTION_INVALID", "min_value and max_value are for integer and number options")
		}
		if lo, ok := oo["min_value"].(json.Number); ok {
			if hi, ok := oo["max_value"].(json.Number); ok {
				l, _ := lo.Float64()
				h, _ := hi.Float64()
				if l > h {
					v.add(at(opp, "min_value"), "APPLICATION_COMMAND_OPTION_INVALID", "min_value must be less than or equal to max_value")
				}
			}
		}
		if (t == 1 || t == 2) && depth < 2 {
			v.commandOptions(opp, oo, depth+1)
		}
	}
	if subs > 0 && others > 0 {
		v.add(at(p, "options"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command and sub-command group option types are mutually exclusive to all other types")
	}
}

// choices checks an option's choices: at most 25, for string, integer
// and number options only, each named 1–100 characters with a value of
// the option's type (a string of at most 100 characters).
func (v *validator) choices(p []any, o map[string]any, typ int64) {
	list, _ := v.list(o, p, "choices")
	if len(list) == 0 {
		return
	}
	if typ != 3 && typ != 4 && typ != 10 {
		v.add(at(p, "choices"), "APPLICATION_COMMAND_OPTION_INVALID", "Choices are for string, integer and number options")
		return
	}
	if len(list) > 25 {
		v.add(at(p, "choices"), "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	for i, c := range list {
		cp := at(p, "choices", i)
		co, ok := v.object(cp, c)
		if !ok {
			continue
		}
		v.str(co, cp, "name", 100, true)
		switch val := co["value"].(type) {
		case string:
			if typ != 3 {
				v.add(at(cp, "value"), "BASE_TYPE_NUMBER", "Value must be a number.")
			} else if chars(val) > 100 {
				v.add(at(cp, "value"), "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
			}
		case json.Number:
			if typ == 3 {
				v.add(at(cp, "value"), "BASE_TYPE_STRING", "Value must be a string.")
			}
		default:
			v.add(at(cp, "value"), "BASE_TYPE_REQUIRED", "This field is required")
		}
	}
}
