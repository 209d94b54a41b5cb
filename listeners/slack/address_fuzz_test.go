package slack

import "testing"

// FuzzParseAddress: a place's address (a form's private metadata, which a
// client sends back) parses without a panic, and a place that parses is
// the same place when its address is made and parsed again.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"T1:C1:1700000000.000100", "T1:D1", "T1", "", ":::", "T1:C1:"} {
		f.Add(s)
	}
	l := &Listener{teamID: "T1"}
	f.Fuzz(func(t *testing.T, a string) {
		p, err := parseAddress(a)
		if err != nil {
			return
		}
		again, err := parseAddress(l.address(p))
		if err != nil || again != p {
			t.Fatalf("%q parses as %+v; its address %q parses as %+v, %v", a, p, l.address(p), again, err)
		}
	})
}
