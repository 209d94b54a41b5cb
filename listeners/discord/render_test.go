package discord

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/places"
	"github.com/switchboard-gw/switchboard/tools"
)

// rtChecker checks message JSON, parsed generically, against Discord's
// documented limits; rtCheckSend, rtCheckEdit and rtCheckModal also ask
// the fake Discord's validator (discordtest), which must agree.
type rtChecker struct {
	t   *testing.T
	ids map[string]bool // custom_ids in the message
}

func (c *rtChecker) errorf(ptr, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("%s: %s", ptr, fmt.Sprintf(format, args...))
}

// str checks a string field's length in characters.
func (c *rtChecker) str(ptr string, v any, maxChars int, required bool) string {
	c.t.Helper()
	s, ok := v.(string)
	if !ok {
		if required || v != nil {
			c.errorf(ptr, "missing or not a string: %v", v)
		}
		return ""
	}
	if required && strings.TrimSpace(s) == "" {
		c.errorf(ptr, "empty")
	}
	if n := utf8.RuneCountInString(s); n > maxChars {
		c.errorf(ptr, "%d characters, at most %d", n, maxChars)
	}
	return s
}

func (c *rtChecker) customID(ptr string, v any) {
	c.t.Helper()
	id := c.str(ptr+"/custom_id", v, 100, true)
	if c.ids[id] {
		c.errorf(ptr, "duplicate custom_id %q", id)
	}
	c.ids[id] = true
}

func rtMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func rtParse(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return v
}

// rtCheckSend checks a message to send and returns its parsed JSON.
func rtCheckSend(t *testing.T, m *discordgo.MessageSend) map[string]any {
	t.Helper()
	raw := rtMarshal(t, m)
	if err := discordtest.ValidateMessage(raw); err != nil {
		t.Errorf("discordtest.ValidateMessage: %v\n%.400s", err, raw)
	}
	v := rtParse(t, raw)
	c := &rtChecker{t: t, ids: map[string]bool{}}
	c.message(v)
	if len(m.Files) > 0 {
		t.Errorf("a builder attached files")
	}
	if m.AllowedMentions == nil || m.AllowedMentions.Parse == nil || len(m.AllowedMentions.Parse) != 0 {
		t.Errorf("allowed_mentions does not forbid every mention: %+v", m.AllowedMentions)
	}
	return v
}

// rtCheckEdit checks an edit and returns its parsed JSON.
func rtCheckEdit(t *testing.T, e *discordgo.MessageEdit) map[string]any {
	t.Helper()
	raw := rtMarshal(t, e)
	v := rtParse(t, raw)
	delete(v, "ID") // discordgo's routing fields
	delete(v, "Channel")
	raw = rtMarshal(t, v)
	if err := discordtest.ValidateMessage(raw); err != nil {
		t.Errorf("discordtest.ValidateMessage: %v\n%.400s", err, raw)
	}
	c := &rtChecker{t: t, ids: map[string]bool{}}
	c.message(v)
	return v
}

func (c *rtChecker) message(v map[string]any) {
	c.t.Helper()
	c.str("/content", v["content"], 2000, false)
	embeds, _ := v["embeds"].([]any)
	comps, _ := v["components"].([]any)
	if v["content"] == nil && len(embeds) == 0 && len(comps) == 0 {
		c.errorf("/", "an empty message")
	}
	if f, _ := v["flags"].(float64); int(f)&(1<<15) != 0 {
		c.errorf("/flags", "Components V2")
	}
	if len(embeds) > 10 {
		c.errorf("/embeds", "%d embeds, at most 10", len(embeds))
	}
	total := 0
	for i, e := range embeds {
		total += c.embed(fmt.Sprintf("/embeds/%d", i), e)
	}
	if total > 6000 {
		c.errorf("/embeds", "%d characters in all, at most 6000", total)
	}
	if len(comps) > 5 {
		c.errorf("/components", "%d action rows, at most 5", len(comps))
	}
	for i, row := range comps {
		c.row(fmt.Sprintf("/components/%d", i), row)
	}
}

// embed checks an embed and returns what it counts toward 6000.
func (c *rtChecker) embed(ptr string, v any) int {
	c.t.Helper()
	e, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "not an object")
		return 0
	}
	n := 0
	count := func(s string) { n += utf8.RuneCountInString(s) }
	count(c.str(ptr+"/title", e["title"], 256, false))
	count(c.str(ptr+"/description", e["description"], 4096, false))
	fields, _ := e["fields"].([]any)
	if len(fields) > 25 {
		c.errorf(ptr+"/fields", "%d fields, at most 25", len(fields))
	}
	for i, f := range fields {
		f, _ := f.(map[string]any)
		fp := fmt.Sprintf("%s/fields/%d", ptr, i)
		count(c.str(fp+"/name", f["name"], 256, false))
		count(c.str(fp+"/value", f["value"], 1024, false))
		if f["name"] == "" || f["value"] == "" {
			c.errorf(fp, "empty name or value")
		}
	}
	if footer, ok := e["footer"].(map[string]any); ok {
		count(c.str(ptr+"/footer/text", footer["text"], 2048, true))
	}
	if img, ok := e["image"].(map[string]any); ok {
		u := c.str(ptr+"/image/url", img["url"], 2048, true)
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			c.errorf(ptr+"/image/url", "not an http(s) URL: %q", u)
		}
	}
	if n == 0 && e["image"] == nil {
		c.errorf(ptr, "an empty embed")
	}
	return n
}

func (c *rtChecker) row(ptr string, v any) {
	c.t.Helper()
	r, _ := v.(map[string]any)
	if r["type"] != float64(1) {
		c.errorf(ptr, "type %v, want an action row", r["type"])
	}
	items, _ := r["components"].([]any)
	if len(items) == 0 || len(items) > 5 {
		c.errorf(ptr, "%d components, want 1–5", len(items))
	}
	for i, it := range items {
		ip := fmt.Sprintf("%s/components/%d", ptr, i)
		x, _ := it.(map[string]any)
		switch x["type"] {
		case float64(2):
			c.str(ip+"/label", x["label"], 80, true)
			if s, _ := x["style"].(float64); s < 1 || s > 4 {
				c.errorf(ip, "style %v", x["style"])
			}
			c.customID(ip, x["custom_id"])
		case float64(3):
			if len(items) != 1 {
				c.errorf(ptr, "a select shares its row")
			}
			c.customID(ip, x["custom_id"])
			c.str(ip+"/placeholder", x["placeholder"], 150, false)
			opts, _ := x["options"].([]any)
			if len(opts) == 0 || len(opts) > 25 {
				c.errorf(ip, "%d options, want 1–25", len(opts))
			}
			values := map[string]bool{}
			for j, o := range opts {
				o, _ := o.(map[string]any)
				op := fmt.Sprintf("%s/options/%d", ip, j)
				c.str(op+"/label", o["label"], 100, true)
				val := c.str(op+"/value", o["value"], 100, true)
				c.str(op+"/description", o["description"], 100, false)
				if values[val] {
					c.errorf(op, "duplicate value %q", val)
				}
				values[val] = true
			}
		default:
			c.errorf(ip, "unexpected component type %v", x["type"])
		}
	}
}

// rtCheckModal checks a modal's data and returns its parsed JSON.
func rtCheckModal(t *testing.T, d *discordgo.InteractionResponseData) map[string]any {
	t.Helper()
	raw := rtMarshal(t, d)
	if err := discordtest.ValidateModal(raw); err != nil {
		t.Errorf("discordtest.ValidateModal: %v\n%.400s", err, raw)
	}
	v := rtParse(t, raw)
	c := &rtChecker{t: t, ids: map[string]bool{}}
	c.str("/title", v["title"], 45, true)
	c.str("/custom_id", v["custom_id"], 100, true)
	rows, _ := v["components"].([]any)
	if len(rows) == 0 || len(rows) > 5 {
		t.Errorf("%d rows in a modal, want 1–5", len(rows))
	}
	for i, row := range rows {
		ptr := fmt.Sprintf("/components/%d", i)
		items, _ := row.(map[string]any)["components"].([]any)
		if len(items) != 1 {
			t.Errorf("%s: %d components, want one text input", ptr, len(items))
			continue
		}
		in, _ := items[0].(map[string]any)
		if in["type"] != float64(4) {
			t.Errorf("%s: type %v, want a text input", ptr, in["type"])
		}
		c.customID(ptr, in["custom_id"])
		c.str(ptr+"/label", in["label"], 45, true)
		c.str(ptr+"/placeholder", in["placeholder"], 100, false)
		if s := in["style"]; s != float64(1) && s != float64(2) {
			t.Errorf("%s: style %v", ptr, s)
		}
	}
	return v
}

// jsonAt digs into parsed JSON: jsonAt(v, "embeds", "0", "title").
func jsonAt(v any, keys ...string) any {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// rtCard is what a card's messages hold, in order.
type rtCard struct {
	msgs         []map[string]any
	buttons      []map[string]any // in order, the form's included
	selects      []map[string]any
	descriptions []string
	fields       []map[string]any
	images       []string
	footers      []string
}

func rtCheckCard(t *testing.T, msgs []*discordgo.MessageSend) rtCard {
	t.Helper()
	var card rtCard
	for _, m := range msgs {
		v := rtCheckSend(t, m)
		card.msgs = append(card.msgs, v)
		embeds, _ := v["embeds"].([]any)
		for _, e := range embeds {
			if d, ok := jsonAt(e, "description").(string); ok {
				card.descriptions = append(card.descriptions, d)
			}
			fields, _ := jsonAt(e, "fields").([]any)
			for _, f := range fields {
				card.fields = append(card.fields, f.(map[string]any))
			}
			if u, ok := jsonAt(e, "image", "url").(string); ok {
				card.images = append(card.images, u)
			}
			if f, ok := jsonAt(e, "footer", "text").(string); ok {
				card.footers = append(card.footers, f)
			}
		}
		rows, _ := v["components"].([]any)
		for _, r := range rows {
			for _, x := range jsonAt(r, "components").([]any) {
				x := x.(map[string]any)
				if x["type"] == float64(2) {
					card.buttons = append(card.buttons, x)
				} else {
					card.selects = append(card.selects, x)
				}
			}
		}
	}
	return card
}

func TestUIMessagesSmallCard(t *testing.T) {
	ui := switchboard.UI{
		ID:    "ui_1",
		Title: "Order #42",
		Text:  "Pick **one** & confirm.\n\n| a | b |\n|---|---|\n| 1 | 2 |",
		Fields: []switchboard.UIField{
			{Label: "Status", Value: "pending"},
			{Label: "Total", Value: "3 € *incl.* tax"},
			{Label: "Notes", Value: "A long note that goes on and on, more than fits in a column."},
		},
		Image: &switchboard.UIImage{URL: "https://img.example/a.png", Alt: "A box"},
		Buttons: []switchboard.UIButton{
			{ActionID: "ui_1:button:0", Label: "Ship it", Value: "ship", Style: "primary"},
			{ActionID: "ui_1:button:1", Label: "Cancel", Value: "cancel", Style: "danger"},
			{ActionID: "ui_1:button:2", Label: "Later"},
		},
		Select: &switchboard.UISelect{ActionID: "ui_1:select", Placeholder: "Carrier", Options: []switchboard.UIOption{
			{Label: "DHL", Value: "dhl"}, {Label: "UPS", Value: "ups"},
		}},
		Form: &switchboard.UIForm{ActionID: "ui_1:form", SubmitLabel: "Add a note", Inputs: []switchboard.UIFormInput{{Name: "note", Label: "Note"}}},
	}
	msgs, uploads := uiMessages(ui)
	if len(uploads) != 0 {
		t.Errorf("uploads = %+v, want none", uploads)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	rtCheckCard(t, msgs)
	want := `{"embeds":[{"type":"rich","title":"Order #42",` +
		`"description":"Pick **one** \u0026 confirm.\n\n` + "```" + `\na | b\n--+--\n1 | 2\n` + "```" + `","color":5793266,` +
		`"image":{"url":"https://img.example/a.png"},"fields":[` +
		`{"name":"Status","value":"pending","inline":true},` +
		`{"name":"Total","value":"3 € *incl.* tax","inline":true},` +
		`{"name":"Notes","value":"A long note that goes on and on, more than fits in a column."}]}],` +
		`"tts":false,"components":[` +
		`{"components":[` +
		`{"label":"Ship it","style":1,"disabled":false,"custom_id":"sb:btn:ui_1:button:0","type":2},` +
		`{"label":"Cancel","style":4,"disabled":false,"custom_id":"sb:btn:ui_1:button:1","type":2},` +
		`{"label":"Later","style":2,"disabled":false,"custom_id":"sb:btn:ui_1:button:2","type":2},` +
		`{"label":"Add a note","style":1,"disabled":false,"custom_id":"sb:form:ui_1:form","type":2}],"type":1},` +
		`{"components":[{"custom_id":"sb:sel:0","placeholder":"Carrier","options":[` +
		`{"label":"DHL","value":"ui_1:select|0","description":"","default":false},` +
		`{"label":"UPS","value":"ui_1:select|1","description":"","default":false}],"disabled":false,"type":3}],"type":1}],` +
		`"allowed_mentions":{"parse":[],"replied_user":false},"sticker_ids":null}`
	if got := string(rtMarshal(t, msgs[0])); got != want {
		t.Errorf("message\n got %s\nwant %s", got, want)
	}
}

func TestUIMessagesImages(t *testing.T) {
	for name, img := range map[string]switchboard.UIImage{
		"data":     {Data: "iVBORw0KGgo=", MIMEType: "image/png", Alt: "chart"},
		"data url": {URL: "data:image/png;base64,iVBORw0KGgo=", Alt: "chart"},
	} {
		t.Run(name, func(t *testing.T) {
			msgs, uploads := uiMessages(switchboard.UI{Image: &img})
			if len(uploads) != 1 || uploads[0].Data != "iVBORw0KGgo=" || uploads[0].MIMEType != "image/png" || uploads[0].Alt != "chart" {
				t.Errorf("uploads = %+v", uploads)
			}
			if len(msgs) != 0 {
				t.Errorf("messages %s, want none: the upload is the card", rtMarshal(t, msgs))
			}
			// With a title, the title is a message and the image an upload.
			msgs, uploads = uiMessages(switchboard.UI{Title: "Chart", Image: &img})
			if len(msgs) != 1 || len(uploads) != 1 {
				t.Errorf("%d messages, %d uploads; want 1, 1", len(msgs), len(uploads))
			}
			rtCheckCard(t, msgs)
		})
	}
	for _, u := range []string{"ftp://x/y.png", "data:text/plain,hi", "https://img.example/" + strings.Repeat("p", 3000)} {
		msgs, uploads := uiMessages(switchboard.UI{Image: &switchboard.UIImage{URL: u}})
		card := rtCheckCard(t, msgs)
		if len(uploads) != 0 || len(card.images) != 0 || len(card.footers) != 1 || !strings.HasPrefix(card.footers[0], "image not shown") {
			t.Errorf("image %.30q: uploads %v, card %+v", u, uploads, card)
		}
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

func TestUIMessagesLimits(t *testing.T) {
	long := strings.Repeat("x", 100)
	var buttons []switchboard.UIButton
	for i := range 30 {
		buttons = append(buttons, switchboard.UIButton{ActionID: fmt.Sprintf("ui_1:button:%d", i), Label: fmt.Sprintf("%d %s", i, long), Value: strings.Repeat("v", 3000), Style: []string{"primary", "danger", "", "link"}[i%4]})
	}
	var options []switchboard.UIOption
	for i := range 60 {
		options = append(options, switchboard.UIOption{Label: fmt.Sprintf("%d %s", i, long), Value: fmt.Sprintf("%d%s", i, strings.Repeat("v", 300))})
	}
	var fields []switchboard.UIField
	for i := range 30 {
		fields = append(fields, switchboard.UIField{Label: fmt.Sprintf("Field %d %s", i, strings.Repeat("L", 300)), Value: strings.Repeat("value & more ", 100)})
	}
	title := strings.Repeat("T", 200)
	sel := &switchboard.UISelect{ActionID: "ui_1:select", Placeholder: strings.Repeat("P", 200), Options: options}
	form := &switchboard.UIForm{ActionID: "ui_1:form", SubmitLabel: strings.Repeat("S", 100)}
	img := &switchboard.UIImage{URL: "https://img.example/" + strings.Repeat("p", 100)}
	var many []switchboard.UIButton
	for i := range 1000 {
		many = append(many, switchboard.UIButton{ActionID: fmt.Sprintf("ui_1:button:%d", i), Label: strconv.Itoa(i)})
	}

	cards := map[string]switchboard.UI{
		"30 buttons and 60 options": {Buttons: buttons, Select: sel},
		"9000-char reply":           {Text: longReply()},
		"200-char title":            {Title: title},
		"30 fields":                 {Fields: fields},
		"everything":                {Title: title, Text: longReply(), Fields: fields, Image: img, Buttons: buttons, Select: sel, Form: form},
		"10000 words":               {Text: numberedWords(10000)},
		"50000 words":               {Text: numberedWords(50000), Buttons: buttons},
		"1000 buttons":              {Buttons: many},
		"3000 options":              {Select: &switchboard.UISelect{ActionID: "s", Options: slices.Repeat(options, 50)}},
		"1000 fields":               {Fields: slices.Repeat(fields, 34)},
		"markdown chaos":            {Text: strings.Repeat(mdSample+"\n\n", 60)},
		"empty labels":              {Buttons: []switchboard.UIButton{{ActionID: "b"}}, Select: &switchboard.UISelect{ActionID: "s", Options: []switchboard.UIOption{{}}}, Fields: []switchboard.UIField{{}, {Label: "only label"}, {Value: "only value"}}},
		"empty card":                {},
		"title only whitespace":     {Title: " \n\t "},
		"code-heavy text":           {Text: "```\n" + strings.Repeat("line of code <x> & y\n", 2000) + "```"},
		"duplicate action ids":      {Buttons: []switchboard.UIButton{{ActionID: "a", Label: "one"}, {ActionID: "a", Label: "two"}}},
		"mentions":                  {Title: "@everyone", Text: "@here", Fields: []switchboard.UIField{{Label: "@everyone", Value: "@here"}}},
	}
	for name, ui := range cards {
		t.Run(name, func(t *testing.T) {
			msgs, _ := uiMessages(ui)
			if len(msgs) == 0 {
				t.Fatalf("no messages")
			}
			card := rtCheckCard(t, msgs)
			// Embeds come before rows: once a message has rows, no later
			// one has embeds.
			rows := false
			for i, m := range card.msgs {
				if rows && m["embeds"] != nil {
					t.Errorf("message %d has embeds after rows", i)
				}
				rows = rows || m["components"] != nil
			}
			if js := rtMarshal(t, msgs); massMentionRe.Match(js) {
				t.Errorf("a mass mention reached a card")
			}
		})
	}

	t.Run("30 buttons and 60 options all shown", func(t *testing.T) {
		msgs, _ := uiMessages(cards["30 buttons and 60 options"])
		card := rtCheckCard(t, msgs)
		if len(msgs) != 2 {
			t.Errorf("%d messages, want 2 (6 rows of buttons, 3 of selects)", len(msgs))
		}
		if len(card.buttons) != 30 {
			t.Fatalf("%d buttons, want 30", len(card.buttons))
		}
		for i, b := range card.buttons {
			if b["custom_id"] != fmt.Sprintf("sb:btn:ui_1:button:%d", i) {
				t.Errorf("button %d custom_id %v", i, b["custom_id"])
			}
			if l := b["label"].(string); utf8.RuneCountInString(l) != 80 || !strings.HasPrefix(l, strconv.Itoa(i)+" ") {
				t.Errorf("button %d label %q", i, l)
			}
		}
		var placeholders, values []string
		for _, s := range card.selects {
			placeholders = append(placeholders, s["placeholder"].(string))
			for _, o := range s["options"].([]any) {
				values = append(values, o.(map[string]any)["value"].(string))
			}
		}
		if len(values) != 60 {
			t.Fatalf("%d options, want 60", len(values))
		}
		for i, v := range values {
			if v != fmt.Sprintf("ui_1:select|%d", i) {
				t.Errorf("option %d value %q", i, v)
			}
		}
		if len(placeholders) != 3 || !strings.HasSuffix(placeholders[0], " (1–25)") || !strings.HasSuffix(placeholders[1], " (26–50)") ||
			!strings.HasSuffix(placeholders[2], " (51–60)") || utf8.RuneCountInString(placeholders[0]) != 150 {
			t.Errorf("placeholders %q", placeholders)
		}
		if ids := []any{card.selects[0]["custom_id"], card.selects[1]["custom_id"], card.selects[2]["custom_id"]}; fmt.Sprint(ids) != "[sb:sel:0 sb:sel:1 sb:sel:2]" {
			t.Errorf("select custom_ids %v", ids)
		}
	})

	t.Run("9000-char reply all shown", func(t *testing.T) {
		reply := longReply()
		msgs, _ := uiMessages(switchboard.UI{Text: reply})
		card := rtCheckCard(t, msgs)
		if len(card.descriptions) < 3 {
			t.Errorf("%d descriptions for %d characters", len(card.descriptions), utf8.RuneCountInString(reply))
		}
		joined := strings.Join(card.descriptions, "\n")
		if !reassembles(toDiscord(reply), card.descriptions) {
			t.Errorf("the descriptions do not add up to the text")
		}
		for _, s := range []string{"func step00", "func step79", "That is all."} {
			if !strings.Contains(joined, s) {
				t.Errorf("text lacks %q", s)
			}
		}
		for i, d := range card.descriptions {
			if strings.Count(d, "```")%2 != 0 {
				t.Errorf("description %d leaves a code block open", i)
			}
		}
	})

	t.Run("200-char title", func(t *testing.T) {
		msgs, _ := uiMessages(cards["200-char title"])
		if got := jsonAt(rtCheckSend(t, msgs[0]), "embeds", "0", "title"); got != title {
			t.Errorf("title %v", got)
		}
		msgs, _ = uiMessages(switchboard.UI{Title: strings.Repeat("T", 300)})
		if got, _ := jsonAt(rtCheckSend(t, msgs[0]), "embeds", "0", "title").(string); utf8.RuneCountInString(got) != 256 || !strings.HasSuffix(got, "…") {
			t.Errorf("title %q", got)
		}
	})

	t.Run("30 fields all shown", func(t *testing.T) {
		msgs, _ := uiMessages(cards["30 fields"])
		card := rtCheckCard(t, msgs)
		if len(card.fields) != 30 {
			t.Fatalf("%d fields, want 30", len(card.fields))
		}
		for i, f := range card.fields {
			if name := f["name"].(string); !strings.HasPrefix(name, fmt.Sprintf("Field %d ", i)) || utf8.RuneCountInString(name) != 256 {
				t.Errorf("field %d name %.20q (%d characters)", i, name, utf8.RuneCountInString(name))
			}
			if v := f["value"].(string); utf8.RuneCountInString(v) > 1024 || !strings.HasSuffix(v, "…") {
				t.Errorf("field %d value of %d characters", i, utf8.RuneCountInString(v))
			}
			if f["inline"] == true {
				t.Errorf("field %d is inline", i)
			}
		}
	})

	t.Run("everything", func(t *testing.T) {
		msgs, _ := uiMessages(cards["everything"])
		card := rtCheckCard(t, msgs)
		if len(card.buttons) != 31 || card.buttons[30]["custom_id"] != "sb:form:ui_1:form" {
			t.Errorf("%d buttons, the last %v; want 30 and the form's", len(card.buttons), card.buttons[len(card.buttons)-1]["custom_id"])
		}
		if len(card.fields) != 30 || len(card.images) != 1 || len(card.selects) != 3 {
			t.Errorf("%d fields, %d images, %d selects", len(card.fields), len(card.images), len(card.selects))
		}
		if got := jsonAt(card.msgs[0], "embeds", "0", "title"); got != title {
			t.Errorf("first embed's title %v", got)
		}
	})

	t.Run("bounds noted", func(t *testing.T) {
		for name, want := range map[string]string{
			"1000 buttons": "900 more buttons not shown", "3000 options": "2750 more options not shown",
			"1000 fields": "920 more fields not shown", "duplicate action ids": "1 buttons with a repeated action id not shown",
		} {
			msgs, _ := uiMessages(cards[name])
			card := rtCheckCard(t, msgs)
			if name == "1000 buttons" && (len(card.buttons) != 100 || len(msgs) != 4) {
				t.Errorf("%s: %d buttons in %d messages, want 100 in 4", name, len(card.buttons), len(msgs))
			}
			if len(card.footers) != 1 || card.footers[0] != want {
				t.Errorf("%s: footers %q, want %q", name, card.footers, want)
			}
		}
		msgs, _ := uiMessages(cards["50000 words"])
		card := rtCheckCard(t, msgs)
		if len(card.descriptions) != cardMaxTextEmbeds || !strings.HasSuffix(card.descriptions[cardMaxTextEmbeds-1], "-# (text cut: too long for Discord)") {
			t.Errorf("%d descriptions, the last ending %q", len(card.descriptions), card.descriptions[len(card.descriptions)-1][max(0, len(card.descriptions[len(card.descriptions)-1])-50):])
		}
		if len(card.buttons) != 30 {
			t.Errorf("%d buttons", len(card.buttons))
		}
	})

	t.Run("empty", func(t *testing.T) {
		msgs, _ := uiMessages(switchboard.UI{})
		if v := rtCheckSend(t, msgs[0]); len(msgs) != 1 || v["content"] != "-# (an empty card)" {
			t.Errorf("empty card: %s", rtMarshal(t, msgs))
		}
		msgs, _ = uiMessages(cards["empty labels"])
		card := rtCheckCard(t, msgs)
		if card.buttons[0]["label"] != "Button 1" || jsonAt(card.selects[0], "options", "0", "label") != "Option 1" {
			t.Errorf("default labels: %v %v", card.buttons[0]["label"], jsonAt(card.selects[0], "options", "0", "label"))
		}
		if len(card.fields) != 2 || card.fields[0]["value"] != "\u200b" || card.fields[1]["name"] != "\u200b" {
			t.Errorf("fields %v", card.fields)
		}
	})
}

func TestSbCustomID(t *testing.T) {
	if got := sbCustomID(idApprove, "conf_0123456789abcdefghij"); got != "sb:approve:conf_0123456789abcdefghij" {
		t.Errorf("short id: %q", got)
	}
	long := strings.Repeat("c", 200)
	got := sbCustomID(idButton, long)
	if len(got) > 100 || !strings.HasPrefix(got, "sb:btn:#") || got != sbCustomID(idButton, long) || got == sbCustomID(idButton, long+"x") {
		t.Errorf("long id: %q", got)
	}
	// Present's action ids always fit, with every prefix.
	for _, id := range []string{"ui_0123456789ab:button:4", "ui_0123456789ab:select", "ui_0123456789ab:form"} {
		for _, prefix := range []string{idButton, idForm, idModal} {
			if got := sbCustomID(prefix, id); got != prefix+id {
				t.Errorf("%q: %q", prefix+id, got)
			}
		}
		if v := optionValue(id, 249); v != id+"|249" {
			t.Errorf("option value %q", v)
		}
	}
	if v := optionValue(long, 3); len(v) > 100 || !strings.HasSuffix(v, "|3") {
		t.Errorf("long option value %q", v)
	}
}

func TestApprovalMessage(t *testing.T) {
	req := switchboard.ConfirmationRequestData{
		ConfirmationID:  "conf_0123456789abcdefgh",
		ToolCallID:      "call_1",
		ToolName:        "run_shell",
		Args:            json.RawMessage(`{"cmd":"ls <dir> && rm -rf /tmp/x"}`),
		SecurityWarning: "Runs a command on the *host*.",
		ExpiresAt:       time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	m := approvalMessage(req)
	rtCheckSend(t, m)
	want := `{"embeds":[{"type":"rich","title":"Approve ` + "`run_shell`" + `?",` +
		`"description":"` + "```json" + `\n{\n  \"cmd\": \"ls \u003cdir\u003e \u0026\u0026 rm -rf /tmp/x\"\n}\n` + "```" + `\nExpires \u003ct:1735787045:R\u003e",` +
		`"color":15774258,"fields":[{"name":"⚠️ Security warning","value":"Runs a command on the \\*host\\*."}]}],` +
		`"tts":false,"components":[{"components":[` +
		`{"label":"Approve","style":3,"disabled":false,"custom_id":"sb:approve:conf_0123456789abcdefgh","type":2},` +
		`{"label":"Deny","style":4,"disabled":false,"custom_id":"sb:deny:conf_0123456789abcdefgh","type":2},` +
		`{"label":"Always allow","style":2,"disabled":false,"custom_id":"sb:always:conf_0123456789abcdefgh","type":2}],"type":1}],` +
		`"allowed_mentions":{"parse":[],"replied_user":false},"sticker_ids":null}`
	if got := string(rtMarshal(t, m)); got != want {
		t.Errorf("message\n got %s\nwant %s", got, want)
	}

	t.Run("no args", func(t *testing.T) {
		for _, args := range []string{"", "null", " "} {
			v := rtCheckSend(t, approvalMessage(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "now", Args: json.RawMessage(args)}))
			if d := jsonAt(v, "embeds", "0", "description"); d != nil {
				t.Errorf("args %q: description %q", args, d)
			}
		}
	})

	t.Run("10,000-character argument", func(t *testing.T) {
		args, _ := json.Marshal(map[string]string{"content": strings.Repeat("line with ``` fences & <tags>\n", 345)})
		if n := len(args); n < 10000 {
			t.Fatalf("args of %d characters", n)
		}
		m := approvalMessage(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "write_file", Args: args, SecurityWarning: strings.Repeat("w", 5000), ExpiresAt: time.Unix(1700000000, 0)})
		v := rtCheckSend(t, m)
		d := jsonAt(v, "embeds", "0", "description").(string)
		if !strings.Contains(d, "-# Arguments cut: ") || !strings.Contains(d, "characters shown.") || !strings.HasSuffix(d, "Expires <t:1700000000:R>") {
			t.Errorf("description ends %q", d[len(d)-120:])
		}
		if n := utf8.RuneCountInString(d); n < 3800 {
			t.Errorf("description of %d characters: too little shown", n)
		}
		if strings.Count(d, "```") != 2 {
			t.Errorf("a fence in the arguments was not broken up: %d fences", strings.Count(d, "```"))
		}
		if w := jsonAt(v, "embeds", "0", "fields", "0", "value").(string); utf8.RuneCountInString(w) != 1024 {
			t.Errorf("warning of %d characters", utf8.RuneCountInString(w))
		}
	})

	t.Run("one long line", func(t *testing.T) {
		args, _ := json.Marshal(map[string]string{"s": strings.Repeat("a", 10000)})
		v := rtCheckSend(t, approvalMessage(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "t", Args: args}))
		d := jsonAt(v, "embeds", "0", "description").(string)
		if !strings.HasSuffix(d, "characters shown.") || !strings.Contains(d, "aaaa\n…\n```") {
			t.Errorf("description ends %q", d[len(d)-80:])
		}
	})

	t.Run("non-JSON args", func(t *testing.T) {
		v := rtCheckSend(t, approvalMessage(switchboard.ConfirmationRequestData{ConfirmationID: "c", ToolName: "t", Args: json.RawMessage("not json <x>")}))
		if d := jsonAt(v, "embeds", "0", "description"); d != "```\nnot json <x>\n```" {
			t.Errorf("description %q", d)
		}
	})

	t.Run("long names and ids", func(t *testing.T) {
		v := rtCheckSend(t, approvalMessage(switchboard.ConfirmationRequestData{ConfirmationID: strings.Repeat("c", 300), ToolName: strings.Repeat("n`", 300)}))
		if id, _ := jsonAt(v, "components", "0", "components", "0", "custom_id").(string); !strings.HasPrefix(id, "sb:approve:#") {
			t.Errorf("custom_id %q", id)
		}
		if title, _ := jsonAt(v, "embeds", "0", "title").(string); strings.Count(title, "`") != 2 {
			t.Errorf("title %q", title)
		}
	})
}

func TestResolvedEdit(t *testing.T) {
	req := switchboard.ConfirmationRequestData{ConfirmationID: "conf_1", ToolName: "current_time", Args: json.RawMessage(`{"timezone":"Europe/Berlin"}`),
		ExpiresAt: time.Unix(1700000000, 0), SecurityWarning: "Reads the clock."}
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	const args = "```json\n{\n  \"timezone\": \"Europe/Berlin\"\n}\n```\n\n"
	tests := []struct {
		name    string
		res     switchboard.ConfirmationResolvedData
		mention string
		at      time.Time
		want    string
		color   int
	}{
		{"approved", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann"}, "<@123>", at, "✅ Approved by <@123> · <t:1735826700:f>", colorApproved},
		{"nickname mention", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann"}, "<@!123>", at, "✅ Approved by <@!123> · <t:1735826700:f>", colorApproved},
		{"denied", switchboard.ConfirmationResolvedData{By: "Ann"}, "<@123>", at, "❌ Denied by <@123> · <t:1735826700:f>", colorDenied},
		{"always", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann", Scope: switchboard.ScopeSession}, "<@123>", at, "✅ Always allowed by <@123> · <t:1735826700:f>", colorApproved},
		{"no mention", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann *the* admin"}, "", at, `✅ Approved by Ann \*the\* admin · <t:1735826700:f>`, colorApproved},
		{"name as mention", switchboard.ConfirmationResolvedData{Approved: true, By: "x"}, "Ann <@&1>", at, `✅ Approved by Ann \<@&1\> · <t:1735826700:f>`, colorApproved},
		{"mass mention name", switchboard.ConfirmationResolvedData{By: "@everyone"}, "@everyone", at, "❌ Denied by @\u200beveryone · <t:1735826700:f>", colorDenied},
		{"no time", switchboard.ConfirmationResolvedData{Approved: true, By: "Ann"}, "<@123>", time.Time{}, "✅ Approved by <@123>", colorApproved},
		{"from slack", switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "slack"}, "", at, "✅ Approved by Carol · Slack · <t:1735826700:f>", colorApproved},
		{"denied in discord", switchboard.ConfirmationResolvedData{By: "Dan", Channel: "discord"}, "<@123>", at, "❌ Denied by <@123> · Discord · <t:1735826700:f>", colorDenied},
		{"an unknown channel", switchboard.ConfirmationResolvedData{Approved: true, By: "Eve", Channel: "irc_*"}, "", time.Time{}, `✅ Approved by Eve · irc\_\*`, colorApproved},
		{"expired", switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, "", at, "⌛ Expired · <t:1735826700:f>", colorClosed},
		{"cancelled", switchboard.ConfirmationResolvedData{By: "Ann", Reason: switchboard.ReasonCancelled}, "<@123>", time.Time{}, "🚫 Cancelled by <@123>", colorClosed},
		// Stored before reasons: by alone said it, without a channel.
		{"expired, stored before reasons", switchboard.ConfirmationResolvedData{By: "expired"}, "", at, "⌛ Expired · <t:1735826700:f>", colorClosed},
		{"cancelled, stored before reasons", switchboard.ConfirmationResolvedData{By: "cancelled"}, "", time.Time{}, "🚫 Cancelled", colorClosed},
		// People called so answer as people: the reason says, never the name.
		{"denied by a person called Expired", switchboard.ConfirmationResolvedData{By: "Expired", Channel: "discord"}, "", at, "❌ Denied by Expired · Discord · <t:1735826700:f>", colorDenied},
		{"denied by a person called expired", switchboard.ConfirmationResolvedData{By: "expired", Channel: "slack"}, "", at, "❌ Denied by expired · Slack · <t:1735826700:f>", colorDenied},
		{"denied by a person called Cancelled, by mention", switchboard.ConfirmationResolvedData{By: "Cancelled", Channel: "discord"}, "<@123>", at, "❌ Denied by <@123> · Discord · <t:1735826700:f>", colorDenied},
		{"approved by a person called cancelled", switchboard.ConfirmationResolvedData{Approved: true, By: "cancelled", Channel: "web"}, "", time.Time{}, "✅ Approved by cancelled · Web", colorApproved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.res.ConfirmationID = req.ConfirmationID
			e := resolvedEdit(req, tt.res, tt.mention, tt.at)
			v := rtCheckEdit(t, e)
			if e.Components == nil || len(*e.Components) != 0 || !strings.Contains(string(rtMarshal(t, e)), `"components":[]`) {
				t.Errorf("the buttons are not removed: %s", rtMarshal(t, e))
			}
			if e.Content != nil {
				t.Errorf("the edit changes the content")
			}
			if got := jsonAt(v, "embeds", "0", "description"); got != args+tt.want {
				t.Errorf("description %q, want %q", got, args+tt.want)
			}
			if got := jsonAt(v, "embeds", "0", "color"); got != float64(tt.color) {
				t.Errorf("color %v, want %d", got, tt.color)
			}
			// The question, its expiry and its warning are gone.
			if got := jsonAt(v, "embeds", "0", "title"); got != "Tool call `current_time`" {
				t.Errorf("title %v", got)
			}
			if got := jsonAt(v, "embeds", "0", "fields"); got != nil {
				t.Errorf("fields %v", got)
			}
			// The same decision on the card as Discord holds it after a
			// restart, its request unknown.
			held := approvalMessage(req).Embeds[0]
			re := redecided(held, tt.res, tt.mention, tt.at)
			if re.Title != "Tool call `current_time`" || re.Description != args+tt.want || re.Color != tt.color || len(re.Fields) != 0 {
				t.Errorf("redecided %+v", re)
			}
		})
	}

	// The status line fits however long the arguments and the name.
	args10k, _ := json.Marshal(map[string]string{"s": strings.Repeat("a\n", 5000)})
	e := resolvedEdit(switchboard.ConfirmationRequestData{ConfirmationID: "c", Args: args10k}, switchboard.ConfirmationResolvedData{Approved: true, By: strings.Repeat("N", 500)}, "", at)
	v := rtCheckEdit(t, e)
	if d := jsonAt(v, "embeds", "0", "description").(string); !strings.HasSuffix(d, "· <t:1735826700:f>") || !strings.Contains(d, "Arguments cut") {
		t.Errorf("description ends %q", d[len(d)-200:])
	}
}

func TestFormModal(t *testing.T) {
	form := switchboard.UIForm{
		ActionID:    "ui_1:form",
		SubmitLabel: "Send",
		Inputs: []switchboard.UIFormInput{
			{Name: "name", Label: "Your name", Required: true, Placeholder: "Ann"},
			{Name: "bio", Label: "Bio", Type: "textarea"},
			{Name: "age", Label: "Age", Type: "number"},
			{Name: "mail", Label: "Email", Type: "email", Required: true},
			{Name: "x", Label: strings.Repeat("L", 100), Placeholder: strings.Repeat("p", 200)},
		},
	}
	d := formModal(form, "A title longer than forty-five characters, surely", "")
	v := rtCheckModal(t, d)
	want := `{"tts":false,"content":"","components":[` +
		`{"components":[{"custom_id":"sb:in:0","label":"Your name","style":1,"placeholder":"Ann","required":true,"type":4}],"type":1},` +
		`{"components":[{"custom_id":"sb:in:1","label":"Bio","style":2,"required":false,"type":4}],"type":1},` +
		`{"components":[{"custom_id":"sb:in:2","label":"Age","style":1,"placeholder":"A number","required":false,"type":4}],"type":1},` +
		`{"components":[{"custom_id":"sb:in:3","label":"Email","style":1,"placeholder":"name@example.com","required":true,"type":4}],"type":1},` +
		`{"components":[{"custom_id":"sb:in:4","label":"` + strings.Repeat("L", 44) + `…","style":1,"placeholder":"` + strings.Repeat("p", 99) + `…","required":false,"type":4}],"type":1}],` +
		`"embeds":null,"custom_id":"sb:modal:ui_1:form","title":"A title longer than forty-five characters, s…"}`
	if got := string(rtMarshal(t, d)); got != want {
		t.Errorf("modal\n got %s\nwant %s", got, want)
	}
	_ = v
	if d := formModal(form, "", "ui_2:form"); d.CustomID != "sb:modal:ui_2:form" || d.Title != "Form" {
		t.Errorf("custom_id %q, title %q", d.CustomID, d.Title)
	}

	// More than five inputs: the required ones first, in the form's order,
	// and the title says how many are shown.
	var many []switchboard.UIFormInput
	for i := range 10 {
		many = append(many, switchboard.UIFormInput{Name: fmt.Sprintf("f%d", i), Label: fmt.Sprintf("F%d", i), Required: i%3 == 2})
	}
	d = formModal(switchboard.UIForm{ActionID: "ui_1:form", Inputs: many}, "Details", "")
	rtCheckModal(t, d)
	var ids []string
	for _, row := range d.Components {
		ids = append(ids, row.(discordgo.ActionsRow).Components[0].(discordgo.TextInput).CustomID)
	}
	if got := strings.Join(ids, " "); got != "sb:in:0 sb:in:1 sb:in:2 sb:in:5 sb:in:8" {
		t.Errorf("inputs shown %s", got)
	}
	if d.Title != "Details (5 of 10 fields)" {
		t.Errorf("title %q", d.Title)
	}
	d = formModal(switchboard.UIForm{ActionID: strings.Repeat("a", 200), Inputs: many}, strings.Repeat("T", 100), "")
	rtCheckModal(t, d)
	if !strings.HasSuffix(d.Title, "… (5 of 10 fields)") || !strings.HasPrefix(d.CustomID, "sb:modal:#") {
		t.Errorf("title %q, custom_id %q", d.Title, d.CustomID)
	}
}

func TestFormValues(t *testing.T) {
	ui := switchboard.UI{ID: "ui_1", Title: "Sign up", Form: &switchboard.UIForm{ActionID: "ui_1:form", Inputs: []switchboard.UIFormInput{
		{Name: "name", Label: "Name", Required: true},
		{Name: "age", Label: "Age", Type: "number"},
		{Name: "empty", Label: "Empty"},
	}}}
	// A submission as Discord sends it.
	raw := `{"custom_id":"sb:modal:ui_1:form","components":[` +
		`{"type":1,"components":[{"type":4,"custom_id":"sb:in:0","value":"Ann \"A\""}]},` +
		`{"type":1,"components":[{"type":4,"custom_id":"sb:in:1","value":"42"}]},` +
		`{"type":1,"components":[{"type":4,"custom_id":"sb:in:2","value":""}]},` +
		`{"type":1,"components":[{"type":4,"custom_id":"sb:in:9","value":"stray"}]},` +
		`{"type":1,"components":[{"type":4,"custom_id":"sb:in:01","value":"stray"}]}]}`
	var data discordgo.ModalSubmitInteractionData
	if err := json.Unmarshal([]byte(raw), &data); err != nil {
		t.Fatal(err)
	}
	got := formValues(*ui.Form, data)
	if want := `{"age":"42","name":"Ann \"A\""}`; got != want {
		t.Errorf("formValues = %s, want %s", got, want)
	}
	// The gateway takes it.
	if desc, err := tools.DescribeAction(ui, "ui_1:form", got); err != nil || desc != `Submitted "Sign up": {"age":"42","name":"Ann \"A\""}` {
		t.Errorf("DescribeAction = %q, %v", desc, err)
	}
	// Components as built (values, not pointers) are read too.
	built := discordgo.ModalSubmitInteractionData{Components: []discordgo.MessageComponent{
		discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{CustomID: "sb:in:1", Value: "7"}}},
	}}
	if got := formValues(*ui.Form, built); got != `{"age":"7"}` {
		t.Errorf("formValues = %s", got)
	}
	if got := formValues(*ui.Form, discordgo.ModalSubmitInteractionData{}); got != "{}" {
		t.Errorf("no values: %s", got)
	}
}

// A tool call is one short subtext line, its result never shown; lines
// beyond a handful are counted; a reply's last piece ends in them, split
// again where they would not fit.
func TestToolLines(t *testing.T) {
	for _, tt := range []struct {
		name   string
		failed bool
		took   time.Duration
		want   string
	}{
		{"current_time", false, 230 * time.Millisecond, "-# used current\\_time · 0.2 s"},
		{"now", false, 0, "-# used now · \\<0.1 s"},
		{"lookup", true, 1500 * time.Millisecond, "-# lookup failed · 1.5 s"},
		{"slow", false, 42 * time.Second, "-# used slow · 42 s"},
		{"slower", false, 125 * time.Second, "-# used slower · 2 min 5 s"},
		{"*a* <@1> @here", false, time.Second, "-# used \\*a\\* \\<@1\\> @\u200bhere · 1.0 s"},
		{"", false, time.Second, "-# used tool · 1.0 s"},
	} {
		got := toolLine(tt.name, tt.failed, tt.took)
		if got != tt.want {
			t.Errorf("toolLine(%q, %v, %s) = %q, want %q", tt.name, tt.failed, tt.took, got, tt.want)
		}
		rtCheckSend(t, &discordgo.MessageSend{Content: got, AllowedMentions: mentionsNone()})
	}

	var many []string
	for i := range 20 {
		many = append(many, toolLine(fmt.Sprintf("t%d", i), false, time.Second))
	}
	if lines := strings.Split(toolsText(many), "\n"); len(lines) != places.LinesShown || lines[len(lines)-1] != "-# and 13 more tool calls" {
		t.Errorf("20 calls shown as %q", lines)
	}

	// The last piece takes the lines; where they would not fit, it is
	// split again, every piece within a message's content.
	text := strings.Repeat("word ", 1190) // three pieces, the last too long for the lines
	pieces := withTools(splitDiscord(text, contentLimit), many)
	if len(pieces) != 4 || !strings.HasSuffix(pieces[len(pieces)-1], "\n"+toolsText(many)) {
		t.Fatalf("%d pieces, the last %q", len(pieces), pieces[len(pieces)-1])
	}
	got := ""
	for i, p := range pieces {
		if n := utf8.RuneCountInString(p); n > contentLimit {
			t.Errorf("piece %d of %d characters", i, n)
		}
		if i < len(pieces)-1 && strings.Contains(p, "-# used") {
			t.Errorf("piece %d shows tool lines", i)
		}
		got += strings.TrimSuffix(p, "\n"+toolsText(many)) + " "
	}
	if strings.Join(strings.Fields(got), " ") != strings.TrimSpace(text) {
		t.Errorf("the text changed")
	}
	if p := withTools([]string{"Short."}, many[:1]); len(p) != 1 || p[0] != "Short.\n-# used t0 · 1.0 s" {
		t.Errorf("short reply %q", p)
	}
}

func TestErrorLine(t *testing.T) {
	tests := []struct {
		in   switchboard.ErrorData
		want string
	}{
		{switchboard.ErrorData{Code: switchboard.ErrCodeProvider, Message: "The model failed <500>."}, "⚠️ The model failed \\<500\\>."},
		{switchboard.ErrorData{Code: switchboard.ErrCodeInternal}, "⚠️ Something went wrong."},
		{switchboard.ErrorData{Message: "@everyone look"}, "⚠️ @\u200beveryone look"},
	}
	for _, tt := range tests {
		if got := errorLine(tt.in); got != tt.want {
			t.Errorf("errorLine(%+v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := errorLine(switchboard.ErrorData{Message: strings.Repeat("bad ", 1000)})
	rtCheckSend(t, &discordgo.MessageSend{Content: long, AllowedMentions: mentionsNone()})
	if n := utf8.RuneCountInString(long); n > 2000 || !strings.HasSuffix(long, "…") {
		t.Errorf("long error of %d characters", n)
	}
}

func TestClipRunes(t *testing.T) {
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
