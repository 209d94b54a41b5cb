package slacktest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

func plain(s string) map[string]any  { return map[string]any{"type": "plain_text", "text": s} }
func mrkdwn(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s} }

func btn(id, text string) map[string]any {
	return map[string]any{"type": "button", "action_id": id, "text": plain(text), "value": id}
}

func opts(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"text": plain(fmt.Sprintf("Option %d", i)), "value": fmt.Sprintf("v%d", i)}
	}
	return out
}

func repeat(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"type": "divider"}
	}
	return out
}

func TestValidateBlocks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocks  any
		problem string // substring of the problem; "" means valid
	}{
		{"empty", []any{}, ""},
		{"50 blocks", repeat(50), ""},
		{"51 blocks", repeat(51), "no more than 50 items allowed [json-pointer:/blocks]"},
		{"not an array", map[string]any{"type": "divider"}, "must provide an array [json-pointer:/blocks]"},
		{"unknown block type", []any{map[string]any{"type": "carousel"}}, "unsupported block type: carousel"},
		{"input in a message", []any{map[string]any{"type": "input", "label": plain("x"), "element": map[string]any{"type": "plain_text_input"}}}, "only allowed in modals"},
		{"block_id 256", []any{map[string]any{"type": "divider", "block_id": strings.Repeat("b", 256)}}, "must be less than 256 characters [json-pointer:/blocks/0/block_id]"},
		{"duplicate block_id", []any{map[string]any{"type": "divider", "block_id": "x"}, map[string]any{"type": "divider", "block_id": "x"}}, "duplicate block_id"},
		{"section 3000", []any{map[string]any{"type": "section", "text": mrkdwn(strings.Repeat("s", 3000))}}, ""},
		{"section without text or fields", []any{map[string]any{"type": "section"}}, "must provide text or fields"},
		{"11 fields", []any{map[string]any{"type": "section", "fields": []any{
			mrkdwn("1"), mrkdwn("2"), mrkdwn("3"), mrkdwn("4"), mrkdwn("5"), mrkdwn("6"), mrkdwn("7"), mrkdwn("8"), mrkdwn("9"), mrkdwn("10"), mrkdwn("11"),
		}}}, "no more than 10 items allowed [json-pointer:/blocks/0/fields]"},
		{"field 2001", []any{map[string]any{"type": "section", "fields": []any{mrkdwn(strings.Repeat("f", 2001))}}}, "must be less than 2001 characters [json-pointer:/blocks/0/fields/0/text]"},
		{"bad text type", []any{map[string]any{"type": "section", "text": map[string]any{"type": "markdown", "text": "x"}}}, "must be one of: plain_text, mrkdwn"},
		{"empty text", []any{map[string]any{"type": "section", "text": mrkdwn("")}}, "must be more than 0 characters"},
		{"header 150", []any{map[string]any{"type": "header", "text": plain(strings.Repeat("h", 150))}}, ""},
		{"header 151", []any{map[string]any{"type": "header", "text": plain(strings.Repeat("h", 151))}}, "must be less than 151 characters [json-pointer:/blocks/0/text/text]"},
		{"mrkdwn header", []any{map[string]any{"type": "header", "text": mrkdwn("h")}}, "must be plain_text [json-pointer:/blocks/0/text/type]"},
		{"11 context elements", []any{map[string]any{"type": "context", "elements": []any{
			mrkdwn("1"), mrkdwn("2"), mrkdwn("3"), mrkdwn("4"), mrkdwn("5"), mrkdwn("6"), mrkdwn("7"), mrkdwn("8"), mrkdwn("9"), mrkdwn("10"), mrkdwn("11"),
		}}}, "no more than 10 items allowed [json-pointer:/blocks/0/elements]"},
		{"mrkdwn button", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "text": mrkdwn("b")}}}}, "must be plain_text"},
		{"button value 2001", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "text": plain("b"), "value": strings.Repeat("v", 2001)}}}}, "[json-pointer:/blocks/0/elements/0/value]"},
		{"button url 3001", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "text": plain("b"), "url": "https://x/" + strings.Repeat("u", 2992)}}}}, "[json-pointer:/blocks/0/elements/0/url]"},
		{"button style", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "text": plain("b"), "style": "secondary"}}}}, "must be one of: primary, danger"},
		{"action_id 256", []any{map[string]any{"type": "actions", "elements": []any{btn(strings.Repeat("a", 256), "b")}}}, "[json-pointer:/blocks/0/elements/0/action_id]"},
		{"duplicate action_id in a block", []any{map[string]any{"type": "actions", "elements": []any{btn("a", "1"), btn("a", "2")}}}, "duplicate action_id"},
		{"same action_id in two blocks", []any{
			map[string]any{"type": "actions", "block_id": "r1", "elements": []any{btn("approve", "1")}},
			map[string]any{"type": "actions", "block_id": "r2", "elements": []any{btn("approve", "2")}},
		}, ""},
		{"select without options", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "static_select", "action_id": "s", "placeholder": plain("p")}}}}, "missing required field: options"},
		{"placeholder 151", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "static_select", "placeholder": plain(strings.Repeat("p", 151)), "options": opts(1)}}}}, "[json-pointer:/blocks/0/elements/0/placeholder/text]"},
		{"option text 76", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "static_select", "options": []any{
			map[string]any{"text": plain(strings.Repeat("o", 76)), "value": "v"}}}}}}, "[json-pointer:/blocks/0/elements/0/options/0/text/text]"},
		{"option value 151", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "static_select", "options": []any{
			map[string]any{"text": plain("o"), "value": strings.Repeat("v", 151)}}}}}}, "[json-pointer:/blocks/0/elements/0/options/0/value]"},
		{"101 option groups", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "static_select", "option_groups": func() []any {
			g := make([]any, 101)
			for i := range g {
				g[i] = map[string]any{"label": plain("g"), "options": opts(1)}
			}
			return g
		}()}}}}, "no more than 100 items allowed [json-pointer:/blocks/0/elements/0/option_groups]"},
		{"overflow 6 options", []any{map[string]any{"type": "section", "text": mrkdwn("x"), "accessory": map[string]any{"type": "overflow", "options": opts(6)}}}, "no more than 5 items allowed"},
		{"radio 11 options", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "radio_buttons", "options": opts(11)}}}}, "no more than 10 items allowed"},
		{"plain_text_input in actions", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "plain_text_input"}}}}, "unsupported element type"},
		{"image without alt_text", []any{map[string]any{"type": "image", "image_url": "https://x/y.png"}}, "missing required field: alt_text"},
		{"image alt_text 2001", []any{map[string]any{"type": "image", "image_url": "https://x/y.png", "alt_text": strings.Repeat("a", 2001)}}, "[json-pointer:/blocks/0/alt_text]"},
		{"image url 3001", []any{map[string]any{"type": "image", "image_url": strings.Repeat("u", 3001), "alt_text": "a"}}, "[json-pointer:/blocks/0/image_url]"},
		{"markdown 12000", []any{map[string]any{"type": "markdown", "text": strings.Repeat("m", 12000)}}, ""},
		{"markdown cumulative 12001", []any{
			map[string]any{"type": "markdown", "text": strings.Repeat("m", 6000)},
			map[string]any{"type": "markdown", "text": strings.Repeat("m", 6001)},
		}, "in total [json-pointer:/blocks/1/text]"},
		{"confirm title 101", []any{map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "text": plain("b"), "confirm": map[string]any{
			"title": plain(strings.Repeat("t", 101)), "text": mrkdwn("x"), "confirm": plain("y"), "deny": plain("n")}}}}}, "[json-pointer:/blocks/0/elements/0/confirm/title/text]"},
		{"context actions", []any{map[string]any{"type": "context_actions", "elements": []any{map[string]any{
			"type": "feedback_buttons", "action_id": "fb",
			"positive_button": map[string]any{"text": plain("👍"), "value": "good"},
			"negative_button": map[string]any{"text": plain("👎"), "value": "bad"},
		}}}}, ""},
		{"rich text", []any{map[string]any{"type": "rich_text", "elements": []any{map[string]any{"type": "rich_text_section", "elements": []any{}}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.blocks)
			err := slacktest.ValidateBlocks(raw)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, got valid", tc.problem)
			}
			if !strings.HasPrefix(err.Error(), "invalid_blocks:") || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("error = %q, want invalid_blocks: …%s…", err, tc.problem)
			}
			var ve *slacktest.ValidationError
			if !errors.As(err, &ve) || ve.Code != "invalid_blocks" || len(ve.Problems) == 0 {
				t.Errorf("error %T %+v is not a *ValidationError", err, err)
			}
		})
	}
}

// Blocks built with slack-go's own builders encode to what the validator
// accepts.
func TestValidateBlocksAcceptsSlackGoBuilders(t *testing.T) {
	sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, slack.NewTextBlockObject(slack.PlainTextType, "Pick", false, false), "pick",
		slack.NewOptionBlockObject("a", slack.NewTextBlockObject(slack.PlainTextType, "A", false, false), nil))
	over := slack.NewOverflowBlockElement("more",
		slack.NewOptionBlockObject("x", slack.NewTextBlockObject(slack.PlainTextType, "X", false, false), nil))
	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "hi", false, false), nil, slack.NewAccessory(over)),
		slack.NewActionBlock("acts", sel, slack.NewButtonBlockElement("go", "go", slack.NewTextBlockObject(slack.PlainTextType, "Go", true, false))),
		slack.NewMarkdownBlock("md", "# Title\n\nbody"),
		slack.NewRichTextBlock("rt", slack.NewRichTextSection(slack.NewRichTextSectionTextElement("hello", nil))),
	}
	raw, _ := json.Marshal(blocks)
	if err := slacktest.ValidateBlocks(raw); err != nil {
		t.Fatal(err)
	}
}

func TestValidateView(t *testing.T) {
	input := map[string]any{"type": "input", "block_id": "q", "label": plain("Question"),
		"element": map[string]any{"type": "plain_text_input", "action_id": "text"}}
	base := func() map[string]any {
		return map[string]any{"type": "modal", "title": plain("Ask"), "submit": plain("Send"), "close": plain("Cancel"),
			"callback_id": "ask", "private_metadata": "m", "blocks": []any{input}}
	}
	for _, tc := range []struct {
		name    string
		mutate  func(map[string]any)
		problem string
	}{
		{"valid", func(map[string]any) {}, ""},
		{"title 24", func(v map[string]any) { v["title"] = plain(strings.Repeat("t", 24)) }, ""},
		{"title 25", func(v map[string]any) { v["title"] = plain(strings.Repeat("t", 25)) }, "must be less than 25 characters [json-pointer:/view/title/text]"},
		{"mrkdwn title", func(v map[string]any) { v["title"] = mrkdwn("t") }, "must be plain_text [json-pointer:/view/title/type]"},
		{"no title", func(v map[string]any) { delete(v, "title") }, "missing required field: title"},
		{"submit 25", func(v map[string]any) { v["submit"] = plain(strings.Repeat("s", 25)) }, "[json-pointer:/view/submit/text]"},
		{"close 25", func(v map[string]any) { v["close"] = plain(strings.Repeat("c", 25)) }, "[json-pointer:/view/close/text]"},
		{"inputs need submit", func(v map[string]any) { delete(v, "submit") }, "missing required field: submit"},
		{"callback_id 256", func(v map[string]any) { v["callback_id"] = strings.Repeat("c", 256) }, "[json-pointer:/view/callback_id]"},
		{"private_metadata 3001", func(v map[string]any) { v["private_metadata"] = strings.Repeat("p", 3001) }, "[json-pointer:/view/private_metadata]"},
		{"100 blocks", func(v map[string]any) { v["blocks"] = append(repeat(99), input) }, ""},
		{"101 blocks", func(v map[string]any) { v["blocks"] = repeat(101) }, "no more than 100 items allowed [json-pointer:/view/blocks]"},
		{"bad block", func(v map[string]any) {
			v["blocks"] = []any{map[string]any{"type": "header", "text": plain(strings.Repeat("h", 151))}}
		}, "[json-pointer:/view/blocks/0/text/text]"},
		{"markdown in a modal", func(v map[string]any) { v["blocks"] = []any{map[string]any{"type": "markdown", "text": "x"}} }, "unsupported block type in this surface"},
		{"not a modal", func(v map[string]any) { v["type"] = "home" }, "must be modal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := base()
			tc.mutate(v)
			raw, _ := json.Marshal(v)
			err := slacktest.ValidateView(raw)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "invalid_arguments:") || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("error = %v, want invalid_arguments: …%s…", err, tc.problem)
			}
		})
	}
}
