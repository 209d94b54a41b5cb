package tools

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// PresentTool is the name of the tool that shows a card; its result is
// written for the model ("shown to the user …", "do not assume their
// choice"), so channels show the card, not the call or its result
// (ShownAsCard).
const PresentTool = "present"

// ShownAsCard reports whether a tool's output is the card it shows people
// (present's): a channel that shows the tool calls of a conversation
// shows neither such a call nor its result, the card says it all. No
// tool's result is for people in any case: it is written for the model
// (summarize's instructions, a denial's or an error's wording), so a
// channel shows at most that a tool was used, never what it returned.
//
// The plan tool's output is the plan (PlanTool), shown the same way; a
// handoff's (HandoffTool) is the line "Passed to …" its event shows.
func ShownAsCard(name string) bool {
	return name == PresentTool || name == PlanTool || name == HandoffTool
}

// HandoffTool is the name of the built-in tool that passes a
// conversation to another guide (sessions/handoff.go).
const HandoffTool = "handoff"

// Action kinds, as they appear in action ids.
const (
	ActionButton = "button"
	ActionSelect = "select"
	ActionForm   = "form"
)

// presentSchema mirrors switchboard.UI without the ids, which the gateway
// assigns. The limits are the tightest of the channels that render it
// (Slack's 75-character labels, Discord's 25 select options). "At least one
// part" is minProperties rather than anyOf, because OpenAI and Anthropic
// refuse anyOf at the top of a tool's schema; every property has its own
// lower bound, so minProperties cannot be met by an empty one.
const presentSchema = `{
	"type": "object",
	"properties": {
		"title": {"type": "string", "minLength": 1, "maxLength": 150},
		"text": {"type": "string", "minLength": 1, "maxLength": 3000, "description": "Markdown"},
		"fields": {
			"type": "array", "minItems": 1, "maxItems": 10,
			"items": {
				"type": "object",
				"properties": {
					"label": {"type": "string", "minLength": 1, "maxLength": 100},
					"value": {"type": "string", "maxLength": 1000}
				},
				"required": ["label", "value"],
				"additionalProperties": false
			}
		},
		"image": {
			"type": "object",
			"properties": {
				"url": {
					"type": "string",
					"pattern": "^(https?://|data:image/)[^ ]+$",
					"description": "http(s) URL, or a data:image/png;base64,… URL"
				},
				"alt": {"type": "string", "maxLength": 300}
			},
			"required": ["url"],
			"additionalProperties": false
		},
		"buttons": {
			"type": "array", "minItems": 1, "maxItems": 5,
			"items": {
				"type": "object",
				"properties": {
					"label": {"type": "string", "minLength": 1, "maxLength": 75},
					"value": {"type": "string", "maxLength": 1000},
					"style": {"type": "string", "enum": ["primary", "danger"]}
				},
				"required": ["label"],
				"additionalProperties": false
			}
		},
		"select": {
			"type": "object",
			"properties": {
				"placeholder": {"type": "string", "maxLength": 150},
				"options": {
					"type": "array", "minItems": 1, "maxItems": 25,
					"items": {
						"type": "object",
						"properties": {
							"label": {"type": "string", "minLength": 1, "maxLength": 75},
							"value": {"type": "string", "minLength": 1, "maxLength": 100}
						},
						"required": ["label", "value"],
						"additionalProperties": false
					}
				}
			},
			"required": ["options"],
			"additionalProperties": false
		},
		"form": {
			"type": "object",
			"properties": {
				"submit_label": {"type": "string", "minLength": 1, "maxLength": 75},
				"inputs": {
					"type": "array", "minItems": 1, "maxItems": 10,
					"items": {
						"type": "object",
						"properties": {
							"name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
							"label": {"type": "string", "minLength": 1, "maxLength": 45},
							"type": {"type": "string", "enum": ["text", "number", "email", "textarea"]},
							"required": {"type": "boolean"},
							"placeholder": {"type": "string", "maxLength": 100}
						},
						"required": ["name", "label"],
						"additionalProperties": false
					}
				}
			},
			"required": ["inputs"],
			"additionalProperties": false
		}
	},
	"minProperties": 1,
	"additionalProperties": false
}`

// presentArgs is what the model sends; it decodes straight into the UI
// types, whose JSON names are the same.
type presentArgs struct {
	Title  string                `json:"title"`
	Text   string                `json:"text"`
	Fields []switchboard.UIField `json:"fields"`
	Image  *struct {
		URL string `json:"url"`
		Alt string `json:"alt"`
	} `json:"image"`
	Buttons []switchboard.UIButton `json:"buttons"`
	Select  *switchboard.UISelect  `json:"select"`
	Form    *switchboard.UIForm    `json:"form"`
}

func present() Tool {
	return Tool{
		Name: PresentTool,
		Description: "Shows the user a card: a title, Markdown text, label/value fields, an image, up to 5 buttons, " +
			"a select of up to 25 options, or a small form of up to 10 inputs, rendered natively in their chat app. " +
			"Use it to offer choices or collect details. The user's click or submission arrives as their next message; " +
			"after calling it, stop and wait for that message.",
		Parameters: json.RawMessage(presentSchema),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var in presentArgs
			if err := json.Unmarshal(args, &in); err != nil {
				return Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			ui, err := buildUI(in, newUIID())
			if err != nil {
				return Result{}, err
			}
			return Result{Content: summarize(ui), UI: &ui}, nil
		},
	}
}

// newUIID returns "ui_" and 12 random hex digits: unguessable enough that
// a click cannot be forged for a card the clicker never saw.
func newUIID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return "ui_" + hex.EncodeToString(b[:])
}

// buildUI checks what the schema cannot express and assigns action ids.
func buildUI(in presentArgs, id string) (switchboard.UI, error) {
	ui := switchboard.UI{ID: id, Title: in.Title, Text: in.Text, Fields: in.Fields}
	if in.Image != nil {
		img, err := image(in.Image.URL, in.Image.Alt)
		if err != nil {
			return switchboard.UI{}, err
		}
		ui.Image = img
	}
	for i, b := range in.Buttons {
		b.ActionID = fmt.Sprintf("%s:%s:%d", id, ActionButton, i)
		ui.Buttons = append(ui.Buttons, b)
	}
	if in.Select != nil {
		seen := map[string]bool{}
		for _, o := range in.Select.Options {
			if seen[o.Value] {
				return switchboard.UI{}, fmt.Errorf("select: two options have the value %q; values must differ", o.Value)
			}
			seen[o.Value] = true
		}
		sel := *in.Select
		sel.ActionID = id + ":" + ActionSelect
		ui.Select = &sel
	}
	if in.Form != nil {
		form := *in.Form
		form.ActionID = id + ":" + ActionForm
		form.Inputs = make([]switchboard.UIFormInput, len(in.Form.Inputs))
		seen := map[string]bool{}
		for i, f := range in.Form.Inputs {
			if seen[f.Name] {
				return switchboard.UI{}, fmt.Errorf("form: two inputs are named %q; names must differ", f.Name)
			}
			seen[f.Name] = true
			if f.Type == "" {
				f.Type = "text"
			}
			form.Inputs[i] = f
		}
		ui.Form = &form
	}
	return ui, nil
}

// image accepts an http(s) URL as is and turns a data: URL into inline
// data, which is how switchboard.UIImage carries it. Only base64 raster
// images are taken: SVG can carry script.
func image(u, alt string) (*switchboard.UIImage, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		if p, err := url.Parse(u); err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https") {
			return nil, fmt.Errorf("image.url: %q is not an http(s) URL", u)
		}
		return &switchboard.UIImage{URL: u, Alt: alt}, nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		ok = false
	}
	if !ok || !isBase64 {
		return nil, errors.New("image.url: a data URL must look like data:image/png;base64,… (png, jpeg, gif or webp)")
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return nil, fmt.Errorf("image.url: the data is not valid base64: %w", err)
	}
	return &switchboard.UIImage{Data: data, MIMEType: mime, Alt: alt}, nil
}

// summarize tells the model what the user now sees and what comes next.
// It is an instruction to the model, never shown to the user (see
// ShownAsCard).
func summarize(ui switchboard.UI) string {
	var parts []string
	if ui.Text != "" {
		parts = append(parts, "text")
	}
	if n := len(ui.Fields); n > 0 {
		parts = append(parts, plural(n, "field"))
	}
	if ui.Image != nil {
		parts = append(parts, "an image")
	}
	if len(ui.Buttons) > 0 {
		labels := make([]string, len(ui.Buttons))
		for i, b := range ui.Buttons {
			labels[i] = strconv.Quote(b.Label)
		}
		parts = append(parts, "buttons "+strings.Join(labels, ", "))
	}
	if ui.Select != nil {
		parts = append(parts, "a select of "+plural(len(ui.Select.Options), "option"))
	}
	if ui.Form != nil {
		labels := make([]string, len(ui.Form.Inputs))
		for i, f := range ui.Form.Inputs {
			labels[i] = strconv.Quote(f.Label)
		}
		parts = append(parts, "a form asking for "+strings.Join(labels, ", "))
	}
	var sb strings.Builder
	sb.WriteString("Shown to the user: a card")
	if ui.Title != "" {
		fmt.Fprintf(&sb, " %q", ui.Title)
	}
	if len(parts) > 0 {
		sb.WriteString(" with " + strings.Join(parts, ", "))
	}
	sb.WriteString(".")
	if len(ui.Buttons) > 0 || ui.Select != nil || ui.Form != nil {
		sb.WriteString(" The user's click or submission will arrive as their next message; do not assume their choice, wait for it.")
	}
	return sb.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ParseActionID splits an action id made by present: "<uiID>:button:<i>",
// "<uiID>:select" or "<uiID>:form". index is 0 for a select or form.
func ParseActionID(actionID string) (uiID, kind string, index int, err error) {
	parts := strings.Split(actionID, ":")
	bad := fmt.Errorf("tools: malformed action id %q", actionID)
	if len(parts) < 2 || parts[0] == "" {
		return "", "", 0, bad
	}
	switch kind = parts[1]; {
	case kind == ActionButton && len(parts) == 3:
		i, err := strconv.Atoi(parts[2])
		if err != nil || i < 0 || strconv.Itoa(i) != parts[2] {
			return "", "", 0, bad
		}
		return parts[0], kind, i, nil
	case (kind == ActionSelect || kind == ActionForm) && len(parts) == 2:
		return parts[0], kind, 0, nil
	}
	return "", "", 0, bad
}

// DescribeAction turns a click or submit on ui into the text the model
// receives as the user's message. value is the option's value for a
// select and the JSON object of the inputs for a form; a button's value is
// its own, so the one sent is ignored. Errors are worded for the user who
// acted.
func DescribeAction(ui switchboard.UI, actionID, value string) (string, error) {
	uiID, kind, index, err := ParseActionID(actionID)
	if err != nil {
		return "", err
	}
	if uiID != ui.ID {
		return "", fmt.Errorf("tools: action %q is not part of card %q", actionID, ui.ID)
	}
	switch kind {
	case ActionButton:
		if index >= len(ui.Buttons) || ui.Buttons[index].ActionID != actionID {
			return "", fmt.Errorf("tools: the card has no button %q", actionID)
		}
		return fmt.Sprintf("Clicked %q", ui.Buttons[index].Label) + onTitle(ui.Title), nil
	case ActionSelect:
		if ui.Select == nil || ui.Select.ActionID != actionID {
			return "", fmt.Errorf("tools: the card has no select %q", actionID)
		}
		for _, o := range ui.Select.Options {
			if o.Value == value {
				return fmt.Sprintf("Chose %q", o.Label) + inTitle(cmp.Or(ui.Title, ui.Select.Placeholder)), nil
			}
		}
		return "", fmt.Errorf("%q is not one of the options", value)
	default: // ActionForm
		if ui.Form == nil || ui.Form.ActionID != actionID {
			return "", fmt.Errorf("tools: the card has no form %q", actionID)
		}
		values, err := formValues(*ui.Form, value)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(values) // keys sorted: stable for the model and tests
		if err != nil {
			return "", fmt.Errorf("tools: encode form values: %w", err)
		}
		if ui.Title == "" {
			return "Submitted the form: " + string(b), nil
		}
		return fmt.Sprintf("Submitted %q: %s", ui.Title, b), nil
	}
}

func onTitle(title string) string {
	if title == "" {
		return ""
	}
	return fmt.Sprintf(" on %q", title)
}

func inTitle(title string) string {
	if title == "" {
		return ""
	}
	return fmt.Sprintf(" in %q", title)
}

// formValues checks a submitted form: a JSON object whose keys are the
// form's input names, every required input filled in, numbers that parse.
// Values arrive as strings, but a client may send numbers or booleans.
func formValues(form switchboard.UIForm, value string) (map[string]string, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, errors.New("the form's values must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the form's values must be one JSON object")
	}
	inputs := make(map[string]switchboard.UIFormInput, len(form.Inputs))
	for _, f := range form.Inputs {
		inputs[f.Name] = f
	}
	values := make(map[string]string, len(raw))
	for k, v := range raw {
		f, ok := inputs[k]
		if !ok {
			return nil, fmt.Errorf("the form has no field %q", k)
		}
		s, err := scalar(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Label, err)
		}
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case f.Type == "number":
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("field %q must be a number", f.Label)
			}
		case f.Type == "email":
			if at := strings.Index(s, "@"); at < 1 || at == len(s)-1 {
				return nil, fmt.Errorf("field %q must be an email address", f.Label)
			}
		}
		values[k] = s
	}
	for _, f := range form.Inputs {
		if f.Required && values[f.Name] == "" {
			return nil, fmt.Errorf("field %q is required", f.Label)
		}
	}
	return values, nil
}

// scalar reads a JSON string, number or boolean as text.
func scalar(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	}
	switch {
	case bytes.Equal(v, []byte("true")), bytes.Equal(v, []byte("false")):
		return string(v), nil
	case bytes.Equal(v, []byte("null")):
		return "", nil
	case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
		return string(v), nil
	}
	return "", errors.New("must be text")
}
