package guardrails

import (
	"fmt"
	"strings"
	"testing"
)

// What a stream costs in latency is how far what people see runs behind
// what the model wrote: at most the longest match a rule can make (the
// hold), plus the piece under way. Measured in bytes, not time: at a
// model's speed it is a time (docs/guardrails.md).
func TestAStreamRunsBehindByAtMostItsHold(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 100) // no match anywhere
	for _, c := range []struct {
		name string
		rule RuleSpec
		hold int
	}{
		{"credit_card", RuleSpec{Detector: "credit_card"}, 40},
		{"email", RuleSpec{Detector: "email"}, 345},
		{"pattern", RuleSpec{Pattern: `ACME-\d{6}`}, MaxPatternMatch},
	} {
		s := New(mustRule(t, Mask, c.rule)).NewStream()
		const piece = 4 // about a token
		shown, most := 0, 0
		for i := 0; i < len(text); i += piece {
			shown += len(s.Write(text[i:min(i+piece, len(text))]))
			most = max(most, min(i+piece, len(text))-shown)
		}
		rest, _ := s.Close()
		if shown+len(rest) != len(text) {
			t.Fatalf("%s: %d bytes shown in all, want %d", c.name, shown+len(rest), len(text))
		}
		if most > c.hold+piece || most < c.hold {
			t.Errorf("%s: ran up to %d bytes behind, want the hold (%d) and at most a piece more", c.name, most, c.hold)
		}
		t.Logf("%s: at most %d bytes (about %d tokens) behind", c.name, most, most/4)
	}
}

// BenchmarkStreamWrite is the CPU a guarded stream costs: each piece
// checks what is new and a hold of the text before it (a match may span
// pieces), so a reply costs O(n·hold/piece) in regular-expression work,
// linear in its length. A piece of 64 bytes is about
// what the sessions' delta merging (sessions.delta_interval, 200ms) makes
// of a model writing 80 tokens a second.
func BenchmarkStreamWrite(b *testing.B) {
	g := New(
		Rule{Name: "email", Action: Mask, With: "[email]", det: must(newDetector("email"))},
		Rule{Name: "credit_card", Action: Mask, With: "[card]", det: must(newDetector("credit_card"))},
		Rule{Name: "secret", Action: Block, det: must(newDetector("secret"))},
	)
	for _, size := range []int{1 << 10, 4 << 10, 16 << 10} {
		text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", size/45+1)[:size]
		b.Run(fmt.Sprintf("reply=%dKiB/piece=64B", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				s := g.NewStream()
				for i := 0; i < len(text); i += 64 {
					s.Write(text[i:min(i+64, len(text))])
				}
				s.Close()
			}
		})
	}
}

func must(d detector, ok bool) detector {
	if !ok {
		panic("no such detector")
	}
	return d
}
