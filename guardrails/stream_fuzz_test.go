package guardrails

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever the text and however it is cut, a stream shows what Check
// gives the whole, never cuts a character, and never shows a blocked
// text's phrase.
func FuzzStream(f *testing.F) {
	f.Add("Card 4111 1111 1111 1111 and ann@example.com, secret sk-abcdefghijklmnopqrstuvwxyz.", uint8(3))
	f.Add("héllo wörld ✓ +49 30 1234567 DE89 3704 0044 0532 0130 00", uint8(1))
	f.Add("no forbidden words here, FORBIDDEN there", uint8(7))
	var rules []Rule
	for _, d := range Detectors() {
		r, _ := Compile(Mask, RuleSpec{Detector: d}, 1)
		rules = append(rules, r)
	}
	blk, _ := Compile(Block, RuleSpec{Pattern: `FORBIDDEN`}, 1)
	masks, both := New(rules...), New(append(rules, blk)...)
	f.Fuzz(func(t *testing.T, text string, size uint8) {
		n := int(size%16) + 1
		for _, g := range []*Guard{masks, both} {
			s := g.NewStream()
			var shown strings.Builder
			for i := 0; i < len(text); i += n {
				piece := s.Write(text[i:min(i+n, len(text))])
				if utf8.ValidString(text) && !utf8.ValidString(piece) {
					t.Fatalf("a character cut: %q", piece)
				}
				shown.WriteString(piece)
			}
			rest, whole := s.Close()
			want := g.Check(text)
			if whole.Text != want.Text || (whole.Blocked == nil) != (want.Blocked == nil) {
				t.Fatalf("whole %+v, Check %+v", whole, want)
			}
			if want.Blocked != nil {
				if strings.Contains(shown.String(), "FORBIDDEN") {
					t.Fatalf("a blocked phrase shown: %q", shown.String())
				}
				continue
			}
			if got := shown.String() + rest; got != want.Text {
				t.Fatalf("shown %q, want %q", got, want.Text)
			}
		}
	})
}
