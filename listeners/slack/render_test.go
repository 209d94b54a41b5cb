package slack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/places"
)

// limitChecker checks Block Kit JSON, parsed generically, against Slack's
// documented limits; checkBlockLimits and checkModalLimits also ask the fake
// Slack's validator (slacktest), which must agree.
type limitChecker struct {
	t         *testing.T
	blockIDs  map[string]bool
	actionIDs map[string]bool
}

func checkBlockLimits(t *testing.T, blocks []slackapi.Block) []any {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatalf("marshal blocks: %v", err)
	}
	// No blocks means a message of text alone, which slacktest does not
	// validate (a blocks argument must be an array).
	if err := slacktest.ValidateBlocks(raw); len(blocks) > 0 && err != nil {
		t.Errorf("slacktest.ValidateBlocks: %v", err)
	}
	var parsed []any
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatalf("unmarshal blocks: %v", err)
	}
	if len(parsed) > 50 {
		t.Errorf("%d blocks, at most 50", len(parsed))
	}
	c := &limitChecker{t: t, blockIDs: map[string]bool{}, actionIDs: map[string]bool{}}
	for i, b := range parsed {
		c.block(fmt.Sprintf("/blocks/%d", i), b)
	}
	return parsed
}

func checkModalLimits(t *testing.T, view slackapi.ModalViewRequest) map[string]any {
	t.Helper()
	raw, err := json.Marshal(view)
	if err != nil {
		t.Fatalf("marshal view: %v", err)
	}
	if err := slacktest.ValidateView(raw); err != nil {
		t.Errorf("slacktest.ValidateView: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("unmarshal view: %v", err)
	}
	c := &limitChecker{t: t, blockIDs: map[string]bool{}, actionIDs: map[string]bool{}}
	if v["type"] != "modal" {
		t.Errorf("view type %v", v["type"])
	}
	c.text("/title", v["title"], "plain_text", 24, true)
	c.text("/submit", v["submit"], "plain_text", 24, true)
	c.text("/close", v["close"], "plain_text", 24, false)
	if s, _ := v["private_metadata"].(string); utf8.RuneCountInString(s) > 3000 {
		t.Errorf("private_metadata has %d characters", utf8.RuneCountInString(s))
	}
	if s, _ := v["callback_id"].(string); len(s) > 255 {
		t.Errorf("callback_id has %d characters", len(s))
	}
	blocks, _ := v["blocks"].([]any)
	if len(blocks) > 100 {
		t.Errorf("%d blocks in a modal, at most 100", len(blocks))
	}
	for i, b := range blocks {
		c.block(fmt.Sprintf("/view/blocks/%d", i), b)
	}
	return v
}

func (c *limitChecker) errorf(ptr, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("%s: %s", ptr, fmt.Sprintf(format, args...))
}

// str checks a string field's length in characters.
func (c *limitChecker) str(ptr string, v any, maxChars int, required bool) string {
	c.t.Helper()
	s, ok := v.(string)
	if !ok {
		if required || v != nil {
			c.errorf(ptr, "missing or not a string: %v", v)
		}
		return ""
	}
	if required && s == "" {
		c.errorf(ptr, "empty")
	}
	if n := utf8.RuneCountInString(s); n > maxChars {
		c.errorf(ptr, "%d characters, at most %d", n, maxChars)
	}
	return s
}

// text checks a text object.
func (c *limitChecker) text(ptr string, v any, kind string, maxChars int, required bool) string {
	c.t.Helper()
	if v == nil {
		if required {
			c.errorf(ptr, "missing text object")
		}
		return ""
	}
	obj, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "not an object: %v", v)
		return ""
	}
	typ, _ := obj["type"].(string)
	switch {
	case kind != "" && typ != kind:
		c.errorf(ptr, "type %q, want %q", typ, kind)
	case typ != "plain_text" && typ != "mrkdwn":
		c.errorf(ptr, "type %q", typ)
	}
	if typ == "mrkdwn" && obj["emoji"] != nil {
		c.errorf(ptr, "emoji on mrkdwn")
	}
	s := c.str(ptr+"/text", obj["text"], min(maxChars, 3000), true)
	if strings.TrimSpace(s) == "" {
		c.errorf(ptr, "blank text")
	}
	if typ == "mrkdwn" {
		c.mrkdwn(ptr+"/text", s)
	}
	return s
}

// mrkdwn checks that text is escaped: every < opens a link, a mention or
// a date, every & an entity.
func (c *limitChecker) mrkdwn(ptr, s string) {
	c.t.Helper()
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			inner := ""
			if end > 0 {
				inner = s[i+1 : i+end]
			}
			if end < 0 || !(strings.HasPrefix(inner, "http://") || strings.HasPrefix(inner, "https://") ||
				strings.HasPrefix(inner, "mailto:") || strings.HasPrefix(inner, "@U") || strings.HasPrefix(inner, "!date^")) {
				c.errorf(ptr, "unescaped < at %d: %.40q", i, s[i:])
				return
			}
			i += end
		case '&':
			if rest := s[i:]; !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
				c.errorf(ptr, "unescaped & at %d: %.20q", i, rest)
			}
		}
	}
	if strings.Count(s, "```")%2 != 0 {
		c.errorf(ptr, "unbalanced code fences: %q", s)
	}
}

func (c *limitChecker) blockID(ptr string, b map[string]any) {
	c.t.Helper()
	id := c.str(ptr+"/block_id", b["block_id"], 255, false)
	if id == "" {
		return
	}
	if c.blockIDs[id] {
		c.errorf(ptr, "duplicate block_id %q", id)
	}
	c.blockIDs[id] = true
}

func (c *limitChecker) block(ptr string, v any) {
	c.t.Helper()
	b, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "block is not an object")
		return
	}
	c.blockID(ptr, b)
	switch typ := b["type"]; typ {
	case "section":
		text := b["text"]
		fields, _ := b["fields"].([]any)
		if text == nil && len(fields) == 0 {
			c.errorf(ptr, "section without text or fields")
		}
		c.text(ptr+"/text", text, "", 3000, false)
		if len(fields) > 10 {
			c.errorf(ptr, "%d fields, at most 10", len(fields))
		}
		for i, f := range fields {
			c.text(fmt.Sprintf("%s/fields/%d", ptr, i), f, "", 2000, true)
		}
	case "header":
		c.text(ptr+"/text", b["text"], "plain_text", 150, true)
	case "context":
		elements, _ := b["elements"].([]any)
		if len(elements) == 0 || len(elements) > 10 {
			c.errorf(ptr, "%d context elements, want 1–10", len(elements))
		}
		for i, e := range elements {
			c.text(fmt.Sprintf("%s/elements/%d", ptr, i), e, "", 3000, true)
		}
	case "actions":
		elements, _ := b["elements"].([]any)
		if len(elements) == 0 || len(elements) > 25 {
			c.errorf(ptr, "%d actions elements, want 1–25", len(elements))
		}
		for i, e := range elements {
			c.element(fmt.Sprintf("%s/elements/%d", ptr, i), e)
		}
	case "image":
		c.str(ptr+"/image_url", b["image_url"], 3000, true)
		c.str(ptr+"/alt_text", b["alt_text"], 2000, true)
	case "input":
		c.text(ptr+"/label", b["label"], "plain_text", 2000, true)
		c.element(ptr+"/element", b["element"])
	case "divider":
	default:
		c.errorf(ptr, "unexpected block type %v", typ)
	}
}

func (c *limitChecker) element(ptr string, v any) {
	c.t.Helper()
	e, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "element is not an object")
		return
	}
	id := c.str(ptr+"/action_id", e["action_id"], 255, true)
	if c.actionIDs[id] {
		c.errorf(ptr, "duplicate action_id %q", id)
	}
	c.actionIDs[id] = true
	switch typ := e["type"]; typ {
	case "button":
		c.text(ptr+"/text", e["text"], "plain_text", 75, true)
		c.str(ptr+"/value", e["value"], 2000, false)
		if s, ok := e["style"]; ok && s != "primary" && s != "danger" {
			c.errorf(ptr, "style %v", s)
		}
	case "static_select":
		c.text(ptr+"/placeholder", e["placeholder"], "plain_text", 150, false)
		opts, _ := e["options"].([]any)
		if len(opts) == 0 || len(opts) > 100 {
			c.errorf(ptr, "%d options, want 1–100", len(opts))
		}
		for i, o := range opts {
			o, _ := o.(map[string]any)
			op := fmt.Sprintf("%s/options/%d", ptr, i)
			c.text(op+"/text", o["text"], "plain_text", 75, true)
			c.str(op+"/value", o["value"], 150, true)
		}
	case "plain_text_input", "number_input", "email_text_input":
		c.text(ptr+"/placeholder", e["placeholder"], "plain_text", 150, false)
	default:
		c.errorf(ptr, "unexpected element type %v", typ)
	}
}

// refRecorder is a ref function that hands out short tokens and remembers
// what each stands for.
type refRecorder struct {
	calls []string
}

func (r *refRecorder) ref(kind, actionID, value string) string {
	r.calls = append(r.calls, kind+"|"+actionID+"|"+value)
	return fmt.Sprintf("t%d", len(r.calls))
}

func marshalString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsonAt digs into parsed JSON: jsonAt(v, "3", "elements", "0", "text").
func jsonAt(v any, keys ...string) any {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func TestUIBlocksSmallCard(t *testing.T) {
	ui := switchboard.UI{
		ID:    "ui_1",
		Title: "Order #42",
		Text:  "Pick **one** & confirm.",
		Fields: []switchboard.UIField{
			{Label: "Status", Value: "<pending>"},
			{Label: "Total", Value: "3 € & tax"},
		},
		Image: &switchboard.UIImage{URL: "https://img.example/a.png", Alt: "A box"},
		Buttons: []switchboard.UIButton{
			{ActionID: "ui_1:button:0", Label: "Ship it", Value: "ship", Style: "primary"},
			{ActionID: "ui_1:button:1", Label: "Cancel", Value: "cancel", Style: "secondary"},
		},
		Select: &switchboard.UISelect{ActionID: "ui_1:select", Placeholder: "Carrier", Options: []switchboard.UIOption{
			{Label: "DHL", Value: "dhl"}, {Label: "UPS", Value: "ups"},
		}},
		Form: &switchboard.UIForm{ActionID: "ui_1:form", SubmitLabel: "Add a note", Inputs: []switchboard.UIFormInput{{Name: "note", Label: "Note"}}},
	}
	r := &refRecorder{}
	text, blocks, upload := uiBlocks(ui, r.ref)
	if upload != nil {
		t.Errorf("upload = %+v, want none", upload)
	}
	if want := "Order #42\nPick one &amp; confirm.\nStatus: &lt;pending&gt;\nTotal: 3 € &amp; tax"; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	checkBlockLimits(t, blocks)
	want := `[` +
		`{"type":"header","text":{"type":"plain_text","text":"Order #42","emoji":true}},` +
		`{"type":"section","text":{"type":"mrkdwn","text":"Pick *one* \u0026amp; confirm.","verbatim":true}},` +
		`{"type":"section","fields":[{"type":"mrkdwn","text":"*Status*\n\u0026lt;pending\u0026gt;","verbatim":true},{"type":"mrkdwn","text":"*Total*\n3 € \u0026amp; tax","verbatim":true}]},` +
		`{"type":"image","image_url":"https://img.example/a.png","alt_text":"A box"},` +
		`{"type":"actions","elements":[` +
		`{"type":"button","text":{"type":"plain_text","text":"Ship it","emoji":true},"action_id":"sb_btn_0","value":"t1","style":"primary"},` +
		`{"type":"button","text":{"type":"plain_text","text":"Cancel","emoji":true},"action_id":"sb_btn_1","value":"t2"},` +
		`{"type":"button","text":{"type":"plain_text","text":"Add a note","emoji":true},"action_id":"sb_form_0","value":"t3"}]},` +
		`{"type":"actions","elements":[{"type":"static_select","placeholder":{"type":"plain_text","text":"Carrier","emoji":true},"action_id":"sb_sel_0","options":[` +
		`{"text":{"type":"plain_text","text":"DHL","emoji":true},"value":"t4"},` +
		`{"text":{"type":"plain_text","text":"UPS","emoji":true},"value":"t5"}]}]}]`
	if got := marshalString(t, blocks); got != want {
		t.Errorf("blocks\n got %s\nwant %s", got, want)
	}
	wantCalls := []string{"button|ui_1:button:0|ship", "button|ui_1:button:1|cancel", "form|ui_1:form|", "select|ui_1:select|dhl", "select|ui_1:select|ups"}
	if !slices.Equal(r.calls, wantCalls) {
		t.Errorf("ref calls %q, want %q", r.calls, wantCalls)
	}
}

func TestUIBlocksDataImage(t *testing.T) {
	for name, img := range map[string]switchboard.UIImage{
		"data":     {Data: "iVBORw0KGgo=", MIMEType: "image/png", Alt: "chart"},
		"data url": {URL: "data:image/png;base64,iVBORw0KGgo=", Alt: "chart"},
	} {
		t.Run(name, func(t *testing.T) {
			text, blocks, upload := uiBlocks(switchboard.UI{Image: &img}, (&refRecorder{}).ref)
			if upload == nil || upload.Data != "iVBORw0KGgo=" || upload.MIMEType != "image/png" || upload.Alt != "chart" {
				t.Errorf("upload = %+v", upload)
			}
			if len(blocks) != 0 {
				t.Errorf("blocks = %s, want none", marshalString(t, blocks))
			}
			if text != "Card" {
				t.Errorf("text = %q", text)
			}
		})
	}
	_, blocks, upload := uiBlocks(switchboard.UI{Image: &switchboard.UIImage{URL: "ftp://x/y.png"}}, (&refRecorder{}).ref)
	if upload != nil || len(blocks) != 1 || !strings.Contains(marshalString(t, blocks), "image not shown") {
		t.Errorf("ftp image: upload %v, blocks %s", upload, marshalString(t, blocks))
	}
}

// numberedWords is n words, w0 … w(n-1), with a paragraph break every 100.
func numberedWords(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%d", i)
		if i%100 == 99 {
			b.WriteString("\n\n")
		} else {
			b.WriteString(" ")
		}
	}
	return b.String()
}

func TestUIBlocksLimits(t *testing.T) {
	long := strings.Repeat("x", 100)
	var buttons []switchboard.UIButton
	for i := range 30 {
		buttons = append(buttons, switchboard.UIButton{ActionID: fmt.Sprintf("ui:button:%d", i), Label: fmt.Sprintf("%d %s", i, long), Value: strings.Repeat("v", 3000), Style: []string{"primary", "danger", "", "link"}[i%4]})
	}
	var options []switchboard.UIOption
	for i := range 120 {
		options = append(options, switchboard.UIOption{Label: fmt.Sprintf("%d %s", i, long), Value: fmt.Sprintf("%d%s", i, strings.Repeat("v", 300))})
	}
	var fields []switchboard.UIField
	for i := range 12 {
		fields = append(fields, switchboard.UIField{Label: fmt.Sprintf("Field %d", i), Value: strings.Repeat("value & more ", 300)})
	}
	title := strings.Repeat("T", 200)
	sel := &switchboard.UISelect{ActionID: "ui:select", Placeholder: strings.Repeat("P", 200), Options: options}
	form := &switchboard.UIForm{ActionID: "ui:form", SubmitLabel: strings.Repeat("S", 100)}
	img := &switchboard.UIImage{URL: "https://img.example/" + strings.Repeat("p", 100), Alt: strings.Repeat("a", 3000)}

	cards := map[string]switchboard.UI{
		"30 buttons":      {Buttons: buttons},
		"120 options":     {Select: sel},
		"10000 words":     {Text: numberedWords(10000)},
		"12 fields":       {Fields: fields},
		"200-char title":  {Title: title},
		"everything":      {Title: title, Text: numberedWords(10000), Fields: fields, Image: img, Buttons: buttons, Select: sel, Form: form},
		"1000 buttons":    {Buttons: slices.Repeat(buttons, 34)},
		"3000 options":    {Select: &switchboard.UISelect{ActionID: "s", Options: slices.Repeat(options, 25)}},
		"50000 words":     {Text: numberedWords(50000), Buttons: buttons},
		"markdown chaos":  {Text: strings.Repeat(mdSample+"\n\n", 60)},
		"empty labels":    {Buttons: []switchboard.UIButton{{ActionID: "b"}}, Select: &switchboard.UISelect{ActionID: "s", Options: []switchboard.UIOption{{}}}, Fields: []switchboard.UIField{{}, {Label: "only label"}}},
		"empty card":      {},
		"long image url":  {Image: &switchboard.UIImage{URL: "https://img.example/" + strings.Repeat("p", 3000)}},
		"title only ws":   {Title: " \n\t "},
		"1000 fields":     {Fields: slices.Repeat(fields, 84)},
		"code-heavy text": {Text: "```\n" + strings.Repeat("line of code <x> & y\n", 2000) + "```"},
	}
	for name, ui := range cards {
		t.Run(name, func(t *testing.T) {
			r := &refRecorder{}
			text, blocks, _ := uiBlocks(ui, r.ref)
			parsed := checkBlockLimits(t, blocks)
			if text == "" || utf8.RuneCountInString(text) > 3000 {
				t.Errorf("fallback text has %d characters", utf8.RuneCountInString(text))
			}
			// The model's ids reach Slack only through ref.
			js := marshalString(t, blocks)
			if strings.Contains(js, "ui:button") || strings.Contains(js, "ui:select") || strings.Contains(js, "ui:form") {
				t.Errorf("a model id reached the blocks")
			}
			_ = parsed
		})
	}

	t.Run("structure", func(t *testing.T) {
		r := &refRecorder{}
		_, blocks, _ := uiBlocks(cards["everything"], r.ref)
		parsed := checkBlockLimits(t, blocks)
		if h, _ := jsonAt(parsed, "0", "text", "text").(string); utf8.RuneCountInString(h) != 150 || !strings.HasSuffix(h, "…") {
			t.Errorf("header %q", h)
		}
		var actionIDs, placeholders []string
		var buttonCount, fieldSections int
		for _, b := range parsed {
			b := b.(map[string]any)
			switch b["type"] {
			case "actions":
				for _, e := range b["elements"].([]any) {
					e := e.(map[string]any)
					actionIDs = append(actionIDs, e["action_id"].(string))
					if e["type"] == "button" {
						buttonCount++
					}
					if p, ok := jsonAt(e, "placeholder", "text").(string); ok {
						placeholders = append(placeholders, p)
					}
				}
			case "section":
				if b["fields"] != nil {
					fieldSections++
				}
			}
		}
		if buttonCount != 31 || fieldSections != 2 {
			t.Errorf("%d buttons, %d field sections; want 31, 2", buttonCount, fieldSections)
		}
		if actionIDs[0] != "sb_btn_0" || actionIDs[29] != "sb_btn_29" || actionIDs[30] != "sb_form_0" || actionIDs[31] != "sb_sel_0" || actionIDs[32] != "sb_sel_1" || len(actionIDs) != 33 {
			t.Errorf("action ids %q", actionIDs)
		}
		if len(placeholders) != 2 || !strings.HasSuffix(placeholders[0], " (1–100)") || !strings.HasSuffix(placeholders[1], " (101–120)") ||
			utf8.RuneCountInString(placeholders[0]) != 150 {
			t.Errorf("placeholders %q", placeholders)
		}
		// 30 buttons, the form, 120 options.
		if len(r.calls) != 151 {
			t.Errorf("%d ref calls, want 151", len(r.calls))
		}
		if r.calls[0] != "button|ui:button:0|"+strings.Repeat("v", 3000) || r.calls[31] != "select|ui:select|0"+strings.Repeat("v", 300) {
			t.Errorf("ref calls %.60q %.60q", r.calls[0], r.calls[31])
		}
	})

	t.Run("no text lost", func(t *testing.T) {
		_, blocks, _ := uiBlocks(switchboard.UI{Text: numberedWords(10000), Buttons: buttons}, (&refRecorder{}).ref)
		var b strings.Builder
		sections := 0
		for _, p := range checkBlockLimits(t, blocks) {
			if s, ok := jsonAt(p, "text", "text").(string); ok && jsonAt(p, "type") == "section" {
				b.WriteString(s + " ")
				sections++
			}
		}
		all := " " + strings.Join(strings.Fields(b.String()), " ") + " "
		for i := range 10000 {
			if !strings.Contains(all, fmt.Sprintf(" w%d ", i)) {
				t.Fatalf("word w%d lost (%d sections)", i, sections)
			}
		}
		if sections < 20 {
			t.Errorf("%d sections for 10,000 words", sections)
		}
	})

	t.Run("cut text says so", func(t *testing.T) {
		_, blocks, _ := uiBlocks(switchboard.UI{Text: numberedWords(50000)}, (&refRecorder{}).ref)
		parsed := checkBlockLimits(t, blocks)
		if len(parsed) != 50 {
			t.Errorf("%d blocks, want 50", len(parsed))
		}
		last, _ := jsonAt(parsed, "49", "text", "text").(string)
		if !strings.HasSuffix(last, "_(text cut: too long for one message)_") {
			t.Errorf("last section ends %q", last[max(0, len(last)-60):])
		}
	})
}

func TestApprovalBlocks(t *testing.T) {
	req := switchboard.ConfirmationRequestData{
		ConfirmationID:  "conf_1",
		ToolCallID:      "call_1",
		ToolName:        "run_shell",
		Args:            json.RawMessage(`{"cmd":"ls <dir> && rm -rf /tmp/x"}`),
		SecurityWarning: "Runs a command on the host.",
		ExpiresAt:       time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	text, blocks := approvalBlocks(req, "Run a shell command")
	checkBlockLimits(t, blocks)
	want := `[` +
		`{"type":"section","text":{"type":"mrkdwn","text":"*Approve ` + "`run_shell`" + `?*\nRun a shell command","verbatim":true}},` +
		`{"type":"section","text":{"type":"mrkdwn","text":"` + "```" + `\n{\n  \"cmd\": \"ls \u0026lt;dir\u0026gt; \u0026amp;\u0026amp; rm -rf /tmp/x\"\n}\n` + "```" + `","verbatim":true}},` +
		`{"type":"section","text":{"type":"mrkdwn","text":"⚠ *Security warning:* Runs a command on the host.","verbatim":true}},` +
		`{"type":"actions","block_id":"sb_confirm:conf_1","elements":[` +
		`{"type":"button","text":{"type":"plain_text","text":"Approve","emoji":true},"action_id":"sb_approve","value":"conf_1","style":"primary"},` +
		`{"type":"button","text":{"type":"plain_text","text":"Deny","emoji":true},"action_id":"sb_deny","value":"conf_1","style":"danger"},` +
		`{"type":"button","text":{"type":"plain_text","text":"Always allow","emoji":true},"action_id":"sb_always","value":"conf_1"}]}]`
	if got := marshalString(t, blocks); got != want {
		t.Errorf("blocks\n got %s\nwant %s", got, want)
	}
	if want := "Approval needed: run_shell\nSecurity warning: Runs a command on the host."; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}

	t.Run("no args", func(t *testing.T) {
		for _, args := range []string{"", "null", " "} {
			_, blocks := approvalBlocks(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "now", Args: json.RawMessage(args)}, "")
			checkBlockLimits(t, blocks)
			if len(blocks) != 2 {
				t.Errorf("args %q: %d blocks, want the question and the buttons", args, len(blocks))
			}
		}
	})

	t.Run("long args", func(t *testing.T) {
		big := map[string]string{"content": strings.Repeat("line with ``` fences & <tags>\n", 1000)}
		args, _ := json.Marshal(big)
		_, blocks := approvalBlocks(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "write_file", Args: args, SecurityWarning: strings.Repeat("w", 5000)}, strings.Repeat("s", 4000))
		parsed := checkBlockLimits(t, blocks)
		js := marshalString(t, blocks)
		if !strings.Contains(js, "Arguments cut: about") {
			t.Errorf("no note that the arguments were cut")
		}
		if n := len(parsed); n != 7 { // question, 3 argument sections, note, warning, buttons
			t.Errorf("%d blocks, want 7", n)
		}
		if strings.Contains(js, "```fences") || strings.Contains(js, "with ``` fences") {
			t.Errorf("a fence in the arguments was not broken up")
		}
	})

	t.Run("non-JSON args", func(t *testing.T) {
		_, blocks := approvalBlocks(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "t", Args: json.RawMessage("not json <x>")}, "")
		checkBlockLimits(t, blocks)
		if !strings.Contains(marshalString(t, blocks), "not json \\u0026lt;x\\u0026gt;") {
			t.Errorf("blocks %s", marshalString(t, blocks))
		}
	})

	t.Run("long confirmation id", func(t *testing.T) {
		_, blocks := approvalBlocks(switchboard.ConfirmationRequestData{ConfirmationID: strings.Repeat("c", 300), ToolName: "t"}, "")
		checkBlockLimits(t, blocks)
	})
}

func TestResolvedBlocks(t *testing.T) {
	req := switchboard.ConfirmationRequestData{ConfirmationID: "conf_1", ToolName: "current_time", Args: json.RawMessage(`{"timezone":"Europe/Berlin"}`),
		SecurityWarning: "Reads the clock."}
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	// The time, in each reader's own time zone.
	const when = "<!date^1735826700^{date_short_pretty} {time}|2025-01-02 14:05 UTC>"
	tests := []struct {
		name      string
		res       switchboard.ConfirmationResolvedData
		mention   string
		at        time.Time
		want      string
		wantText  string
		wantCount int
	}{
		{"approved", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann"}, "<@U123>", at,
			"Approved by <@U123> · " + when, "Approved by Ann: current_time", 3},
		{"denied", switchboard.ConfirmationResolvedData{By: "Ann"}, "<@U123>", at,
			"Denied by <@U123> · " + when, "Denied by Ann: current_time", 3},
		{"always", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann", Scope: switchboard.ScopeSession}, "<@U123>", at,
			"Always allowed by <@U123> · " + when, "Always allowed by Ann: current_time", 3},
		{"no mention", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann <admin>"}, "", at,
			"Approved by Ann &lt;admin&gt; · " + when, "Approved by Ann &lt;admin&gt;: current_time", 3},
		{"name as mention", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann <x>"}, "Ann <x>", at,
			"Approved by Ann &lt;x&gt; · " + when, "Approved by Ann &lt;x&gt;: current_time", 3},
		{"capitals", switchboard.ConfirmationResolvedData{By: "ANN>"}, "ANN>", at,
			"Denied by ANN&gt; · " + when, "Denied by ANN&gt;: current_time", 3},
		{"no time", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann"}, "<@U123>", time.Time{},
			"Approved by <@U123>", "Approved by Ann: current_time", 3},
		{"from the web", switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "web"}, "", at,
			"Approved by Carol · Web · " + when, "Approved by Carol · Web: current_time", 3},
		{"denied in discord", switchboard.ConfirmationResolvedData{By: "Dan", Channel: "discord"}, "", at,
			"Denied by Dan · Discord · " + when, "Denied by Dan · Discord: current_time", 3},
		{"from slack, by mention", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann", Channel: "slack"}, "<@U123>", at,
			"Approved by <@U123> · Slack · " + when, "Approved by Ann · Slack: current_time", 3},
		{"expired", switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, "", at, "Expired · " + when, "Expired: current_time", 3},
		{"cancelled", switchboard.ConfirmationResolvedData{By: "Ann", Reason: switchboard.ReasonCancelled}, "<@U123>", at,
			"Cancelled by <@U123> · " + when, "Cancelled by Ann: current_time", 3},
		// Stored before reasons: by alone said it, without a channel.
		{"expired, stored before reasons", switchboard.ConfirmationResolvedData{By: "expired"}, "", time.Time{}, "Expired", "Expired: current_time", 3},
		{"cancelled, stored before reasons", switchboard.ConfirmationResolvedData{By: "cancelled"}, "", at, "Cancelled · " + when, "Cancelled: current_time", 3},
		// People called so answer as people: the reason says, never the name.
		{"denied by a person called Expired", switchboard.ConfirmationResolvedData{By: "Expired", Channel: "slack"}, "", at,
			"Denied by Expired · Slack · " + when, "Denied by Expired · Slack: current_time", 3},
		{"denied by a person called expired", switchboard.ConfirmationResolvedData{By: "expired", Channel: "web"}, "", at,
			"Denied by expired · Web · " + when, "Denied by expired · Web: current_time", 3},
		{"approved by a person called Cancelled, by mention", switchboard.ConfirmationResolvedData{Approved: true, By: "Cancelled", Channel: "slack"}, "<@U123>", at,
			"Approved by <@U123> · Slack · " + when, "Approved by Cancelled · Slack: current_time", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.res.ConfirmationID = req.ConfirmationID
			text, blocks := resolvedBlocks(req, tt.res, tt.mention, tt.at)
			parsed := checkBlockLimits(t, blocks)
			if len(parsed) != tt.wantCount {
				t.Errorf("%d blocks, want %d: %s", len(parsed), tt.wantCount, marshalString(t, blocks))
			}
			for _, b := range parsed {
				if jsonAt(b, "type") == "actions" {
					t.Errorf("an answered approval still has buttons")
				}
			}
			// The question and its warning are gone: the card names the
			// call, its arguments follow, the decision ends it.
			if head := jsonAt(parsed[0], "text", "text"); head != "*Tool call `current_time`*" {
				t.Errorf("head %q", head)
			}
			if js := marshalString(t, blocks); strings.Contains(js, "Approve `") || strings.Contains(js, "?*") || strings.Contains(js, "Security warning") {
				t.Errorf("the decided card still asks: %s", js)
			}
			last := parsed[len(parsed)-1]
			if jsonAt(last, "type") != "context" || jsonAt(last, "elements", "0", "text") != tt.want {
				t.Errorf("last block %s, want context %q", marshalString(t, last), tt.want)
			}
			if text != tt.wantText {
				t.Errorf("text = %q, want %q", text, tt.wantText)
			}
		})
	}
}

// A tool call is one short line, its result never shown; lines beyond a
// handful are counted; a reply's piece in blocks ends in them.
func TestToolLines(t *testing.T) {
	for _, tt := range []struct {
		name   string
		failed bool
		took   time.Duration
		want   string
	}{
		{"current_time", false, 230 * time.Millisecond, "used current_time · 0.2 s"},
		{"current_time", false, 0, "used current_time · &lt;0.1 s"},
		{"lookup", true, 1500 * time.Millisecond, "lookup failed · 1.5 s"},
		{"slow", false, 42 * time.Second, "used slow · 42 s"},
		{"slower", false, 125 * time.Second, "used slower · 2 min 5 s"},
		{"a<b>&`c`", false, time.Second, "used a&lt;b&gt;&amp;`c` · 1.0 s"},
		{"", false, time.Second, "used tool · 1.0 s"},
		{strings.Repeat("n", 200), false, time.Second, "used " + strings.Repeat("n", 63) + "… · 1.0 s"},
	} {
		if got := toolLine(tt.name, tt.failed, tt.took); got != tt.want {
			t.Errorf("toolLine(%.20q, %v, %s) = %q, want %q", tt.name, tt.failed, tt.took, got, tt.want)
		}
	}

	var many []string
	for i := range 20 {
		many = append(many, toolLine(fmt.Sprintf("t%d", i), false, time.Second))
	}
	parsed := checkBlockLimits(t, []slackapi.Block{toolsContext(many)})
	text, _ := jsonAt(parsed, "0", "elements", "0", "text").(string)
	if lines := strings.Split(text, "\n"); len(lines) != places.LinesShown || lines[len(lines)-1] != "and 13 more tool calls" {
		t.Errorf("20 calls shown as %q", text)
	}

	long := strings.Repeat("word *bold* ", 300) // over one section
	blocks := replyBlocks(toMrkdwn(long), many[:2])
	parsed = checkBlockLimits(t, blocks)
	if n := len(parsed); n != 3 || jsonAt(parsed[2], "type") != "context" || jsonAt(parsed[2], "elements", "0", "text") != "used t0 · 1.0 s\nused t1 · 1.0 s" {
		t.Errorf("reply blocks %s", marshalString(t, blocks))
	}
}

func TestErrorBlocks(t *testing.T) {
	text, blocks := errorBlocks(switchboard.ErrorData{Code: switchboard.ErrCodeProvider, Message: "The model failed <500>."})
	checkBlockLimits(t, blocks)
	if got := marshalString(t, blocks); got != `[{"type":"section","text":{"type":"mrkdwn","text":"⚠ The model failed \u0026lt;500\u0026gt;.","verbatim":true}}]` {
		t.Errorf("blocks %s", got)
	}
	if text != "Error: The model failed &lt;500&gt;." {
		t.Errorf("text %q", text)
	}
}

func TestFormModal(t *testing.T) {
	form := switchboard.UIForm{
		ActionID:    "ui_1:form",
		SubmitLabel: "Send the details now please",
		Inputs: []switchboard.UIFormInput{
			{Name: "name", Label: "Your name", Required: true, Placeholder: "Ann"},
			{Name: "bio", Label: "Bio", Type: "textarea"},
			{Name: "age", Label: "Age", Type: "number"},
			{Name: "mail", Label: "Email", Type: "email", Required: true},
			{Name: "x", Label: strings.Repeat("L", 2500), Placeholder: strings.Repeat("p", 200)},
		},
	}
	view := formModal(form, "A title longer than twenty-four characters", "tok_1")
	v := checkModalLimits(t, view)
	if got := jsonAt(v, "title", "text"); got != "A title longer than twe…" {
		t.Errorf("title %q", got)
	}
	if got := jsonAt(v, "submit", "text"); got != "Send the details now ple…" && utf8.RuneCountInString(got.(string)) != 24 {
		t.Errorf("submit %q", got)
	}
	if v["callback_id"] != "sb_form" || v["private_metadata"] != "tok_1" {
		t.Errorf("callback_id %v, private_metadata %v", v["callback_id"], v["private_metadata"])
	}
	wantTypes := []string{"plain_text_input", "plain_text_input", "number_input", "email_text_input", "plain_text_input"}
	wantOptional := []bool{false, true, true, false, true}
	for i := range form.Inputs {
		b := jsonAt(v, "blocks", fmt.Sprint(i))
		id := fmt.Sprintf("sb_in_%d", i)
		if jsonAt(b, "type") != "input" || jsonAt(b, "block_id") != id || jsonAt(b, "element", "action_id") != id {
			t.Errorf("block %d: %s", i, marshalString(t, b))
		}
		if got := jsonAt(b, "element", "type"); got != wantTypes[i] {
			t.Errorf("block %d element %v, want %s", i, got, wantTypes[i])
		}
		if got, _ := jsonAt(b, "optional").(bool); got != wantOptional[i] {
			t.Errorf("block %d optional %v, want %v", i, got, wantOptional[i])
		}
	}
	if jsonAt(v, "blocks", "1", "element", "multiline") != true {
		t.Errorf("textarea is not multiline")
	}
	if s, _ := jsonAt(v, "blocks", "4", "label", "text").(string); utf8.RuneCountInString(s) != 2000 {
		t.Errorf("label of %d characters", utf8.RuneCountInString(s))
	}
	if strings.Contains(marshalString(t, view), `"name"`) {
		t.Errorf("an input name reached Slack")
	}

	// Defaults and too many inputs.
	many := switchboard.UIForm{Inputs: slices.Repeat([]switchboard.UIFormInput{{Name: "n"}}, 120)}
	v = checkModalLimits(t, formModal(many, "", ""))
	if jsonAt(v, "title", "text") != "Form" || jsonAt(v, "submit", "text") != "Submit" || len(v["blocks"].([]any)) != 100 {
		t.Errorf("defaults: %.300s", marshalString(t, v))
	}
	if jsonAt(v, "blocks", "0", "label", "text") != "n" {
		t.Errorf("label falls back to the name: %v", jsonAt(v, "blocks", "0", "label"))
	}
}

func TestFormSubmission(t *testing.T) {
	form := switchboard.UIForm{Inputs: []switchboard.UIFormInput{{Name: "name"}, {Name: "age", Type: "number"}, {Name: "empty"}}}
	values := map[string]map[string]slackapi.BlockAction{
		"sb_in_0": {"sb_in_0": {Value: "Ann \"A\""}},
		"sb_in_1": {"sb_in_1": {Value: "42"}},
		"sb_in_2": {"sb_in_2": {Value: ""}},
		"sb_in_9": {"sb_in_9": {Value: "stray"}},
	}
	if got, want := formSubmission(form, values), `{"age":"42","name":"Ann \"A\""}`; got != want {
		t.Errorf("formSubmission = %s, want %s", got, want)
	}
	if got := formSubmission(form, nil); got != "{}" {
		t.Errorf("no values: %s", got)
	}
}

func TestTruncateText(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven ch…"},
		{"word  end", 6, "word…"},
		{"ääääää", 3, "ää…"},
		{"x", 0, ""},
	}
	for _, tt := range tests {
		if got := places.Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("places.Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
