package places_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

func line(name string, failed bool, took time.Duration) string {
	if failed {
		return name + " failed · " + places.Duration(took)
	}
	return "used " + name + " · " + places.Duration(took)
}

// A call's line counts from its approval, a denied call and a card have
// none, a replay changes nothing, and a reply takes the lines ready when
// it starts.
func TestToolNotes(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var n places.ToolNotes
	events := []struct {
		p   any
		ms  int
		new bool
	}{
		{&switchboard.ToolCallData{ID: "c1", Name: "current_time"}, 0, true},
		{&switchboard.ToolCallData{ID: "c1", Name: "current_time"}, 0, false}, // replayed
		{&switchboard.ConfirmationRequestData{ConfirmationID: "k1", ToolCallID: "c1"}, 10, true},
		{&switchboard.ConfirmationResolvedData{ConfirmationID: "k1", Approved: true}, 5000, true},
		{&switchboard.ToolResponseData{ToolCallID: "c1"}, 5200, true},
		{&switchboard.ToolCallData{ID: "c2", Name: "present"}, 5300, false}, // a card: its own output
		{&switchboard.ToolCallData{ID: "c3", Name: "delete_all"}, 5400, true},
		{&switchboard.ConfirmationRequestData{ConfirmationID: "k3", ToolCallID: "c3"}, 5400, true},
		{&switchboard.ConfirmationResolvedData{ConfirmationID: "k3", Approved: false}, 6000, true}, // its card says so
		{&switchboard.ToolCallData{ID: "c4", Name: "lookup"}, 7000, true},
		{&switchboard.ToolResponseData{ToolCallID: "c4", IsError: true}, 8500, true},
	}
	for i, e := range events {
		if got := n.Note(e.p, at(e.ms), line); got != e.new {
			t.Fatalf("event %d (%T): changed %v, want %v", i, e.p, got, e.new)
		}
	}
	lines, changed := n.For("r1")
	if want := []string{"used current_time · 0.2 s", "lookup failed · 1.5 s"}; !changed || !slices.Equal(lines, want) {
		t.Fatalf("For = %q %v, want %q", lines, changed, want)
	}
	if again, changed := n.For("r1"); changed || len(again) != 2 {
		t.Fatalf("For again = %q %v", again, changed)
	}
	if n.Take() != nil {
		t.Fatal("Take took lines a reply shows")
	}
	if !n.Shown("r1") || len(n) != 0 {
		t.Fatalf("after Shown: %+v", n)
	}
}

func TestCountedAndDuration(t *testing.T) {
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprint(i))
	}
	got := places.Counted(lines, func(n int) string { return fmt.Sprintf("and %d more", n) })
	if len(got) != places.LinesShown || got[len(got)-1] != "and 13 more" {
		t.Fatalf("Counted = %q", got)
	}
	for d, want := range map[time.Duration]string{50 * time.Millisecond: "<0.1 s", 1500 * time.Millisecond: "1.5 s", 14 * time.Second: "14 s", 125 * time.Second: "2 min 5 s"} {
		if got := places.Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
