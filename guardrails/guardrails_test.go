package guardrails

import (
	"strings"
	"testing"
)

func mustRule(t testing.TB, a Action, spec RuleSpec) Rule {
	t.Helper()
	r, err := Compile(a, spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDetectorsFindTheirKindAndNotLookAlikes(t *testing.T) {
	for _, c := range []struct {
		detector string
		finds    []string
		ignores  []string
	}{
		{"email", []string{"ann.lee+work@example.co.uk", "x@y.io"}, []string{"@example.com", "ann at example dot com", "a@b"}},
		{"phone", []string{"+49 30 1234567", "030 1234 5678", "(030) 123-4567", "+1-202-555-0143"}, []string{"2026-11-27", "12.50 EUR", "version 1.2.3", "+49 12"}},
		{"iban", []string{"DE89 3704 0044 0532 0130 00", "GB29NWBK60161331926819"}, []string{"DE89 3704 0044 0532 0130 01", "AB12 CDEF"}},
		{"credit_card", []string{"4111 1111 1111 1111", "5500-0000-0000-0004", "4012888888881881"}, []string{"4111 1111 1111 1112", "1234 5678", "order 2026112700001"}},
		{"secret", []string{"sk-proj-abcdefghijklmnopqrstuvwx", "AKIAIOSFODNN7EXAMPLE", "ghp_" + strings.Repeat("a1", 18), "xoxb-1234567890-abc", "-----BEGIN RSA PRIVATE KEY-----"}, []string{"sk-short", "skip this", "AKIA-not"}},
	} {
		r := mustRule(t, Mask, RuleSpec{Detector: c.detector})
		g := New(r)
		for _, s := range c.finds {
			text := "see " + s + " here"
			res := g.Check(text)
			if want := "see [" + c.detector + "] here"; res.Text != want {
				t.Errorf("%s: %q masked to %q, want %q", c.detector, text, res.Text, want)
			}
		}
		for _, s := range c.ignores {
			if res := g.Check(s); res.Text != s || len(res.Decisions) != 0 {
				t.Errorf("%s: %q masked to %q: not one", c.detector, s, res.Text)
			}
		}
	}
}

func TestABlockRefusesTheWholeTextAndNamesTheRuleNotTheMatch(t *testing.T) {
	g := New(
		mustRule(t, Mask, RuleSpec{Detector: "email"}),
		mustRule(t, Block, RuleSpec{Name: "no-passwords", Pattern: `(?i)password\s*[:=]\s*\S+`, Message: "Please never send passwords here."}),
	)
	res := g.Check("my email is a@b.io and password: hunter2")
	if res.Blocked == nil || res.Text != "Please never send passwords here." {
		t.Fatalf("result %+v: want the block's message", res)
	}
	if len(res.Decisions) != 1 || res.Decisions[0] != (Decision{Rule: "no-passwords", Action: Block, Count: 1}) {
		t.Errorf("decisions %+v", res.Decisions)
	}
	if strings.Contains(res.Text, "hunter2") {
		t.Error("the matched text is in the result")
	}
	res = g.Check("Write to a@b.io or c@d.io.")
	if res.Blocked != nil || res.Text != "Write to [email] or [email]." {
		t.Errorf("masked to %+v", res)
	}
	if len(res.Decisions) != 1 || res.Decisions[0].Count != 2 {
		t.Errorf("decisions %+v, want email twice", res.Decisions)
	}
}

func TestAnEarlierMaskWinsWhereTwoOverlap(t *testing.T) {
	g := New(
		mustRule(t, Mask, RuleSpec{Name: "ticket", Pattern: `ACME-\d+`, With: "[ticket]"}),
		mustRule(t, Mask, RuleSpec{Pattern: `\d{4,}`}),
	)
	if res := g.Check("ACME-123456 and 98765"); res.Text != "[ticket] and [mask 1]" {
		t.Errorf("got %q", res.Text)
	}
}

func TestCompileRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		a    Action
		spec RuleSpec
		want string
	}{
		{Mask, RuleSpec{}, "needs a detector"},
		{Mask, RuleSpec{Detector: "ssn"}, `no detector "ssn"`},
		{Mask, RuleSpec{Detector: "email", Pattern: "x"}, "not both"},
		{Block, RuleSpec{Pattern: "("}, "pattern"},
		{Block, RuleSpec{Pattern: "a*"}, "matches empty text"},
		{Block, RuleSpec{Pattern: "x", With: "y"}, "with is for masks"},
		{Mask, RuleSpec{Pattern: "x", Message: "y"}, "message is for blocks"},
	} {
		if _, err := Compile(c.a, c.spec, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.a, c.spec, err, c.want)
		}
	}
}

// A streamed text shows, piece by piece, exactly what Check gives the
// whole: a mask is never cut, and what it hides never shows.
func TestAStreamShowsWhatCheckGivesAndNothingItHides(t *testing.T) {
	g := New(mustRule(t, Mask, RuleSpec{Detector: "credit_card"}), mustRule(t, Mask, RuleSpec{Detector: "email"}))
	text := strings.Repeat("Some words before. ", 20) + "Card 4111 1111 1111 1111, mail ann@example.com." + strings.Repeat(" And after.", 30)
	for _, size := range []int{1, 3, 7, 64} {
		s := g.NewStream()
		var shown strings.Builder
		for i := 0; i < len(text); i += size {
			shown.WriteString(s.Write(text[i:min(i+size, len(text))]))
			if strings.Contains(shown.String(), "4111") || strings.Contains(shown.String(), "ann@") {
				t.Fatalf("pieces of %d: hidden text shown: %q", size, shown.String())
			}
		}
		rest, whole := s.Close()
		shown.WriteString(rest)
		if want := g.Check(text).Text; shown.String() != want || whole.Text != want {
			t.Errorf("pieces of %d: shown %q, whole %q, want %q", size, shown.String(), whole.Text, want)
		}
	}
}

// A blocked phrase is never shown, even in part: the stream stops and
// Close gives the block's message.
func TestAStreamStopsBeforeABlockedPhrase(t *testing.T) {
	g := New(mustRule(t, Block, RuleSpec{Pattern: `(?i)internal use only`, Message: "Withheld."}))
	text := strings.Repeat("Fine text here. ", 40) + "This is INTERNAL USE ONLY material." + strings.Repeat(" More.", 10)
	s := g.NewStream()
	var shown strings.Builder
	for i := 0; i < len(text); i += 5 {
		shown.WriteString(s.Write(text[i:min(i+5, len(text))]))
	}
	rest, whole := s.Close()
	if rest != "" || whole.Blocked == nil || whole.Text != "Withheld." {
		t.Fatalf("rest %q, whole %+v", rest, whole)
	}
	if strings.Contains(strings.ToLower(shown.String()), "internal") {
		t.Errorf("part of the blocked phrase was shown: %q", shown.String())
	}
	if !s.Shown() {
		t.Error("text before the phrase was shown, and Shown says not: the caller would not replace it")
	}
}

func TestANilGuardLetsEverythingThrough(t *testing.T) {
	var g *Guard
	if res := g.Check("a@b.io"); res.Text != "a@b.io" || res.Blocked != nil {
		t.Errorf("%+v", res)
	}
	s := g.NewStream()
	if got := s.Write("abc"); got != "abc" {
		t.Errorf("write %q", got)
	}
	s.Write("def")
	// The whole is the text (a caller takes its answer from it), and
	// nothing is left to show.
	if rest, whole := s.Close(); rest != "" || whole.Text != "abcdef" || whole.Blocked != nil || !s.Shown() {
		t.Errorf("close: rest %q, whole %+v, shown %v", rest, whole, s.Shown())
	}
	if New() != nil {
		t.Error("New() of no rules is not nil")
	}
}
