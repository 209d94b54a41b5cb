package guides

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	supportHandoffs = "---\ndescription: Support\nhandoffs: [billing]\n---\nYou are support.\n"
	billingHandoffs = "---\ndescription: Billing\nhandoffs:\n  - support\n---\nYou are billing.\n"
)

// handingOff is a catalog of support and billing, which hand off to each
// other, and its folder.
func handingOff(t *testing.T) (string, *Catalog) {
	t.Helper()
	dir := t.TempDir()
	writeGuide(t, dir, "support.md", supportHandoffs)
	writeGuide(t, dir, "billing.md", billingHandoffs)
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

func TestParseHandoffs(t *testing.T) {
	g, err := Parse("guides/support.md", []byte("---\nhandoffs: [billing, sales]\n---\nYou help.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Handoffs, []string{"billing", "sales"}) {
		t.Fatalf("handoffs = %v", g.Handoffs)
	}
	for _, tc := range []struct{ src, want string }{
		{"---\nhandoffs: [billing, support]\n---\nx\n", `guides/support.md:2: handoffs: "support" is this guide itself`},
		{"---\nname: support\nhandoffs:\n  - billing\n  - billing\n---\nx\n", `guides/support.md:5: handoffs: "billing" is listed twice`},
		{"---\nhandoffs: billing\n---\nx\n", `guides/support.md:2: handoffs: must be a list`},
		{"---\nhandoffs: [\"bill ing\"]\n---\nx\n", `guides/support.md:2: handoffs: "bill ing" is not a guide's name`},
	} {
		_, err := Parse("guides/support.md", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.src, err, tc.want)
		}
	}
}

// Every guide named in handoffs must be in the folder: start-up refuses a
// catalog that names one that is not, at the file and line that names it.
func TestLoadDirChecksHandoffsAreGuides(t *testing.T) {
	dir, c := handingOff(t)
	if g, _ := c.Get("billing"); !slices.Equal(g.Handoffs, []string{"support"}) {
		t.Fatalf("billing hands off to %v", g.Handoffs)
	}

	writeGuide(t, dir, "sales.md", "---\nhandoffs: [support, biling]\n---\nYou sell.\n")
	_, err := LoadDir(dir)
	want := filepath.Join(dir, "sales.md") + `:2: handoffs: no guide "biling" is in the folder (have: billing, support): did you mean "billing"?`
	if err == nil || err.Error() != want {
		t.Fatalf("LoadDir = %v, want %s", err, want)
	}
}

// A reload that breaks a guide's handoffs keeps its last good version, as
// any broken edit does; a guide handed off to whose new file is broken
// runs on in its last version, so handing off to it stays good.
func TestReloadChecksHandoffs(t *testing.T) {
	dir, c := handingOff(t)
	writeGuide(t, dir, "support.md", "---\ndescription: Support, edited\nhandoffs: [billing, refunds]\n---\nYou are support.\n")
	writeGuide(t, dir, "billing.md", "---\ndescription: Billing\ntemprature: 1\n---\nYou are billing.\n")
	res, err := c.Reload("support", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 2 || !strings.Contains(errorsText(res.Problems), filepath.Join(dir, "support.md")+`:3: handoffs: no guide "refunds" is in the folder`) {
		t.Fatalf("problems = %v", res.Problems)
	}
	if g, _ := c.Get("support"); g.Description != "Support" {
		t.Fatalf("support after a reload that broke its handoffs: %q, want its last good version", g.Description)
	}

	// A new guide that hands off to a broken one whose last version runs:
	// taken.
	writeGuide(t, dir, "support.md", supportHandoffs)
	writeGuide(t, dir, "sales.md", "---\nhandoffs: [billing]\n---\nYou sell.\n")
	if res, err = c.Reload("support", nil); err != nil || !slices.Equal(res.Added, []string{"sales"}) {
		t.Fatalf("reload = %+v, %v; want sales added", res, err)
	}
}

func errorsText(errs []error) string {
	var b strings.Builder
	for _, err := range errs {
		b.WriteString(err.Error() + "\n")
	}
	return b.String()
}
