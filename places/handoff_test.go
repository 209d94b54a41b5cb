package places_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

func TestHandoff(t *testing.T) {
	star := func(s string) string { return strings.ReplaceAll(s, "*", `\*`) }
	for _, tc := range []struct {
		d    switchboard.HandoffData
		want string
	}{
		{switchboard.HandoffData{From: "support", To: "billing", Reason: "an *invoice*\nquestion"}, `Passed to billing: an \*invoice\* question`},
		{switchboard.HandoffData{From: "support", To: "billing", Reason: "  "}, "Passed to billing."},
		{switchboard.HandoffData{To: "billing", Reason: strings.Repeat("é", 400)}, "Passed to billing: " + strings.Repeat("é", places.MaxHandoffReason-1) + "…"},
	} {
		if got := places.Handoff(tc.d, star); got != tc.want {
			t.Errorf("Handoff(%+v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
