package tools

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

func runPresent(t *testing.T, args string) (Result, error) {
	t.Helper()
	r, err := NewRegistry(Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	return r.Run(context.Background(), "present", json.RawMessage(args))
}

const fullCard = `{
	"title": "Order #123",
	"text": "Ready to **ship**.",
	"fields": [{"label": "Total", "value": "€42"}],
	"image": {"url": "https://example.com/p.png", "alt": "product"},
	"buttons": [
		{"label": "Confirm order", "value": "confirm", "style": "primary"},
		{"label": "Cancel", "style": "danger"}
	],
	"select": {"placeholder": "Shipping", "options": [
		{"label": "Standard", "value": "std"}, {"label": "Express", "value": "exp"}
	]},
	"form": {"submit_label": "Send", "inputs": [
		{"name": "name", "label": "Name", "required": true},
		{"name": "email", "label": "Email", "type": "email", "required": true},
		{"name": "qty", "label": "Quantity", "type": "number"}
	]}
}`

func TestPresentBuildsUI(t *testing.T) {
	res, err := runPresent(t, fullCard)
	if err != nil {
		t.Fatal(err)
	}
	ui := res.UI
	if ui == nil {
		t.Fatal("no UI")
	}
	if !regexp.MustCompile(`^ui_[0-9a-f]{12}$`).MatchString(ui.ID) {
		t.Fatalf("UI id %q is not ui_<12 hex>", ui.ID)
	}
	if ui.Title != "Order #123" || ui.Text != "Ready to **ship**." || len(ui.Fields) != 1 || ui.Fields[0].Value != "€42" {
		t.Fatalf("card content lost: %+v", ui)
	}
	if ui.Image == nil || ui.Image.URL != "https://example.com/p.png" || ui.Image.Alt != "product" {
		t.Fatalf("image = %+v", ui.Image)
	}
	if len(ui.Buttons) != 2 ||
		ui.Buttons[0].ActionID != ui.ID+":button:0" || ui.Buttons[0].Value != "confirm" || ui.Buttons[0].Style != "primary" ||
		ui.Buttons[1].ActionID != ui.ID+":button:1" {
		t.Fatalf("buttons = %+v", ui.Buttons)
	}
	if ui.Select == nil || ui.Select.ActionID != ui.ID+":select" || len(ui.Select.Options) != 2 {
		t.Fatalf("select = %+v", ui.Select)
	}
	if ui.Form == nil || ui.Form.ActionID != ui.ID+":form" || ui.Form.SubmitLabel != "Send" || len(ui.Form.Inputs) != 3 {
		t.Fatalf("form = %+v", ui.Form)
	}
	if got := ui.Form.Inputs[0].Type; got != "text" {
		t.Fatalf("input without type got type %q, want text", got)
	}
	for _, want := range []string{`"Order #123"`, `"Confirm order", "Cancel"`, "2 options", `"Email"`, "next message"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("Content %q does not mention %s", res.Content, want)
		}
	}
	for _, b := range ui.Buttons {
		if id, kind, _, err := ParseActionID(b.ActionID); err != nil || id != ui.ID || kind != ActionButton {
			t.Errorf("ParseActionID(%q) = %q, %q, %v", b.ActionID, id, kind, err)
		}
	}

	again, err := runPresent(t, fullCard)
	if err != nil {
		t.Fatal(err)
	}
	if again.UI.ID == ui.ID {
		t.Fatalf("two cards got the same id %s", ui.ID)
	}
}

func TestPresentTextOnly(t *testing.T) {
	res, err := runPresent(t, `{"text": "Done."}`)
	if err != nil {
		t.Fatal(err)
	}
	if res.UI.Buttons != nil || res.UI.Select != nil || res.UI.Form != nil {
		t.Fatalf("unexpected controls: %+v", res.UI)
	}
	if strings.Contains(res.Content, "next message") {
		t.Fatalf("a card without controls promises a reply: %q", res.Content)
	}
}

func TestPresentDataImage(t *testing.T) {
	res, err := runPresent(t, `{"image": {"url": "data:image/png;base64,iVBORw0KGgo=", "alt": "dot"}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := switchboard.UIImage{Data: "iVBORw0KGgo=", MIMEType: "image/png", Alt: "dot"}
	if res.UI.Image == nil || *res.UI.Image != want {
		t.Fatalf("image = %+v, want %+v", res.UI.Image, want)
	}
}

func TestPresentRejects(t *testing.T) {
	sixButtons := `{"buttons": [` + strings.Repeat(`{"label": "b"},`, 5) + `{"label": "b"}]}`
	options := make([]string, 26)
	for i := range options {
		options[i] = `{"label": "o", "value": "v` + strings.Repeat("x", i) + `"}`
	}
	tests := []struct {
		name, args, want string
		invalid          bool // rejected by the schema rather than by the tool
	}{
		{"nothing to show", `{}`, "at (root): is empty; set at least one property", true},
		{"empty title only", `{"title": ""}`, "at /title: minLength: got 0, want 1", true},
		{"empty fields only", `{"fields": []}`, "at /fields: minItems: got 0, want 1", true},
		{"six buttons", sixButtons, "at /buttons: maxItems: got 6, want 5", true},
		{"26 options", `{"select": {"options": [` + strings.Join(options, ",") + `]}}`, "at /select/options: maxItems: got 26, want 25", true},
		{"javascript image", `{"image": {"url": "javascript:alert(1)"}}`, "at /image/url: 'javascript:alert(1)' does not match pattern", true},
		{"unknown part", `{"title": "t", "video": "x"}`, "additional properties 'video' not allowed", true},
		{"ids are ours", `{"buttons": [{"label": "b", "action_id": "ui_x:form"}]}`, "at /buttons/0: additional properties 'action_id' not allowed", true},
		{"input type", `{"form": {"inputs": [{"name": "a", "label": "A", "type": "date"}]}}`, "at /form/inputs/0/type: value must be one of", true},
		{"input name", `{"form": {"inputs": [{"name": "a b", "label": "A"}]}}`, "at /form/inputs/0/name:", true},
		{"url with space", `{"image": {"url": "https://example.com/a b.png"}}`, "at /image/url:", true},
		{"url without host", `{"image": {"url": "https:///p.png"}}`, "is not an http(s) URL", false},
		{"svg data", `{"image": {"url": "data:image/svg+xml;base64,PHN2Zz4="}}`, "data URL must look like data:image/png;base64", false},
		{"data not base64", `{"image": {"url": "data:image/png;base64,%%%"}}`, "not valid base64", false},
		{"duplicate input", `{"form": {"inputs": [{"name": "a", "label": "A"}, {"name": "a", "label": "B"}]}}`, `two inputs are named "a"`, false},
		{"duplicate option", `{"select": {"options": [{"label": "A", "value": "x"}, {"label": "B", "value": "x"}]}}`, `two options have the value "x"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := runPresent(t, tt.args)
			if err == nil {
				t.Fatalf("accepted: %+v", res.UI)
			}
			if errors.Is(err, ErrInvalidArgs) != tt.invalid {
				t.Errorf("errors.Is(err, ErrInvalidArgs) = %v, want %v", !tt.invalid, tt.invalid)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseActionID(t *testing.T) {
	valid := []struct {
		id, ui, kind string
		index        int
	}{
		{"ui_0123456789ab:button:0", "ui_0123456789ab", ActionButton, 0},
		{"ui_0123456789ab:button:4", "ui_0123456789ab", ActionButton, 4},
		{"ui_0123456789ab:select", "ui_0123456789ab", ActionSelect, 0},
		{"ui_0123456789ab:form", "ui_0123456789ab", ActionForm, 0},
	}
	for _, tt := range valid {
		ui, kind, index, err := ParseActionID(tt.id)
		if err != nil || ui != tt.ui || kind != tt.kind || index != tt.index {
			t.Errorf("ParseActionID(%q) = %q, %q, %d, %v", tt.id, ui, kind, index, err)
		}
	}
	for _, id := range []string{
		"", "ui_x", ":select", "ui_x:button", "ui_x:button:-1", "ui_x:button:01", "ui_x:button:+1",
		"ui_x:button:a", "ui_x:select:1", "ui_x:form:0", "ui_x:link", "ui_x:button:1:2",
	} {
		if _, _, _, err := ParseActionID(id); err == nil {
			t.Errorf("ParseActionID(%q) accepted a malformed id", id)
		}
	}
}

func TestDescribeAction(t *testing.T) {
	res, err := runPresent(t, `{
		"title": "Order #123",
		"buttons": [{"label": "Confirm order", "value": "confirm"}, {"label": "Cancel"}]
	}`)
	if err != nil {
		t.Fatal(err)
	}
	order := *res.UI
	res, err = runPresent(t, `{"title": "Shipping", "select": {"options": [{"label": "Standard", "value": "std"}, {"label": "Express", "value": "exp"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	shipping := *res.UI
	res, err = runPresent(t, `{"title": "Contact", "form": {"inputs": [
		{"name": "name", "label": "Name", "required": true},
		{"name": "email", "label": "Email", "type": "email", "required": true},
		{"name": "age", "label": "Age", "type": "number"}
	]}}`)
	if err != nil {
		t.Fatal(err)
	}
	contact := *res.UI
	untitled := order
	untitled.Title = ""

	tests := []struct {
		name      string
		ui        switchboard.UI
		action    string
		value     string
		want      string // text, or the error's text when wantErr
		wantError bool
	}{
		{"button", order, order.ID + ":button:0", "", `Clicked "Confirm order" on "Order #123"`, false},
		{"button ignores value sent", order, order.ID + ":button:1", "confirm", `Clicked "Cancel" on "Order #123"`, false},
		{"button without title", untitled, order.ID + ":button:0", "", `Clicked "Confirm order"`, false},
		{"select", shipping, shipping.ID + ":select", "exp", `Chose "Express" in "Shipping"`, false},
		{"form", contact, contact.ID + ":form", `{"name": "Ann", "email": "a@b.c"}`, `Submitted "Contact": {"email":"a@b.c","name":"Ann"}`, false},
		{"form number", contact, contact.ID + ":form", `{"name": "Ann", "email": "a@b.c", "age": 42}`, `Submitted "Contact": {"age":"42","email":"a@b.c","name":"Ann"}`, false},

		{"button out of range", order, order.ID + ":button:2", "", "no button", true},
		{"other card", order, shipping.ID + ":select", "exp", "is not part of card", true},
		{"no select on card", order, order.ID + ":select", "exp", "no select", true},
		{"malformed", order, "nonsense", "", "malformed action id", true},
		{"option not offered", shipping, shipping.ID + ":select", "teleport", `"teleport" is not one of the options`, true},
		{"form not JSON", contact, contact.ID + ":form", `name=Ann`, "must be a JSON object", true},
		{"form array", contact, contact.ID + ":form", `["Ann"]`, "must be a JSON object", true},
		{"form null", contact, contact.ID + ":form", `null`, "must be a JSON object", true},
		{"form two objects", contact, contact.ID + ":form", `{"name": "Ann", "email": "a@b.c"} {}`, "one JSON object", true},
		{"form unknown key", contact, contact.ID + ":form", `{"name": "Ann", "email": "a@b.c", "admin": "yes"}`, `no field "admin"`, true},
		{"form missing required", contact, contact.ID + ":form", `{"name": "Ann"}`, `field "Email" is required`, true},
		{"form blank required", contact, contact.ID + ":form", `{"name": "  ", "email": "a@b.c"}`, `field "Name" is required`, true},
		{"form bad number", contact, contact.ID + ":form", `{"name": "Ann", "email": "a@b.c", "age": "old"}`, `field "Age" must be a number`, true},
		{"form bad email", contact, contact.ID + ":form", `{"name": "Ann", "email": "ann"}`, `field "Email" must be an email address`, true},
		{"form nested value", contact, contact.ID + ":form", `{"name": {"first": "Ann"}, "email": "a@b.c"}`, `field "Name": must be text`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DescribeAction(tt.ui, tt.action, tt.value)
			if tt.wantError {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("DescribeAction = %q, %v; want an error containing %q", got, err, tt.want)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DescribeAction = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// present's card is its output: channels show neither its call nor its
// result, which is written for the model.
func TestShownAsCard(t *testing.T) {
	for _, name := range []string{PresentTool, PlanTool, HandoffTool} {
		if !ShownAsCard(name) {
			t.Errorf("%s is not shown by its own card, plan or line", name)
		}
	}
	for _, name := range []string{"current_time", "calculator", "", "presents"} {
		if ShownAsCard(name) {
			t.Errorf("%q is shown as a card", name)
		}
	}
	res, err := runPresent(t, `{"title":"Pick","buttons":[{"label":"A"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	// The result instructs the model: no channel may show it to people.
	if !strings.HasPrefix(res.Content, "Shown to the user") || !strings.Contains(res.Content, "do not assume their choice") {
		t.Errorf("present's result %q", res.Content)
	}
}
