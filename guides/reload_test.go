package guides

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func writeGuide(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	guideA  = "---\ndescription: A\n---\nYou are A.\n"
	guideA2 = "---\ndescription: A again\n---\nYou are A, edited.\n"
	guideB  = "---\ndescription: B\n---\nYou are B.\n"
)

// twoGuides is a catalog of a and b, and their folder.
func twoGuides(t *testing.T) (string, *Catalog) {
	t.Helper()
	dir := t.TempDir()
	writeGuide(t, dir, "a.md", guideA)
	writeGuide(t, dir, "b.md", guideB)
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

func TestReloadSwapsGoodGuidesAndKeepsBrokenOnesOld(t *testing.T) {
	dir, c := twoGuides(t)
	gen := c.Generation()

	// Nothing changed: nothing reported, the generation stays.
	if res, err := c.Reload("a", nil); err != nil || res.Any() || len(res.Problems) > 0 || c.Generation() != gen {
		t.Fatalf("an unchanged folder reloaded as %+v, %v (generation %d → %d)", res, err, gen, c.Generation())
	}

	// An edit, a new guide and a broken one at once.
	writeGuide(t, dir, "a.md", guideA2)
	writeGuide(t, dir, "c.md", "---\ndescription: C\n---\nYou are C.\n")
	writeGuide(t, dir, "b.md", "---\ndescription: B\ntemprature: 1\n---\nYou are B.\n")
	res, err := c.Reload("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Changed, ",") != "a" || strings.Join(res.Added, ",") != "c" || len(res.Removed) != 0 {
		t.Fatalf("reload = %+v, want a changed and c added", res)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Error(), filepath.Join(dir, "b.md")+`:3: unknown key "temprature"`) {
		t.Fatalf("problems = %v, want b.md's line 3 named", res.Problems)
	}
	if g, _ := c.Get("a"); g.Prompt != "You are A, edited." {
		t.Errorf("a's prompt = %q, want the edited one", g.Prompt)
	}
	if g, _ := c.Get("b"); g.Prompt != "You are B." {
		t.Errorf("the broken b = %q, want its last good version running on", g.Prompt)
	}
	if c.Generation() == gen {
		t.Error("the generation did not change with the catalog")
	}
	if p := c.Problems(); len(p) != 1 {
		t.Errorf("Problems() = %v, want the broken b", p)
	}

	// A check the gateway adds (a provider it lacks) keeps the old one
	// too; fixed, b comes in and the problems are gone.
	writeGuide(t, dir, "b.md", "---\nprovider: nope\n---\nYou are B2.\n")
	res, _ = c.Reload("a", func(g Guide) error {
		return Needs{Providers: []string{"main"}}.Check(g)
	})
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Error(), `provider "nope" is not configured`) {
		t.Fatalf("problems = %v, want b's provider named", res.Problems)
	}
	if g, _ := c.Get("b"); g.Prompt != "You are B." {
		t.Errorf("b = %q after a failed check, want the old one", g.Prompt)
	}
	writeGuide(t, dir, "b.md", guideB+"More.\n")
	if res, _ = c.Reload("a", nil); strings.Join(res.Changed, ",") != "b" || len(c.Problems()) != 0 {
		t.Fatalf("fixed b reloaded as %+v, problems %v", res, c.Problems())
	}
}

func TestReloadDeletedGuideRunsOnForItsConversationsOnly(t *testing.T) {
	dir, c := twoGuides(t)
	// A rename is a deletion and an addition.
	if err := os.Rename(filepath.Join(dir, "b.md"), filepath.Join(dir, "bee.md")); err != nil {
		t.Fatal(err)
	}
	res, err := c.Reload("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Removed, ",") != "b" || strings.Join(res.Added, ",") != "bee" {
		t.Fatalf("rename reloaded as %+v", res)
	}
	if _, ok := c.Get("b"); ok {
		t.Error("a deleted guide is still offered (Get)")
	}
	if strings.Join(c.Names(), ",") != "a,bee" {
		t.Errorf("Names = %v", c.Names())
	}
	if g, ok := c.Latest("b"); !ok || g.Prompt != "You are B." {
		t.Errorf("Latest(b) = %q, %v: its conversations lose it", g.Prompt, ok)
	}
	// Back on disk, it is offered again.
	writeGuide(t, dir, "b.md", guideB)
	if res, _ := c.Reload("a", nil); strings.Join(res.Added, ",") != "b" {
		t.Fatalf("b back reloaded as %+v", res)
	}
	if _, ok := c.Get("b"); !ok {
		t.Error("b back on disk is not offered")
	}

	// The default guide is not given up: its last version stays offered.
	if err := os.Remove(filepath.Join(dir, "a.md")); err != nil {
		t.Fatal(err)
	}
	res, _ = c.Reload("a", nil)
	if len(res.Removed) != 0 || len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Error(), "guides.default") {
		t.Fatalf("deleting the default reloaded as %+v", res)
	}
	if _, ok := c.Get("a"); !ok {
		t.Error("the deleted default guide is no longer offered: new conversations would fail")
	}

	// A folder that cannot be read changes nothing.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reload("a", nil); err == nil {
		t.Error("a missing folder reloaded without an error")
	}
	if _, ok := c.Get("bee"); !ok {
		t.Error("a failed reload dropped a guide")
	}
}

// The debounce fires once a burst has been quiet, once per burst, and at
// the latest longest after a burst that does not stop.
func TestDebounceOneReloadPerBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		kicks := make(chan struct{})
		var fired atomic.Int32
		go debounce(ctx, kicks, 100*time.Millisecond, time.Second, func() { fired.Add(1) })

		// An editor's save: five events 10 ms apart.
		for range 5 {
			kicks <- struct{}{}
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		if n := fired.Load(); n != 0 {
			t.Fatalf("fired %d times during the burst", n)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if n := fired.Load(); n != 1 {
			t.Fatalf("fired %d times after the burst, want 1", n)
		}

		// A burst that never goes quiet is read after a second all the same.
		start := time.Now()
		for fired.Load() == 1 {
			kicks <- struct{}{}
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
		}
		if d := time.Since(start); d < time.Second || d > time.Second+50*time.Millisecond {
			t.Fatalf("an endless burst was read after %v, want 1s", d)
		}
	})
}

// Watching a real folder: an editor's save (a temporary file renamed over
// the guide), a new file and a Kubernetes ConfigMap's swap of its
// "..data" link each bring a call.
func TestWatchSeesSavesAndConfigMapSwaps(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "guides")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A ConfigMap's layout: a timestamped folder, ..data linking to it,
	// and each file a link through ..data.
	v1 := filepath.Join(dir, "..2026_01")
	if err := os.Mkdir(v1, 0o755); err != nil {
		t.Fatal(err)
	}
	writeGuide(t, v1, "a.md", guideA)
	if err := os.Symlink("..2026_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/a.md", filepath.Join(dir, "a.md")); err != nil {
		t.Fatal(err)
	}
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan struct{}, 16)
	if err := Watch(t.Context(), dir, 20*time.Millisecond, func() { calls <- struct{}{} }, func(err error) { t.Log(err) }); err != nil {
		t.Fatal(err)
	}
	reloadAfterCall := func(what string) Result {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no reload", what)
		}
		res, err := c.Reload("a", nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// The ConfigMap is updated: a new folder, a new link renamed over
	// ..data, the old folder removed; a.md itself is never touched.
	v2 := filepath.Join(dir, "..2026_02")
	if err := os.Mkdir(v2, 0o755); err != nil {
		t.Fatal(err)
	}
	writeGuide(t, v2, "a.md", guideA2)
	if err := os.Symlink("..2026_02", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(v1); err != nil {
		t.Fatal(err)
	}
	for res := reloadAfterCall("configmap swap"); len(res.Changed) == 0; res = reloadAfterCall("configmap swap, rest of the burst") {
	}
	if g, _ := c.Get("a"); g.Prompt != "You are A, edited." {
		t.Fatalf("after the swap a = %q", g.Prompt)
	}

	// An editor's save: written beside, renamed over.
	tmp := filepath.Join(dir, ".b.md.swp")
	writeGuide(t, dir, ".b.md.swp", guideB)
	if err := os.Rename(tmp, filepath.Join(dir, "b.md")); err != nil {
		t.Fatal(err)
	}
	for res := reloadAfterCall("save"); len(res.Added) == 0; res = reloadAfterCall("save, rest of the burst") {
	}
	if _, ok := c.Get("b"); !ok {
		t.Fatal("the saved b.md is not offered")
	}
}
