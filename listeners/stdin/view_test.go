package stdin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

func event(t *testing.T, seq int64, typ switchboard.EventType, data any) switchboard.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return switchboard.Event{Seq: seq, Type: typ, Data: raw}
}

var ann = switchboard.Author{Channel: "stdin", ID: "ann", Name: "ann"}

func newTestView(interactive, styled bool) (*view, *bytes.Buffer) {
	var out bytes.Buffer
	return &view{out: &out, self: ann, interactive: interactive, styled: styled, changed: make(chan struct{})}, &out
}

// A request open before the terminal started is the first prompt, with
// its warning; its question is never followed by "> ".
func TestViewPendingRequestIsThePrompt(t *testing.T) {
	v, out := newTestView(true, false)
	v.start(switchboard.ReadyData{LastSeq: 4, Pending: []switchboard.ConfirmationRequestData{{
		ConfirmationID: "c1", ToolName: "current_time", Args: json.RawMessage(`{"timezone": "Europe/Berlin"}`),
		SecurityWarning: "it reads the clock",
	}}}, false)
	v.prompt()
	want := "  ⚠ it reads the clock\n  Run current_time {\"timezone\":\"Europe/Berlin\"}? Approve? [y/N/a=always] "
	if got := out.String(); got != want {
		t.Fatalf("start:\n got %q\nwant %q", got, want)
	}
	v.prompt() // shown already: not again
	if got := out.String(); got != want {
		t.Fatalf("a second prompt() printed again: %q", got)
	}
	c, ok := v.openConfirmation()
	if !ok || c.ConfirmationID != "c1" {
		t.Fatalf("open confirmation = %+v, %v", c, ok)
	}

	// The answer was typed (and echoed); the resolution arrives.
	v.consumed(true)
	out.Reset()
	v.render(event(t, 5, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{
		ConfirmationID: "c1", Approved: true, By: "ann", Scope: switchboard.ScopeSession,
	}))
	v.prompt()
	if got, want := out.String(), "  approved by ann (for this session)\n> "; got != want {
		t.Fatalf("after the answer:\n got %q\nwant %q", got, want)
	}
	if _, ok := v.openConfirmation(); ok {
		t.Fatal("a resolved request is still open")
	}
}

// Output that arrives while the prompt waits goes on a line of its own
// and the prompt comes back after it; a terminal erases the prompt first.
func TestViewRedrawsAnInterruptedPrompt(t *testing.T) {
	for _, tc := range []struct {
		styled bool
		want   string
	}{
		{false, "> \nbob · Web: hi\n> "},
		{true, "> \r\x1b[Kbob · Web: hi\n> "},
	} {
		v, out := newTestView(true, tc.styled)
		v.start(switchboard.ReadyData{}, false)
		v.prompt()
		v.render(event(t, 1, switchboard.EventMessage, switchboard.MessageData{
			ID: "m1", Role: switchboard.RoleUser, Content: "hi", Author: "bob", AuthorID: "bob", Channel: "web",
		}))
		if got := out.String(); got != tc.want {
			t.Errorf("styled %v:\n got %q\nwant %q", tc.styled, got, tc.want)
		}
	}
}

// In a pipe the question is printed as the request arrives and the line
// that answers it is not echoed, so what follows starts a new line.
func TestViewPipeQuestion(t *testing.T) {
	v, out := newTestView(false, false)
	v.start(switchboard.ReadyData{}, false)
	v.render(event(t, 1, switchboard.EventDelta, switchboard.DeltaData{MessageID: "a1", Content: "Checking."}))
	v.render(event(t, 2, switchboard.EventConfirmationRequest, switchboard.ConfirmationRequestData{
		ConfirmationID: "c1", ToolName: "current_time", Args: json.RawMessage(`{}`),
	}))
	v.render(event(t, 3, switchboard.EventConfirmationRequest, switchboard.ConfirmationRequestData{
		ConfirmationID: "c2", ToolName: "calculator", Args: json.RawMessage(`{"expression":"1+1"}`),
	}))
	v.prompt()
	v.consumed(true)
	v.render(event(t, 4, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{ConfirmationID: "c1", Approved: false, By: "ann"}))
	v.prompt()
	want := "Checking.\n" +
		"  Run current_time {}? Approve? [y/N/a=always] \n" +
		"  (next) calculator {\"expression\":\"1+1\"} also waits for approval\n" +
		"  Run current_time {}? Approve? [y/N/a=always] \n" +
		"  denied by ann\n" +
		"  Run calculator {\"expression\":\"1+1\"}? Approve? [y/N/a=always] "
	if got := out.String(); got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	v.waitPrinted(context.Background(), 4)
}

// The recap: stored messages from before the start, under a heading,
// dimmed in a terminal, one's own as typed.
func TestViewRecap(t *testing.T) {
	v, out := newTestView(true, true)
	v.start(switchboard.ReadyData{LastSeq: 10}, true)
	v.render(event(t, 3, switchboard.EventMessage, switchboard.MessageData{ID: "m1", Role: switchboard.RoleUser, Content: "what time is it?", AuthorID: "ann", Channel: "stdin"}))
	v.render(event(t, 5, switchboard.EventMessage, switchboard.MessageData{ID: "m2", Role: switchboard.RoleAssistant, Content: "It is **late**."}))
	v.render(event(t, 11, switchboard.EventMessage, switchboard.MessageData{ID: "m3", Role: switchboard.RoleAssistant, Content: "Live _now_."}))
	got := ansiNames.Replace(strings.ReplaceAll(out.String(), "\x1b[0m", "[0]"))
	want := "[d]── earlier in this conversation ──\n[d]> what time is it?[0]\n" +
		"[d]It is [b]late[/b][d].[0]\n" +
		"Live [i]now[/i].\n"
	if got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}

// Cards: Markdown in the text, fields and labels; numbered choices.
func TestViewCardMarkdown(t *testing.T) {
	ui := switchboard.UI{ID: "u1", Title: "Order **42**", Text: "Ships _today_.", Fields: []switchboard.UIField{{Label: "Total", Value: "**9.99 €**"}},
		Buttons: []switchboard.UIButton{{ActionID: "u1:button:0", Label: "`Pay`"}}}
	for _, tc := range []struct {
		styled bool
		want   string
	}{
		{false, "┌ Order 42\n│ Ships today.\n│ Total: 9.99 €\n│ [1] Pay\n└ type a number to choose\n"},
		{true, "┌ [b]Order [b]42[/b][b][/b]\n│ Ships [i]today[/i].\n│ Total: [b]9.99 €[/b]\n│ [1] Pay\n└ type a number to choose\n"},
	} {
		v, out := newTestView(false, tc.styled)
		v.start(switchboard.ReadyData{}, false)
		v.render(event(t, 1, switchboard.EventUI, ui))
		if got := ansiNames.Replace(out.String()); got != tc.want {
			t.Errorf("styled %v:\n got %q\nwant %q", tc.styled, got, tc.want)
		}
		if c, ok := v.choice(1); !ok || c.actionID != "u1:button:0" {
			t.Errorf("choice 1 = %+v, %v", c, ok)
		}
	}
}

// Others' messages carry their name and channel, live and in the recap;
// an answer from elsewhere says who gave it and where; an expiry says
// nobody answered.
func TestViewLabelsOthers(t *testing.T) {
	v, out := newTestView(false, false)
	v.start(switchboard.ReadyData{LastSeq: 1}, true)
	v.render(event(t, 1, switchboard.EventMessage, switchboard.MessageData{ID: "m0", Role: switchboard.RoleUser, Content: "earlier", Author: "Carol", AuthorID: "U0CAROL", Channel: "slack"}))
	v.render(event(t, 2, switchboard.EventMessage, switchboard.MessageData{ID: "m1", Role: switchboard.RoleUser, Content: "hi all", Author: "Dan", AuthorID: "dan", Channel: "discord"}))
	v.render(event(t, 3, switchboard.EventMessage, switchboard.MessageData{ID: "m2", Role: switchboard.RoleUser, Content: "me", Author: "ann", AuthorID: "ann", Channel: "stdin", Place: Place}))
	v.render(event(t, 4, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{ConfirmationID: "c9", Approved: true, By: "Carol", Channel: "slack", Scope: switchboard.ScopeSession}))
	v.render(event(t, 5, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{ConfirmationID: "c8", By: "expired"}))
	v.render(event(t, 6, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{ConfirmationID: "c7", By: "ann", Channel: "stdin"}))
	want := "── earlier in this conversation ──\nCarol · Slack: earlier\n" +
		"Dan · Discord: hi all\n" +
		"  approved by Carol · Slack (for this session)\n" +
		"  denied: nobody answered in time\n" +
		"  denied by ann\n"
	if got := out.String(); got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	if s := v.takeStale(); s != "" {
		t.Fatalf("requests the terminal was not asking left %q", s)
	}
}

// A question answered elsewhere while the terminal asks it is taken back:
// the prompt goes, a line says who answered, and the next line is known
// to have been meant for it.
func TestViewQuestionAnsweredElsewhere(t *testing.T) {
	v, out := newTestView(true, true)
	v.start(switchboard.ReadyData{Role: "approver", Pending: []switchboard.ConfirmationRequestData{{
		ConfirmationID: "c1", ToolName: "current_time", Args: json.RawMessage(`{}`),
	}}}, false)
	v.prompt()
	v.render(event(t, 1, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{ConfirmationID: "c1", Approved: true, By: "Carol", Channel: "web"}))
	want := "  Run current_time {}? Approve? [y/N/a=always] \r\x1b[K  current_time approved by Carol · Web; no answer needed here\n> "
	if got := out.String(); got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	if _, ok := v.openConfirmation(); ok {
		t.Fatal("the answered request is still open")
	}
	if got, want := v.takeStale(), "current_time approved by Carol · Web"; got != want {
		t.Fatalf("stale = %q, want %q", got, want)
	}
	if s := v.takeStale(); s != "" {
		t.Fatalf("stale again: %q", s)
	}
}

// Arrivals and departures, dimmed, one line each: never the roster as
// attached, never oneself; a role taken away stops the questions.
func TestViewMembers(t *testing.T) {
	me := switchboard.MemberData{ID: "ann", Name: "ann", Channel: "stdin", Role: "approver", Here: true}
	carol := switchboard.MemberData{ID: "U0CAROL", Name: "Carol", Channel: "slack", Role: "owner"}
	dan := switchboard.MemberData{ID: "dan", Name: "Dan", Channel: "web", Role: "member", Here: true}
	v, out := newTestView(true, true)
	v.start(switchboard.ReadyData{Role: "approver", Members: []switchboard.MemberData{carol, me}, Pending: []switchboard.ConfirmationRequestData{{
		ConfirmationID: "c1", ToolName: "current_time", Args: json.RawMessage(`{}`),
	}}}, false)
	roster := func(ms ...switchboard.MemberData) {
		v.render(event(t, 0, switchboard.EventMembers, switchboard.MembersData{Members: ms}))
	}
	roster(carol, me)      // no news
	roster(carol, dan, me) // a new member, attached at once: one line
	away := dan
	away.Here = false
	roster(carol, away, me)
	roster(carol, dan, me)
	roster(carol, me)
	if got, want := ansiNames.Replace(strings.ReplaceAll(out.String(), "\x1b[0m", "[0]")),
		"[d]  Dan (Web) joined[0]\n[d]  Dan left[0]\n[d]  Dan (Web) is here[0]\n[d]  Dan left[0]\n"; got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	if _, ok := v.openConfirmation(); !ok {
		t.Fatal("an approver is not asked")
	}
	viewer := me
	viewer.Role = "viewer"
	roster(carol, viewer)
	if _, ok := v.openConfirmation(); ok {
		t.Fatal("a viewer is asked to approve")
	}
}

// One who may not approve is told the requests open as it attaches wait
// for others, and is not asked them.
func TestViewMemberIsNotAsked(t *testing.T) {
	v, out := newTestView(true, false)
	v.start(switchboard.ReadyData{Role: "member", Pending: []switchboard.ConfirmationRequestData{{
		ConfirmationID: "c1", ToolName: "current_time", Args: json.RawMessage(`{}`),
	}}}, false)
	v.tellWaiting()
	v.prompt()
	if got, want := out.String(), "  current_time {} waits for approval by the owner or an approver\n> "; got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}

func TestInviteCode(t *testing.T) {
	for in, want := range map[string]string{
		"abc":                               "abc",
		"  abc  ":                           "abc",
		"https://chat.example.com/s/abc":    "abc",
		"https://chat.example.com/s/abc/":   "abc",
		"":                                  "",
		"abc def":                           "",
		"http://127.0.0.1:8080/app/s/xyz42": "xyz42",
	} {
		if got := inviteCode(in); got != want {
			t.Errorf("inviteCode(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string][2]string{
		"/join CODE":     {"join", "CODE"},
		"  /JOIN\tCODE ": {"join", "CODE"},
		"/leave":         {"leave", ""},
		"join CODE":      {"", ""},
		"/":              {"", ""},
	} {
		if name, args := command(in); name != want[0] || args != want[1] {
			t.Errorf("command(%q) = %q, %q; want %q, %q", in, name, args, want[0], want[1])
		}
	}
}

// An image sent as data (a tool's chart) is saved in the session's folder
// and its path printed, once; without a folder it is only named.
func TestViewSavesInlineImages(t *testing.T) {
	dir := t.TempDir()
	v, out := newTestView(false, false)
	v.images = dir
	v.start(switchboard.ReadyData{Session: "s_abc", LastSeq: 0}, false)
	png := []byte("\x89PNG\r\n\x1a\nfake")
	ui := switchboard.UI{ID: "ui_1", Title: "chart.png", Image: &switchboard.UIImage{Data: base64.StdEncoding.EncodeToString(png), MIMEType: "image/png", Alt: "chart.png"}}
	v.render(event(t, 1, switchboard.EventUI, ui))
	path := filepath.Join(dir, "s_abc", "ui_1.png")
	if !strings.Contains(out.String(), "[image: chart.png] saved to "+path) {
		t.Fatalf("printed %q; want the saved path %s", out.String(), path)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, png) {
		t.Fatalf("saved %q, %v", got, err)
	}
	evil := ui
	evil.ID = "../../etc/x"
	out.Reset()
	v.render(event(t, 2, switchboard.EventUI, evil))
	if !strings.Contains(out.String(), "inline image/png") {
		t.Errorf("an id that is no file name: %q", out.String())
	}
	v.images = ""
	out.Reset()
	v.render(event(t, 3, switchboard.EventUI, ui))
	if !strings.Contains(out.String(), "[image: chart.png] inline image/png") {
		t.Errorf("without a folder: %q", out.String())
	}
}

// A compaction is one dim line: the messages are all still there.
func TestViewCompaction(t *testing.T) {
	v, out := newTestView(true, true)
	v.start(switchboard.ReadyData{LastSeq: 0}, true)
	v.render(event(t, 7, switchboard.EventCompaction, switchboard.CompactionData{Messages: 12, Summary: "notes"}))
	got := ansiNames.Replace(strings.ReplaceAll(out.String(), "\x1b[0m", "[0]"))
	if want := "[d]· 12 earlier messages summarised for the assistant (all still stored)[0]\n"; got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}
