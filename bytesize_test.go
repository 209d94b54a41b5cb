package switchboard_test

import (
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// Sizes read as people say them, with the unit changing at 1 KiB and 1 MiB.
func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1<<20 - 1, "1024.0 KiB"},
		{1 << 20, "1.0 MiB"},
		{20 << 20, "20.0 MiB"},
	} {
		if got := switchboard.ByteSize(c.n); got != c.want {
			t.Errorf("ByteSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
