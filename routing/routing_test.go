package routing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
)

func table(t *testing.T, rules []RuleSpec, r *Router) *Table {
	t.Helper()
	tb, err := New(rules, r, "assistant")
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

var slackThread = Conversation{Channel: "slack", Places: []string{"T1", "C0FINANCE", "1700000000.000100"}, Person: "slack:U1", Text: "Hi"}

func TestTheFirstMatchingRuleChooses(t *testing.T) {
	tb := table(t, []RuleSpec{
		{Guide: "finance", Channel: "slack", Place: "C0FINANCE"},
		{Guide: "billing", Match: `(?i)\b(refund|invoice)s?\b`},
		{Guide: "support", Keywords: []string{"broken", "does not work"}},
		{Guide: "vip", Person: "discord:42"},
	}, nil)
	for _, c := range []struct {
		conv Conversation
		want Decision
	}{
		{slackThread, Decision{Guide: "finance", By: ByRule, Rule: 0}},
		{Conversation{Channel: "slack", Places: []string{"T1", "C0OTHER"}, Text: "Where is my INVOICE?"}, Decision{Guide: "billing", By: ByRule, Rule: 1}},
		{Conversation{Channel: "web", Text: "It DOES NOT WORK at all"}, Decision{Guide: "support", By: ByRule, Rule: 2}},
		{Conversation{Channel: "web", Text: "brokenness"}, Decision{Guide: "assistant", By: ByDefault}},
		{Conversation{Channel: "discord", Person: "discord:42", Text: "hello"}, Decision{Guide: "vip", By: ByRule, Rule: 3}},
		{Conversation{Channel: "discord", Person: "discord:7", Text: "hello"}, Decision{Guide: "assistant", By: ByDefault}},
	} {
		if got := tb.Route(context.Background(), c.conv); got != c.want {
			t.Errorf("%+v: %+v, want %+v", c.conv, got, c.want)
		}
	}
}

type chooser func(ctx context.Context, system, prompt string) (string, error)

func (f chooser) Choose(ctx context.Context, system, prompt string) (string, error) {
	return f(ctx, system, prompt)
}

var candidates = []Candidate{{"billing", "Invoices, refunds and payments"}, {"support", "Help with the product"}}

func TestTheRouterPicksAmongItsCandidates(t *testing.T) {
	var asked string
	tb := table(t, nil, &Router{Candidates: candidates, Chooser: chooser(func(_ context.Context, system, prompt string) (string, error) {
		asked = system + "\n" + prompt
		return " \"Billing\".", nil
	})})
	if got := tb.Route(context.Background(), Conversation{Text: "I was charged twice"}); got != (Decision{Guide: "billing", By: ByRouter}) {
		t.Errorf("decision %+v", got)
	}
	if !strings.Contains(asked, "billing: Invoices, refunds and payments") || !strings.Contains(asked, "I was charged twice") {
		t.Errorf("the model was asked %q", asked)
	}
}

func TestTheRouterFallsBackToTheDefault(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer string
		err    error
		want   string
	}{
		{"an answer naming none", "I cannot tell", nil, "named no guide"},
		{"an answer naming two", "billing or support", nil, "named no guide"},
		{"an error", "", errors.New("HTTP 500"), "the router failed: HTTP 500"},
	} {
		tb := table(t, nil, &Router{Candidates: candidates, Chooser: chooser(func(context.Context, string, string) (string, error) { return c.answer, c.err })})
		got := tb.Route(context.Background(), Conversation{Text: "hello"})
		if got.Guide != "assistant" || got.By != ByDefault || !strings.Contains(got.Fallback, c.want) {
			t.Errorf("%s: %+v, want the default because %q", c.name, got, c.want)
		}
	}
}

// A router that does not answer in time: the default, once the timeout
// has passed (in the bubble's clock).
func TestTheRoutersTimeoutFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := table(t, nil, &Router{Candidates: candidates, Chooser: chooser(func(ctx context.Context, _, _ string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})})
		got := tb.Route(context.Background(), Conversation{Text: "hello"})
		if got.Guide != "assistant" || got.By != ByDefault || got.Fallback != "the router did not answer within 3s" {
			t.Errorf("%+v", got)
		}
	})
}

func TestUnreachableRulesAreFound(t *testing.T) {
	tb := table(t, []RuleSpec{
		{Guide: "finance", Channel: "slack"},
		{Guide: "billing", Channel: "slack", Place: "C1"},                     // slack already goes to finance
		{Guide: "support", Channel: "discord", Keywords: []string{"help"}},    // reachable
		{Guide: "other", Channel: "discord", Keywords: []string{"help", "x"}}, // different keywords: reachable
		{Guide: "all"},
		{Guide: "never", Person: "web:1"},
	}, &Router{Candidates: candidates})
	got := tb.Unreachable()
	if len(got) != 2 || !strings.Contains(got[1], "rule 0 (guide finance)") || !strings.Contains(got[5], "rule 4 (guide all)") {
		t.Errorf("unreachable %v", got)
	}
	if !tb.RouterUnreachable() {
		t.Error("a catch-all rule leaves the router unreachable, and it is not reported")
	}
	if d := Describe(tb.Rules()[1]); d != "channel slack, place C1 → billing" {
		t.Errorf("describe %q", d)
	}
}

func TestNewRefusesBadRules(t *testing.T) {
	for _, c := range []struct {
		rule RuleSpec
		want string
	}{
		{RuleSpec{Channel: "slack"}, "routing.rules[0].guide"},
		{RuleSpec{Guide: "a", Match: "("}, "routing.rules[0].match"},
		{RuleSpec{Guide: "a", Keywords: []string{" "}}, "routing.rules[0].keywords[0]"},
	} {
		if _, err := New([]RuleSpec{c.rule}, nil, "assistant"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.rule, err, c.want)
		}
	}
}
