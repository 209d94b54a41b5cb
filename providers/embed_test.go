package providers_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard/providers"
)

func TestCutUTF8(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"}, {"hello", 3, "hel"}, {"héllo", 2, "h"}, {"héllo", 3, "hé"}, {"日本", 4, "日"}, {"日本", 2, ""},
	} {
		if got := providers.CutUTF8(c.s, c.n); got != c.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	long := strings.Repeat("ü😀a", 1000)
	for n := range 40 {
		if got := providers.CutUTF8(long, n); len(got) > n || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
			t.Fatalf("CutUTF8(…, %d) = %q", n, got)
		}
	}
}

func TestEmbedBatches(t *testing.T) {
	texts := []string{"aaaa", "bb", "cccccc", "d", "eeeeeeeeee", "f"}
	for _, c := range []struct {
		inputs, bytes int
		want          []int
	}{
		{10, 100, []int{6}},
		{2, 100, []int{2, 4, 6}},
		{10, 7, []int{2, 4, 5, 6}}, // eeeeeeeeee is a batch of its own
		{1, 1, []int{1, 2, 3, 4, 5, 6}},
	} {
		if got := providers.EmbedBatches(texts, c.inputs, c.bytes); !reflect.DeepEqual(got, c.want) {
			t.Errorf("EmbedBatches(%d, %d) = %v, want %v", c.inputs, c.bytes, got, c.want)
		}
	}
	if got := providers.EmbedBatches(nil, 10, 10); len(got) != 0 {
		t.Errorf("no texts: %v", got)
	}
}
