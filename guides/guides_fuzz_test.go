package guides

import (
	"strings"
	"testing"
)

// FuzzParse: any file in the guides folder parses without a panic, and an
// error names the file (with its line where there is one); a guide that
// parses has a usable name and a window within bounds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"---\nname: support\ntools: [current_time]\napproval: { default: ask }\n---\nYou help.\n",
		"---\nmemory: { policy: sliding-window, window: 20 }\n---\n",
		"---\nguardrails:\n  input: {mask: [email, {pattern: 'a+b', with: x}], block: [{pattern: z, message: no}]}\n  output: {mask: [secret]}\n---\nHi.\n",
		"---\n---\n", "no front matter", "---\nname: [\n---\n", "\ufeff---\ntemperature: 9\n---\nx",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		g, err := Parse("guides/fuzz.md", []byte(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "guides/fuzz.md") {
				t.Fatalf("an error that does not name the file: %v", err)
			}
			return
		}
		if !validName.MatchString(g.Name) {
			t.Fatalf("a guide named %q parsed", g.Name)
		}
	})
}
