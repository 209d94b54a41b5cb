package mcp

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gw/switchboard/tools"
)

// Prepare changes the servers of a running Manager: a server added is
// started and its tools offered, one removed is stopped and its tools
// gone, one unchanged runs on untouched; a bad list changes nothing.
func TestPrepareAddsRemovesAndKeepsServers(t *testing.T) {
	var refused atomic.Int64
	a, b := httpServer(t, "", &refused, nil), httpServer(t, "", &refused, nil)
	rec := newRecorder()
	m := startManager(t, []ServerConfig{httpConfig("docs", a.URL)}, testEnviron(), rec, nil)
	waitFor(t, m, "docs running", func() bool { return m.Status()[0].State == StateRunning })
	docs := m.list()[0]

	// A list that does not check out changes nothing.
	if _, err := m.Prepare([]ServerConfig{httpConfig("docs", a.URL), {Name: "bad"}}, testEnviron()); err == nil {
		t.Fatal("a server with neither command nor url was taken")
	}
	if _, err := m.Prepare([]ServerConfig{httpConfig("wiki", b.URL)}, nil); err == nil || !strings.Contains(err.Error(), "MCPTEST_TOKEN") {
		t.Fatalf("a header naming an unset variable: %v", err)
	}
	if got := m.Servers(); !slices.Equal(got, []string{"docs"}) {
		t.Fatalf("after refused lists, servers = %v", got)
	}

	apply, err := m.Prepare([]ServerConfig{httpConfig("docs", a.URL), httpConfig("wiki", b.URL)}, testEnviron())
	if err != nil {
		t.Fatal(err)
	}
	drainChanged(m)
	ch := apply()
	if !slices.Equal(ch.Added, []string{"wiki"}) || len(ch.Removed)+len(ch.Replaced) != 0 {
		t.Fatalf("changes = %+v", ch)
	}
	waitFor(t, m, "wiki's tools", func() bool {
		return slices.ContainsFunc(m.Tools(), func(tl tools.Tool) bool { return tl.Name == "wiki__echo" })
	})
	if m.list()[0] != docs {
		t.Error("the unchanged server was replaced")
	}
	if res, err := run(t, registry(t, m), "wiki__echo", `{"text":"new"}`); err != nil || res.Content != "echo: new" {
		t.Fatalf("the added server's tool: %q, %v", res.Content, err)
	}

	// docs removed, wiki moved to the other endpoint: replaced.
	apply, err = m.Prepare([]ServerConfig{httpConfig("wiki", a.URL)}, testEnviron())
	if err != nil {
		t.Fatal(err)
	}
	wikiBefore := m.list()[1]
	ch = apply()
	if !slices.Equal(ch.Removed, []string{"docs"}) || !slices.Equal(ch.Replaced, []string{"wiki"}) || len(ch.Added) != 0 {
		t.Fatalf("changes = %+v", ch)
	}
	if st := docs.status(); st.State != StateStopped {
		t.Errorf("the removed server is %s, want stopped", st.State)
	}
	if st := wikiBefore.status(); st.State != StateStopped {
		t.Errorf("the replaced server's old version is %s, want stopped", st.State)
	}
	waitFor(t, m, "wiki running again", func() bool { st := m.Status(); return len(st) == 1 && st[0].State == StateRunning })
	for _, tool := range m.Tools() {
		if strings.HasPrefix(tool.Name, "docs__") {
			t.Fatalf("the removed server's tool %s is still offered", tool.Name)
		}
	}
}
