package switchboard_test

import (
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// Why tells an expiry or a cancellation by Reason; an event stored before
// Reason existed by By alone, without a Channel; a person's answer, whatever
// their name, by neither.
func TestConfirmationResolvedWhy(t *testing.T) {
	for _, tt := range []struct {
		d    switchboard.ConfirmationResolvedData
		want string
	}{
		{switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, switchboard.ReasonExpired},
		{switchboard.ConfirmationResolvedData{By: "Ann", Reason: switchboard.ReasonCancelled}, switchboard.ReasonCancelled},
		{switchboard.ConfirmationResolvedData{By: "expired"}, switchboard.ReasonExpired},
		{switchboard.ConfirmationResolvedData{By: "cancelled"}, switchboard.ReasonCancelled},
		{switchboard.ConfirmationResolvedData{By: "Expired"}, ""},
		{switchboard.ConfirmationResolvedData{By: "Ann"}, ""},
		{switchboard.ConfirmationResolvedData{By: "expired", Channel: "web"}, ""},
		{switchboard.ConfirmationResolvedData{By: "cancelled", Channel: "slack"}, ""},
		{switchboard.ConfirmationResolvedData{Approved: true, By: "expired"}, ""},
	} {
		if got := tt.d.Why(); got != tt.want {
			t.Errorf("%+v.Why() = %q, want %q", tt.d, got, tt.want)
		}
	}
}
