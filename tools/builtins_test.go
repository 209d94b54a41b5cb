package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCurrentTime(t *testing.T) {
	fixed := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	r, err := NewRegistry(Builtins(func() time.Time { return fixed })...)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args, want string
	}{
		{`{"timezone": "Europe/Berlin"}`, "2026-11-22T11:30:00+01:00 (Sunday, Europe/Berlin)"},
		{`{"timezone": "America/New_York"}`, "2026-11-22T05:30:00-05:00 (Sunday, America/New_York)"},
		{`{"timezone": "Pacific/Kiritimati"}`, "2026-11-23T00:30:00+14:00 (Monday, Pacific/Kiritimati)"},
		{`{}`, "2026-11-22T10:30:00Z (Sunday, UTC)"},
		{``, "2026-11-22T10:30:00Z (Sunday, UTC)"},
		{`{"timezone": ""}`, "2026-11-22T10:30:00Z (Sunday, UTC)"},
	}
	for _, tt := range tests {
		res, err := r.Run(context.Background(), "current_time", json.RawMessage(tt.args))
		if err != nil {
			t.Fatalf("current_time %s: %v", tt.args, err)
		}
		if res.Content != tt.want {
			t.Errorf("current_time %s = %q, want %q", tt.args, res.Content, tt.want)
		}
	}
}

func TestCurrentTimeUnknownZone(t *testing.T) {
	r, err := NewRegistry(Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, zone := range []string{"Mars/Olympus_Mons", "Local", "../../etc/passwd"} {
		args, _ := json.Marshal(map[string]string{"timezone": zone})
		_, err := r.Run(context.Background(), "current_time", args)
		if err == nil {
			t.Fatalf("current_time %s: no error", zone)
		}
		if !strings.Contains(err.Error(), `unknown time zone "`+zone+`"`) {
			t.Errorf("current_time %s: error %q does not name the zone", zone, err)
		}
	}
}

func TestCalculatorTool(t *testing.T) {
	r, err := NewRegistry(Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), "calculator", json.RawMessage(`{"expression": "2 * (3 + 4) ^ 2 / 7"}`))
	if err != nil || res.Content != "14" || res.UI != nil {
		t.Fatalf("calculator = %+v, %v; want 14", res, err)
	}
}
