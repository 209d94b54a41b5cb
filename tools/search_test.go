package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// github is what an MCP server for a code host brings: many tools, named
// and described by someone else.
var github = []struct{ name, desc, params string }{
	{"create_issue", "Create a new issue in a GitHub repository.", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"},"body":{"type":"string"}}}`},
	{"list_issues", "List issues in a GitHub repository, filtered by state and labels.", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"state":{"type":"string"}}}`},
	{"add_issue_comment", "Add a comment to an existing issue.", ""},
	{"listPullRequests", "List pull requests of a repository.", ""},
	{"merge_pull_request", "Merge a pull request.", `{"type":"object","properties":{"merge_method":{"type":"string"}}}`},
	{"create_branch", "Create a new branch in a repository.", ""},
	{"get_file_contents", "Get the contents of a file or directory from a repository.", `{"type":"object","properties":{"path":{"type":"string"}}}`},
	{"search_code", "Search for code across GitHub repositories.", ""},
	{"list_commits", "Get the list of commits of a branch.", ""},
	{"create_release", "Publish a release with notes for a tag.", ""},
}

var weather = []struct{ name, desc, params string }{
	{"forecast", "Weather forecast for a city: temperature, rain and wind for the next days.", `{"type":"object","properties":{"city":{"type":"string"}}}`},
	{"alerts", "Active severe weather alerts (storms, floods) for a region.", ""},
}

func searchRegistry(t *testing.T) *Registry {
	t.Helper()
	r := newTestRegistry(t)
	for group, tools := range map[string][]struct{ name, desc, params string }{"github": github, "weather": weather} {
		var ts []Tool
		for _, d := range tools {
			tool := echo(group + "." + d.name)
			tool.Description = d.desc
			if d.params != "" {
				tool.Parameters = json.RawMessage(d.params)
			}
			ts = append(ts, tool)
		}
		if err := r.SetGroup(group, ts); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestSearchFindsTheToolForWhatIsAsked(t *testing.T) {
	r := searchRegistry(t)
	for _, tc := range []struct{ query, want string }{
		{"Please open an issue about the login bug: create it in acme/web", "github.create_issue"},
		{"Will it rain in Lyon tomorrow?", "weather.forecast"},
		{"which pull requests are waiting?", "github.listPullRequests"}, // camelCase split
		{"merge PR 42 with a squash merge_method", "github.merge_pull_request"},
		{"show me what's in README.md, the file contents", "github.get_file_contents"},
		{"Is there a storm alert for Bretagne?", "weather.alerts"},
		{"Créer une branche? no: create a branch", "github.create_branch"}, // accents fold, stems
		{"what time is it in Tokyo", "current_time"},
	} {
		got := r.Search(tc.query, 3, nil)
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("Search(%q) = %v, want %s first", tc.query, got, tc.want)
		}
	}
}

func TestSearchBounds(t *testing.T) {
	r := searchRegistry(t)
	if got := r.Search("zebra quantum marmalade", 5, nil); len(got) != 0 {
		t.Fatalf("words no tool has matched %v", got)
	}
	if got := r.Search("", 5, nil); len(got) != 0 {
		t.Fatalf("an empty query matched %v", got)
	}
	if got := r.Search("issue", 0, nil); len(got) != 0 {
		t.Fatalf("n = 0 returned %v", got)
	}
	got := r.Search("issues of a repository", 2, nil)
	if len(got) != 2 {
		t.Fatalf("n = 2 returned %v", got)
	}
	// want leaves tools out, the best of the rest come.
	rest := r.Search("issues of a repository", 20, func(name string) bool { return !slices.Contains(got, name) })
	if len(rest) == 0 || slices.ContainsFunc(rest, func(n string) bool { return slices.Contains(got, n) }) {
		t.Fatalf("want was not honoured: %v after %v", rest, got)
	}
	// The same question gets the same answer.
	for range 5 {
		if again := r.Search("issues of a repository", 2, nil); !slices.Equal(again, got) {
			t.Fatalf("Search is not stable: %v then %v", got, again)
		}
	}
	// A huge query is bounded, and still answered.
	huge := strings.Repeat("lorem ipsum dolor ", 20000) + " forecast"
	if got := r.Search(huge, 1, nil); len(got) != 1 {
		t.Fatalf("a huge query returned %v", got)
	}
}

// The index follows the set: a server's new tools are found, its old ones
// are not.
func TestSearchFollowsTheToolSet(t *testing.T) {
	r := searchRegistry(t)
	if got := r.Search("weather forecast", 1, nil); len(got) != 1 || got[0] != "weather.forecast" {
		t.Fatalf("before: %v", got)
	}
	tide := echo("weather.tides")
	tide.Description = "High and low tides for a harbour."
	if err := r.SetGroup("weather", []Tool{tide}); err != nil {
		t.Fatal(err)
	}
	if got := r.Search("weather forecast", 5, nil); slices.Contains(got, "weather.forecast") {
		t.Fatalf("a tool the server no longer has was found: %v", got)
	}
	if got := r.Search("when is high tide in the harbour", 1, nil); len(got) != 1 || got[0] != "weather.tides" {
		t.Fatalf("the server's new tool was not found: %v", got)
	}
}

func BenchmarkToolSearch(b *testing.B) {
	r, err := NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	var ts []Tool
	for i := range 500 {
		d := github[i%len(github)]
		tool := echo(fmt.Sprintf("big.%s_%d", d.name, i))
		tool.Description = d.desc
		ts = append(ts, tool)
	}
	if err := r.SetGroup("big", ts); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		r.Search("open an issue about the failing release branch", 20, nil)
	}
}
