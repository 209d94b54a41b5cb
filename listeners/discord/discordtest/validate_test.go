package discordtest_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

func TestValidateMessage(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	button := func(id string) string {
		return `{"type":2,"style":1,"label":"b","custom_id":"` + id + `"}`
	}
	row := func(items ...string) string { return `{"type":1,"components":[` + strings.Join(items, ",") + `]}` }
	options := func(n int) string {
		var o []string
		for i := range n {
			o = append(o, `{"label":"l","value":"v`+strings.Repeat("i", i+1)+`"}`)
		}
		return strings.Join(o, ",")
	}
	cases := []struct {
		name, payload string
		want          string // "" for valid; else a substring of the error
	}{
		{"plain", `{"content":"hi"}`, ""},
		{"nulls as discordgo sends them", `{"content":"hi","embeds":null,"components":null,"sticker_ids":null,"tts":false}`, ""},
		{"2000 chars", `{"content":"` + long(2000) + `"}`, ""},
		{"2001 chars", `{"content":"` + long(2001) + `"}`, "content[BASE_TYPE_MAX_LENGTH]: Must be 2000 or fewer in length."},
		{"multibyte counted as characters", `{"content":"` + strings.Repeat("é", 2000) + `"}`, ""},
		{"empty", `{}`, "50006 Cannot send an empty message"},
		{"empty content only", `{"content":""}`, "50006"},
		{"embed only", `{"embeds":[{"title":"t"}]}`, ""},
		{"11 embeds", `{"embeds":[` + strings.TrimSuffix(strings.Repeat(`{"title":"t"},`, 11), ",") + `]}`, "embeds[BASE_TYPE_MAX_LENGTH]"},
		{"embed title", `{"embeds":[{"title":"` + long(257) + `"}]}`, "embeds[0].title[BASE_TYPE_MAX_LENGTH]"},
		{"26 fields", `{"embeds":[{"fields":[` + strings.TrimSuffix(strings.Repeat(`{"name":"n","value":"v"},`, 26), ",") + `]}]}`, "embeds[0].fields[BASE_TYPE_MAX_LENGTH]"},
		{"field value", `{"embeds":[{"fields":[{"name":"n","value":"` + long(1025) + `"}]}]}`, "embeds[0].fields[0].value[BASE_TYPE_MAX_LENGTH]"},
		{"field without name", `{"embeds":[{"fields":[{"value":"v"}]}]}`, "embeds[0].fields[0].name[BASE_TYPE_REQUIRED]"},
		{"footer", `{"embeds":[{"footer":{"text":"` + long(2049) + `"}}]}`, "embeds[0].footer.text[BASE_TYPE_MAX_LENGTH]"},
		{"author", `{"embeds":[{"author":{"name":"` + long(257) + `"}}]}`, "embeds[0].author.name"},
		{"color", `{"embeds":[{"color":16777216}]}`, "embeds[0].color[NUMBER_TYPE_MAX]"},
		{"6000 total", `{"embeds":[{"description":"` + long(4000) + `"},{"description":"` + long(2001) + `"}]}`, "embeds[MAX_EMBED_SIZE_EXCEEDED]"},
		{"five buttons", `{"components":[` + row(button("a"), button("b"), button("c"), button("d"), button("e")) + `]}`, ""},
		{"six buttons", `{"components":[` + row(button("a"), button("b"), button("c"), button("d"), button("e"), button("f")) + `]}`, "components[0].components[BASE_TYPE_BAD_LENGTH]: Must be between 1 and 5 in length."},
		{"empty row", `{"content":"x","components":[` + row() + `]}`, "components[0].components[BASE_TYPE_BAD_LENGTH]"},
		{"button at top level", `{"components":[` + button("a") + `]}`, `components[0][UNION_TYPE_CHOICES]`},
		{"custom_id 101", `{"components":[` + row(button(long(101))) + `]}`, "components[0].components[0].custom_id[BASE_TYPE_MAX_LENGTH]"},
		{"duplicate custom_id across rows", `{"components":[` + row(button("a")) + `,` + row(button("a")) + `]}`, "components[1].components[0].custom_id[COMPONENT_CUSTOM_ID_DUPLICATED]"},
		{"button without custom_id", `{"components":[` + row(`{"type":2,"style":1,"label":"x"}`) + `]}`, "custom_id[BASE_TYPE_REQUIRED]"},
		{"link without url", `{"components":[` + row(`{"type":2,"style":5,"label":"x"}`) + `]}`, "url[BASE_TYPE_REQUIRED]"},
		{"link", `{"components":[` + row(`{"type":2,"style":5,"label":"x","url":"https://example.com"}`) + `]}`, ""},
		{"bad style", `{"components":[` + row(`{"type":2,"style":7,"label":"x","custom_id":"a"}`) + `]}`, "style[NUMBER_TYPE_MAX]"},
		{"25 options", `{"components":[` + row(`{"type":3,"custom_id":"s","options":[`+options(25)+`]}`) + `]}`, ""},
		{"26 options", `{"components":[` + row(`{"type":3,"custom_id":"s","options":[`+options(26)+`]}`) + `]}`, "components[0].components[0].options[BASE_TYPE_BAD_LENGTH]: Must be between 1 and 25 in length."},
		{"no options", `{"components":[` + row(`{"type":3,"custom_id":"s","options":[]}`) + `]}`, "options[BASE_TYPE_BAD_LENGTH]"},
		{"option label", `{"components":[` + row(`{"type":3,"custom_id":"s","options":[{"label":"`+long(101)+`","value":"v"}]}`) + `]}`, "options[0].label[BASE_TYPE_MAX_LENGTH]"},
		{"option description", `{"components":[` + row(`{"type":3,"custom_id":"s","options":[{"label":"l","value":"v","description":"`+long(101)+`"}]}`) + `]}`, "options[0].description"},
		{"duplicate option values", `{"components":[` + row(`{"type":3,"custom_id":"s","options":[{"label":"a","value":"v"},{"label":"b","value":"v"}]}`) + `]}`, "SELECT_COMPONENT_OPTION_VALUE_DUPLICATED"},
		{"placeholder", `{"components":[` + row(`{"type":3,"custom_id":"s","placeholder":"`+long(151)+`","options":[{"label":"a","value":"v"}]}`) + `]}`, "placeholder[BASE_TYPE_MAX_LENGTH]"},
		{"max_values above options", `{"components":[` + row(`{"type":3,"custom_id":"s","max_values":3,"options":[{"label":"a","value":"v"}]}`) + `]}`, "max_values"},
		{"min above max", `{"components":[` + row(`{"type":5,"custom_id":"u","min_values":3,"max_values":2}`) + `]}`, "min_values"},
		{"user select", `{"components":[` + row(`{"type":5,"custom_id":"u","max_values":2}`) + `]}`, ""},
		{"text input in a message", `{"components":[` + row(`{"type":4,"custom_id":"t","style":1,"label":"l"}`) + `]}`, "UNION_TYPE_CHOICES"},
		{"v2", `{"flags":32768,"components":[{"type":10,"content":"hello"}]}`, ""},
		{"v2 with content", `{"flags":32768,"content":"x","components":[{"type":10,"content":"hello"}]}`, "content[MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2]"},
		{"v2 with embeds", `{"flags":32768,"embeds":[{"title":"t"}],"components":[{"type":10,"content":"hello"}]}`, "embeds[MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2]"},
		{"v2 empty content string is fine", `{"flags":32768,"content":"","embeds":null,"components":[{"type":10,"content":"hello"}]}`, ""},
		{"v2 type in v1", `{"components":[{"type":10,"content":"hello"}]}`, `components[0][UNION_TYPE_CHOICES]: Value of field "type" must be one of (1,).`},
		{"v2 section without accessory", `{"flags":32768,"components":[{"type":9,"components":[{"type":10,"content":"a"}]}]}`, "components[0].accessory[BASE_TYPE_REQUIRED]"},
		{"v2 section with 4 texts", `{"flags":32768,"components":[{"type":9,"components":[{"type":10,"content":"a"},{"type":10,"content":"a"},{"type":10,"content":"a"},{"type":10,"content":"a"}],"accessory":{"type":11,"media":{"url":"https://x/y.png"}}}]}`, "components[0].components[BASE_TYPE_BAD_LENGTH]"},
		{"v2 gallery of 11", `{"flags":32768,"components":[{"type":12,"items":[` + strings.TrimSuffix(strings.Repeat(`{"media":{"url":"https://x/y.png"}},`, 11), ",") + `]}]}`, "components[0].items[BASE_TYPE_BAD_LENGTH]"},
		{"v2 file needs attachment url", `{"flags":32768,"components":[{"type":13,"file":{"url":"https://x/y.txt"}}]}`, "components[0].file.url"},
		{"v2 nested count", `{"flags":32768,"components":[{"type":17,"components":[` + strings.TrimSuffix(strings.Repeat(`{"type":10,"content":"a"},`, 40), ",") + `]}]}`, "components[BASE_TYPE_MAX_LENGTH]: Must be 40 or fewer in length."},
		{"v2 container in container", `{"flags":32768,"components":[{"type":17,"components":[{"type":17,"components":[{"type":10,"content":"a"}]}]}]}`, "components[0].components[0][UNION_TYPE_CHOICES]"},
		{"v2 text 4000", `{"flags":32768,"components":[{"type":10,"content":"` + long(2000) + `"},{"type":10,"content":"` + long(2000) + `"}]}`, ""},
		{"v2 text 4001", `{"flags":32768,"components":[{"type":10,"content":"` + long(2000) + `"},{"type":10,"content":"` + long(2001) + `"}]}`, "MAX_TEXT_DISPLAY_LENGTH_EXCEEDED"},
		{"11 attachments", `{"attachments":[` + strings.TrimSuffix(strings.Repeat(`{"id":0},`, 11), ",") + `]}`, "attachments[BASE_TYPE_MAX_LENGTH]"},
		{"not an object", `[]`, "MODEL_TYPE_CONVERT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := discordtest.ValidateMessage(json.RawMessage(tc.payload))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("no error, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			case tc.want != "" && !strings.HasPrefix(tc.want, "50006") && !strings.HasPrefix(err.Error(), "50035 Invalid Form Body: "):
				t.Errorf("error %q does not start with 50035", err)
			}
			var de *discordtest.Error
			if err != nil && !errors.As(err, &de) {
				t.Errorf("error %T is not *discordtest.Error", err)
			}
		})
	}
}

func TestValidateModal(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	input := func(extra string) string {
		return `{"type":1,"components":[{"type":4,"custom_id":"q","style":2,"label":"Question"` + extra + `}]}`
	}
	cases := []struct {
		name, payload, want string
	}{
		{"valid", `{"custom_id":"m","title":"Ask","components":[` + input("") + `]}`, ""},
		{"title 45", `{"custom_id":"m","title":"` + long(45) + `","components":[` + input("") + `]}`, ""},
		{"title 46", `{"custom_id":"m","title":"` + long(46) + `","components":[` + input("") + `]}`, "title[BASE_TYPE_MAX_LENGTH]: Must be 45 or fewer in length."},
		{"no title", `{"custom_id":"m","components":[` + input("") + `]}`, "title[BASE_TYPE_REQUIRED]"},
		{"custom_id 101", `{"custom_id":"` + long(101) + `","title":"t","components":[` + input("") + `]}`, "custom_id[BASE_TYPE_MAX_LENGTH]"},
		{"no components", `{"custom_id":"m","title":"t","components":[]}`, "components[BASE_TYPE_BAD_LENGTH]: Must be between 1 and 5 in length."},
		{"six rows", `{"custom_id":"m","title":"t","components":[` + strings.TrimSuffix(strings.Repeat(input("")+",", 6), ",") + `]}`, "components[BASE_TYPE_BAD_LENGTH]"},
		{"two inputs in a row", `{"custom_id":"m","title":"t","components":[{"type":1,"components":[{"type":4,"custom_id":"a","style":1,"label":"a"},{"type":4,"custom_id":"b","style":1,"label":"b"}]}]}`, "components[0].components[BASE_TYPE_BAD_LENGTH]: Must be between 1 and 1 in length."},
		{"button in a modal", `{"custom_id":"m","title":"t","components":[{"type":1,"components":[{"type":2,"style":1,"custom_id":"b","label":"b"}]}]}`, "components[0].components[0][UNION_TYPE_CHOICES]"},
		{"label 46", `{"custom_id":"m","title":"t","components":[` + input(`,"label":"`+long(46)+`"`) + `]}`, "label[BASE_TYPE_MAX_LENGTH]"},
		{"style 3", `{"custom_id":"m","title":"t","components":[{"type":1,"components":[{"type":4,"custom_id":"a","style":3,"label":"a"}]}]}`, "style[NUMBER_TYPE_MAX]"},
		{"value 4001", `{"custom_id":"m","title":"t","components":[` + input(`,"value":"`+long(4001)+`"`) + `]}`, "value[BASE_TYPE_MAX_LENGTH]"},
		{"max_length 4001", `{"custom_id":"m","title":"t","components":[` + input(`,"max_length":4001`) + `]}`, "max_length[NUMBER_TYPE_MAX]"},
		{"min above max", `{"custom_id":"m","title":"t","components":[` + input(`,"min_length":10,"max_length":5`) + `]}`, "min_length"},
		{"placeholder 101", `{"custom_id":"m","title":"t","components":[` + input(`,"placeholder":"`+long(101)+`"`) + `]}`, "placeholder[BASE_TYPE_MAX_LENGTH]"},
		{"duplicate custom ids", `{"custom_id":"m","title":"t","components":[` + input("") + `,` + input("") + `]}`, "COMPONENT_CUSTOM_ID_DUPLICATED"},
		{"label component", `{"custom_id":"m","title":"t","components":[{"type":18,"label":"Question","component":{"type":4,"custom_id":"q","style":1}},{"type":10,"content":"hint"}]}`, ""},
		{"label component with select", `{"custom_id":"m","title":"t","components":[{"type":18,"label":"Pick","component":{"type":3,"custom_id":"s","options":[{"label":"a","value":"a"}]}}]}`, ""},
		{"label without component", `{"custom_id":"m","title":"t","components":[{"type":18,"label":"Question"}]}`, "components[0].component[BASE_TYPE_REQUIRED]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := discordtest.ValidateModal(json.RawMessage(tc.payload))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("no error, want %q", tc.want)
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "50035")):
				t.Errorf("error %q, want it to start with 50035 and contain %q", err, tc.want)
			}
		})
	}
}
