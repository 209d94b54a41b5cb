package switchboard_test

import (
	"encoding/json"
	"reflect"
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

// Every event type issue 30 adds decodes to its payload type.
func TestPayloadOfCooperationEvents(t *testing.T) {
	for _, c := range []struct {
		typ  switchboard.EventType
		data string
		want any
	}{
		{switchboard.EventHandoff, `{"from":"support","to":"billing","reason":"a refund"}`, &switchboard.HandoffData{From: "support", To: "billing", Reason: "a refund"}},
		{switchboard.EventPlan, `{"steps":[{"title":"Find the order","status":"done"}]}`, &switchboard.PlanData{Steps: []switchboard.PlanStep{{Title: "Find the order", Status: switchboard.PlanDone}}}},
		{switchboard.EventGuardrail, `{"side":"input","rule":"email","action":"mask","count":2,"for":"slack:U1"}`, &switchboard.GuardrailData{Side: "input", Rule: "email", Action: "mask", Count: 2, For: "slack:U1"}},
	} {
		p, err := switchboard.Event{Seq: 1, Type: c.typ, Data: json.RawMessage(c.data)}.Payload()
		if err != nil || !reflect.DeepEqual(p, c.want) {
			t.Errorf("%s: %#v, %v; want %#v", c.typ, p, err, c.want)
		}
	}
}
