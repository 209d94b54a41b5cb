package guides

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// snapshot is the catalog at one moment. It is never changed once stored:
// a reload makes the next one.
type snapshot struct {
	generation uint64
	guides     map[string]Guide
	names      []string
	// retired are guides whose files were deleted since start-up: no
	// longer offered, still run by the conversations that use them until
	// the gateway restarts (Latest).
	retired map[string]Guide
	// problems are what the last reload found wrong, each naming its file
	// and line; the guides they concern run their last good version.
	problems []error
}

// Result is what a Reload changed.
type Result struct {
	// Added, Changed and Removed name the guides new, edited or deleted on
	// disk, and taken into the catalog.
	Added, Changed, Removed []string
	// Problems are the files that could not be taken: each error names
	// the file and the line, and says what the gateway does instead (the
	// guide's last good version runs on; a new broken file is not
	// offered).
	Problems []error
}

// Any reports whether the reload changed the catalog.
func (r Result) Any() bool { return len(r.Added)+len(r.Changed)+len(r.Removed) > 0 }

// Problems are what the last reload found wrong (nil when all is well),
// for a health report.
func (c *Catalog) Problems() []error { return slices.Clone(c.cur.Load().problems) }

// Reload reads the guides' folder again and swaps in, at once, every guide
// whose file changed, parses and passes check (nil: parsing alone) — the
// checks start-up makes. A guide whose new version is broken keeps its
// last good one; a new broken file is not offered; a deleted file's guide
// is no longer offered but runs on in the conversations that use it
// (Latest) until a restart — except the default guide (def), which is kept
// as it was, with a problem saying to restore it. Sessions take the new
// version when their next turn starts (sessions.Manager). Reloads run one
// at a time. An error means the folder could not be read: nothing changed.
func (c *Catalog) Reload(def string, check func(Guide) error) (Result, error) {
	c.reloading.Lock()
	defer c.reloading.Unlock()
	prev := c.cur.Load()
	found, problems, err := scan(c.dir, check)
	if err != nil {
		return Result{}, err
	}
	problems = append(problems, linkHandoffs(found, prev.runsOn(def, found))...)
	next := &snapshot{generation: prev.generation, guides: map[string]Guide{}, retired: map[string]Guide{}}
	var res Result
	for name, g := range found {
		old, had := prev.guides[name]
		switch {
		case g == nil && had: // broken: the last good version runs on
			next.guides[name] = old
		case g == nil:
		case !had:
			next.guides[name] = *g
			res.Added = append(res.Added, name)
		case !reflect.DeepEqual(old, *g):
			next.guides[name] = *g
			res.Changed = append(res.Changed, name)
		default:
			next.guides[name] = old
		}
	}
	for name, g := range prev.guides {
		if _, ok := found[name]; ok {
			continue
		}
		if name == def {
			next.guides[name] = g
			problems = append(problems, fmt.Errorf("%s: deleted, but it is guides.default (%s): the gateway keeps its last version; put the file back, or set guides.default to another guide and restart", g.File, def))
			continue
		}
		next.retired[name] = g
		res.Removed = append(res.Removed, name)
	}
	for name, g := range prev.retired {
		if _, ok := next.guides[name]; !ok {
			next.retired[name] = g
		}
	}
	for name := range next.guides {
		next.names = append(next.names, name)
	}
	slices.Sort(next.names)
	slices.Sort(res.Added)
	slices.Sort(res.Changed)
	slices.Sort(res.Removed)
	next.problems, res.Problems = problems, problems
	if res.Any() {
		next.generation++
	}
	c.cur.Store(next)
	return res, nil
}

// scan parses every *.md file in dir and checks it. A file that fails is
// in found with a nil guide, and its error in problems; err is for a
// folder that cannot be read.
func scan(dir string, check func(Guide) error) (found map[string]*Guide, problems []error, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("guides: %w", err)
	}
	found = map[string]*Guide{}
	for _, e := range entries {
		// A symbolic link is read through (a Kubernetes ConfigMap's files
		// are links into its current version).
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		name := strings.TrimSuffix(e.Name(), ".md")
		data, err := os.ReadFile(file)
		if err != nil {
			found[name] = nil
			problems = append(problems, fmt.Errorf("guides: %w", err))
			continue
		}
		g, err := Parse(file, data)
		if err == nil && check != nil {
			err = check(g)
		}
		if err != nil {
			found[name] = nil
			problems = append(problems, err)
			continue
		}
		found[name] = &g
	}
	return found, problems, nil
}

// snapshotOf is the first snapshot, from a scan at start-up.
func snapshotOf(found map[string]*Guide) *snapshot {
	s := &snapshot{guides: map[string]Guide{}, retired: map[string]Guide{}}
	for name, g := range found {
		if g != nil {
			s.guides[name] = *g
			s.names = append(s.names, name)
		}
	}
	slices.Sort(s.names)
	return s
}
