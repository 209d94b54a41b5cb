package tools

import (
	"strconv"
	"testing"
)

// FuzzParseActionID: any action id a client sends parses without a panic,
// and one that parses is of a known kind and says the same when made again.
func FuzzParseActionID(f *testing.F) {
	for _, s := range []string{"ui_1:button:0", "ui_1:select", "ui_1:form", "ui_1:button:-1", "ui_1:button:01", ":button:0", "a:b:c:d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ui, kind, i, err := ParseActionID(id)
		if err != nil {
			return
		}
		again := ui + ":" + kind
		switch kind {
		case ActionButton:
			again += ":" + strconv.Itoa(i)
		case ActionSelect, ActionForm:
		default:
			t.Fatalf("%q parsed as kind %q", id, kind)
		}
		if again != id || ui == "" || i < 0 {
			t.Fatalf("%q parsed as %q %q %d", id, ui, kind, i)
		}
	})
}
