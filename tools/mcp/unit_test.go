package mcp

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

var modelName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct{ server, tool, want string }{
		{"github", "create_issue", "github__create_issue"},
		{"github", "create-issue", "github__create-issue"},
		{"github", "repos.list", ""},       // hashed
		{"github", "repos_list", ""},       // plain, but must differ from repos.list
		{"docs", long, ""},                 // too long: cut and hashed
		{"docs", long + "y", ""},           // differs from the one above
		{"a-b", "c", "a-b__c"},             // a dash in the server name
		{"a", "_b", "a___b"},               // a tool starting with _
		{"files", "read file", ""},         // a space
		{"files", "read_file", ""},         // differs from "read file"
		{"files", "résumé", ""},            // not ASCII
		{"x", strings.Repeat("é", 64), ""}, // multibyte, long
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := ToolName(c.server, c.tool)
		if c.want != "" && got != c.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
		if !modelName.MatchString(got) {
			t.Errorf("ToolName(%q, %q) = %q: not a valid function name", c.server, c.tool, got)
		}
		if !strings.HasPrefix(got, c.server+"__") {
			t.Errorf("ToolName(%q, %q) = %q: not under the server", c.server, c.tool, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s.%s and %s map to the same name %q", c.server, c.tool, other, got)
		}
		seen[got] = c.server + "." + c.tool
		if again := ToolName(c.server, c.tool); again != got {
			t.Errorf("ToolName is not stable: %q then %q", got, again)
		}
	}
	if got := ToolName("github", "repos.list"); !strings.HasPrefix(got, "github__repos_list_") {
		t.Errorf("dotted name: %q", got)
	}
}

func TestGatewayName(t *testing.T) {
	registryName := regexp.MustCompile(`^[a-z][a-z0-9_-]{0,30}\.[A-Za-z0-9_-]{1,64}$`) // tools.Registry's group names
	long := strings.Repeat("y", 64)
	cases := []struct{ server, tool, want string }{
		{"github", "create_issue", "github.create_issue"},
		{"github", long, "github." + long}, // fits the registry, though not the model: the providers shorten it
		{"github", "repos.list", "github." + strings.TrimPrefix(ToolName("github", "repos.list"), "github__")},
		{"github", long + "y", ""},
		{"files", "read file", ""},
	}
	for _, c := range cases {
		got := GatewayName(c.server, c.tool)
		if c.want != "" && got != c.want {
			t.Errorf("GatewayName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
		if !registryName.MatchString(got) {
			t.Errorf("GatewayName(%q, %q) = %q: the registry refuses it", c.server, c.tool, got)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		c    ServerConfig
		want string // part of the error; "" for none
	}{
		{ServerConfig{Name: "github", Command: []string{"npx", "server"}, Env: map[string]string{"TOKEN": "${GITHUB_TOKEN}"}}, ""},
		{ServerConfig{Name: "docs", URL: "https://docs.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${T}"}}, ""},
		{ServerConfig{Name: "Docs", URL: "https://x"}, "lowercase"},
		{ServerConfig{Name: "a__b", URL: "https://x"}, `may not contain "__"`},
		{ServerConfig{Name: "ab_", URL: "https://x"}, "end in _"},
		{ServerConfig{Name: strings.Repeat("a", 32), URL: "https://x"}, "1-31"},
		{ServerConfig{Name: "x"}, "set command"},
		{ServerConfig{Name: "x", Command: []string{"a"}, URL: "https://x"}, "not both"},
		{ServerConfig{Name: "x", Command: []string{""}}, "program is empty"},
		{ServerConfig{Name: "x", URL: "ftp://x"}, "http:// or https://"},
		{ServerConfig{Name: "x", URL: "https://x", Env: map[string]string{"A": "b"}}, "env is for command"},
		{ServerConfig{Name: "x", Command: []string{"a"}, Headers: map[string]string{"A": "b"}}, "headers are for url"},
		{ServerConfig{Name: "x", URL: "https://x", Headers: map[string]string{"Bad Header": "b"}}, "not a header name"},
		{ServerConfig{Name: "x", Command: []string{"a"}, Env: map[string]string{"A=B": "b"}}, "not a variable name"},
		{ServerConfig{Name: "x", URL: "https://x", MaxResponseMB: 64}, ""},
		{ServerConfig{Name: "x", URL: "https://x", MaxResponseMB: 65}, "max_response_mb: want 1 to 64 (MiB), or 0 for the default 8"},
		{ServerConfig{Name: "x", Command: []string{"a"}, MaxResponseMB: -1}, "max_response_mb"},
	}
	for _, c := range cases {
		err := c.c.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.c, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: err %v, want %q", c.c, err, c.want)
		}
	}
}

func TestNew(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/home/gw", "TOKEN=abc", "EMPTY="}
	good := ServerConfig{Name: "a", Command: []string{"x"}, Env: map[string]string{"K": "pre-${TOKEN}-post", "PASS": "p$ss"}}
	m, err := New([]ServerConfig{good}, environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(m.list()[0].env, " ")
	if env != "PATH=/bin HOME=/home/gw K=pre-abc-post PASS=p$ss" {
		t.Errorf("child environment %q", env)
	}
	m.Close()
	if st := m.Status()[0]; st.State != StateStopped {
		t.Errorf("closed before Start: %+v", st)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("Start after Close")
	}

	for _, c := range []struct {
		servers []ServerConfig
		want    string
	}{
		{[]ServerConfig{good, good}, "configured twice"},
		{[]ServerConfig{{Name: "a", Command: []string{"x"}, Env: map[string]string{"K": "${MISSING}"}}}, "env.K: ${MISSING} is not set"},
		{[]ServerConfig{{Name: "a", Command: []string{"x"}, Env: map[string]string{"K": "${EMPTY}"}}}, "${EMPTY} is not set"},
		{[]ServerConfig{{Name: "a", Command: []string{"x"}, Env: map[string]string{"K": "${TOKEN"}}}, "unclosed"},
		{[]ServerConfig{{Name: "a", URL: "https://x", Headers: map[string]string{"Authorization": "Bearer ${NOPE}"}}}, "headers.Authorization: ${NOPE} is not set"},
		{[]ServerConfig{{Name: "A", URL: "https://x"}}, "lowercase"},
	} {
		if _, err := New(c.servers, environ, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.servers, err, c.want)
		}
	}
}

func TestToResult(t *testing.T) {
	t.Run("text parts joined", func(t *testing.T) {
		res, err := toResult("s", "t", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "one"}, &sdk.TextContent{Text: "two"}}})
		if err != nil || res.Content != "one\ntwo" {
			t.Fatalf("%q %v", res.Content, err)
		}
	})
	t.Run("structured content only without text", func(t *testing.T) {
		res, _ := toResult("s", "t", &sdk.CallToolResult{
			Content: []sdk.Content{&sdk.TextContent{Text: `{"a":1}`}}, StructuredContent: map[string]any{"a": 1},
		})
		if res.Content != `{"a":1}` {
			t.Fatalf("%q", res.Content)
		}
	})
	t.Run("error", func(t *testing.T) {
		_, err := toResult("s", "t", &sdk.CallToolResult{IsError: true})
		if err == nil || err.Error() != "the tool failed without saying why" {
			t.Fatalf("%v", err)
		}
	})
	t.Run("other content named", func(t *testing.T) {
		res, err := toResult("s", "t", &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.AudioContent{Data: make([]byte, 2048), MIMEType: "audio/wav"},
			&sdk.ResourceLink{Name: "readme", URI: "file:///readme"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.txt", Text: "hello"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.bin", MIMEType: "application/zip", Blob: []byte{1, 2}}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///p.png", MIMEType: "image/png", Blob: pngPixel}},
			&sdk.ImageContent{Data: []byte("<svg/>"), MIMEType: "image/svg+xml"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"[audio, audio/wav, 2.0 KiB: not shown]", "[resource readme: file:///readme]",
			"[resource file:///a.txt]\nhello", "[resource file:///a.bin, application/zip, 2 bytes: binary, not shown]",
			"[image, image/png, 67 bytes: shown to the user]", "[image, image/svg+xml, 6 bytes: a format the chat does not show]"} {
			if !strings.Contains(res.Content, want) {
				t.Errorf("content lacks %q:\n%s", want, res.Content)
			}
		}
		if len(res.Images) != 1 || res.Images[0].Data != base64.StdEncoding.EncodeToString(pngPixel) || res.Images[0].Alt != "file:///p.png" {
			t.Errorf("images %+v", res.Images)
		}
	})
	t.Run("images bounded", func(t *testing.T) {
		var content []sdk.Content
		for range maxImages + 2 {
			content = append(content, &sdk.ImageContent{Data: pngPixel, MIMEType: "image/png"})
		}
		content = append(content, &sdk.ImageContent{Data: make([]byte, maxImageBytes+1), MIMEType: "image/png"})
		res, _ := toResult("s", "t", &sdk.CallToolResult{Content: content})
		if len(res.Images) != maxImages || strings.Count(res.Content, "only 4 pictures") != 2 || !strings.Contains(res.Content, "too large to show") {
			t.Errorf("%d images; %s", len(res.Images), res.Content)
		}
	})
}

func TestCapText(t *testing.T) {
	short := strings.Repeat("a", maxResultText)
	if capText(short) != short {
		t.Error("text at the limit was cut")
	}
	// A multibyte character across the limit is not split.
	long := strings.Repeat("a", maxResultText-1) + "é" + strings.Repeat("b", 100)
	got := capText(long)
	head, marker, ok := strings.Cut(got, "\n…[cut: ")
	if !ok || head != strings.Repeat("a", maxResultText-1) || !strings.HasPrefix(marker, "the result was 64.1 KiB") {
		t.Errorf("cut to %d bytes, marker %q", len(head), marker)
	}
}

func TestLineLogger(t *testing.T) {
	rec := newRecorder()
	l := &lineLogger{log: slog.New(rec), server: "s"}
	l.Write([]byte("one\r\ntw"))
	l.Write([]byte("o\nthr"))
	l.Write([]byte(strings.Repeat("x", maxStderrLine+10)))
	l.Write([]byte("\nlast"))
	l.flush()
	var lines []string
	for _, r := range rec.records {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "line" {
				lines = append(lines, a.Value.String())
			}
			return true
		})
		if r.Level != slog.LevelDebug {
			t.Errorf("level %v", r.Level)
		}
	}
	if len(lines) != 5 || lines[0] != "one" || lines[1] != "two" || !strings.HasPrefix(lines[2], "thrxxx") ||
		len(lines[2]) > maxStderrLine+len("…") || lines[4] != "last" {
		t.Errorf("lines %q", lines)
	}
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for i := range 9 {
		got = append(got, backoff(time.Second, time.Minute, i))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("backoff %v", got)
		}
	}
}

type recordingTransport struct{ got *http.Request }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

func TestHeaderTransport(t *testing.T) {
	base := &recordingTransport{}
	ht := &headerTransport{host: "mcp.example.com", header: http.Header{"Authorization": {"Bearer k"}}, base: base}
	req, _ := http.NewRequest("POST", "https://mcp.example.com/mcp", nil)
	ht.RoundTrip(req)
	if base.got.Header.Get("Authorization") != "Bearer k" {
		t.Error("the server's own host did not get the header")
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was changed")
	}
	req, _ = http.NewRequest("GET", "https://elsewhere.example.com/", nil)
	ht.RoundTrip(req)
	if base.got.Header.Get("Authorization") != "" {
		t.Error("another host got the header")
	}
}
