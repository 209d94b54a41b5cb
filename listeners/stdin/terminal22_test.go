package stdin

// The terminal's manners (issue 22, item 10): a form checks each field as
// it is typed, the gateway's listings fit the terminal's width, log lines
// are kept apart from the conversation, and a pipe is a one-off.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/tools"
)

// lines is a line source of the given lines, then the end of input.
func lines(ls ...string) *lineSource {
	ch := make(chan string, len(ls))
	for _, l := range ls {
		ch <- l
	}
	close(ch)
	return &lineSource{ch: ch}
}

var signUp = &switchboard.UIForm{ActionID: "ui_1:form", Inputs: []switchboard.UIFormInput{
	{Name: "name", Label: "Name", Type: "text", Required: true},
	{Name: "age", Label: "Age", Type: "number"},
	{Name: "email", Label: "Email", Type: "email", Required: true},
	{Name: "city", Label: "City", Type: "text"},
}}

// A field answered wrongly is refused as it is typed, with the reason,
// and asked again alone: the form sent is one the session takes.
func TestFormAsksAgainForTheFieldThatDoesNotDo(t *testing.T) {
	v, out := newTestView(true, false)
	l := &Listener{Interactive: true, Author: ann}
	value, ok := l.fillForm(context.Background(), v, signUp,
		lines("", "Ada", "forty", "40", "ada", "ada@example.com", ""))
	if !ok {
		t.Fatalf("the form was not sent:\n%s", out)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(value), &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"name": "Ada", "age": "40", "email": "ada@example.com"}; !equalMaps(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
	want := "  Name (required): " +
		"  ! Field \"Name\" is required. Try again, or /cancel to leave the form.\n" +
		"  Name (required): " +
		"  Age (number): " +
		"  ! Field \"Age\" must be a number. Try again, or /cancel to leave the form.\n" +
		"  Age (number): " +
		"  Email (email, required): " +
		"  ! Field \"Email\" must be an email address. Try again, or /cancel to leave the form.\n" +
		"  Email (email, required): " +
		"  City: "
	if out.String() != want {
		t.Errorf("the terminal shows\n%q\nwant\n%q", out.String(), want)
	}
	// What the terminal sends, the session takes.
	ui := switchboard.UI{ID: "ui_1", Form: signUp}
	if _, err := tools.DescribeAction(ui, signUp.ActionID, value); err != nil {
		t.Errorf("the session refuses the form the terminal sent: %v", err)
	}
}

// /cancel leaves a form unsent; so does the end of input.
func TestFormCancel(t *testing.T) {
	v, out := newTestView(true, false)
	l := &Listener{Interactive: true, Author: ann}
	if _, ok := l.fillForm(context.Background(), v, signUp, lines("Ada", "/cancel", "not a field")); ok {
		t.Fatalf("sent after /cancel:\n%s", out)
	}
	if !strings.Contains(out.String(), "The form was not sent.") {
		t.Errorf("/cancel is not told:\n%s", out)
	}
	if _, ok := l.fillForm(context.Background(), v, signUp, lines("")); ok {
		t.Fatal("a form was sent with a required field never answered")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// formModel shows a form when asked for one, and echoes everything else.
func formModel(r openaitest.Request) openaitest.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "user" && strings.Contains(openaitest.Text(last.Content), "form please") {
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_form", Name: "present", Args: `{"title":"Sign up",
			"form":{"inputs":[{"name":"name","label":"Name","required":true},{"name":"age","label":"Age","type":"number"}]}}`}}}
	}
	return model(r)
}

// The form in the terminal end to end: the session gets the whole form
// once, filled in as its check wants it.
func TestFormInTheTerminal(t *testing.T) {
	gw := newGateway(t)
	gw.LLM.Respond(formModel)
	tm := startTerm(t, gw.Manager)
	tm.send("form please")
	tm.expect("[1] Fill in the form (Name, Age)")
	tm.send("1", "", "Ada", "forty", "40")
	tm.expect(`! Field "Name" is required.`)
	tm.expect(`! Field "Age" must be a number.`)
	tm.expect(`You said: Submitted "Sign up": {"age":"40","name":"Ada"}`)
	if strings.Contains(tm.out.String(), "! field") {
		t.Errorf("the session refused the form:\n%s", tm.out.String())
	}
	tm.quit()
}

// ptyScreen is a pseudo-terminal of the given width, for Out, and what is
// written to it.
func ptyScreen(t *testing.T, cols uint16) (tty io.Writer, out *screen) {
	t.Helper()
	ptmx, tt, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	out = &screen{changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(out, ptmx)
	}()
	t.Cleanup(func() {
		tt.Close()
		ptmx.Close()
		<-done
	})
	return tt, out
}

// /tools in a terminal 50 columns wide: no line is wider, and a tool's
// description goes on under itself.
func TestToolsFitTheTerminalWidth(t *testing.T) {
	gw := newGateway(t)
	tty, out := ptyScreen(t, 50)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	l := &Listener{In: pr, Out: tty, Interactive: true, Author: tester, Guide: "assistant", Sessions: gw.Manager,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		<-done
	})
	tm := &term{t: t, in: pw, out: out, done: done, cancel: cancel}
	tm.expect("Type /help for commands")
	tm.send("/tools")
	tm.expect("Tools of the guide \"assistant\":")
	tm.expect("\n> ")
	text := strings.ReplaceAll(out.String(), "\r\n", "\n")
	listing := text[strings.Index(text, "Tools of the guide"):strings.LastIndex(text, "\n> ")]
	for _, line := range strings.Split(listing, "\n") {
		if n := utf8.RuneCountInString(line); n > 50 {
			t.Errorf("a line of %d columns in a terminal of 50: %q", n, line)
		}
	}
	if !strings.Contains(listing, "  current_time   [ask] ") || !strings.Contains(listing, "\n                 ") {
		t.Errorf("the descriptions do not go on under themselves:\n%s", listing)
	}
	tm.quit()
}

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		cols     int
		want     string
	}{
		{"fits", "  short line", 40, "  short line"},
		{"tool", "  calculator     [auto] Evaluates an arithmetic expression exactly", 40,
			"  calculator     [auto] Evaluates an\n                 arithmetic expression\n                 exactly"},
		{"help", "  /approve [id] [always]    approve a waiting tool call (always: it)", 50,
			"  /approve [id] [always]    approve a waiting tool\n                            call (always: it)"},
		{"prose", "/revoke <tool> asks again before a tool allowed for this session runs.", 30,
			"/revoke <tool> asks again\nbefore a tool allowed for this\nsession runs."},
		{"a word too long", "see https://example.com/a/very/long/path/indeed", 20,
			"see\nhttps://example.com/\na/very/long/path/ind\need"},
		{"wide characters", "  名前   [ask] 日本語の説明はここにあります", 40,
			"  名前   [ask]\n         日本語の説明はここにあります"},
		{"wide characters cut", "  名前   [ask] 日本語の説明はここにあります", 30,
			"  名前   [ask]\n         日本語の説明はここに\n         あります"},
	} {
		if got := wrap(tc.in, tc.cols); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// A pipe is not wrapped: its lines are for programs.
func TestPipeIsNotWrapped(t *testing.T) {
	v, out := newTestView(false, false)
	v.cols = func() int { return 20 }
	v.start(switchboard.ReadyData{}, false)
	long := "  current_time   [ask] Returns the current date, time and weekday."
	v.render(event(t, 1, switchboard.EventMessage, switchboard.MessageData{ID: "m1", Role: switchboard.RoleSystem, Content: long}))
	if got := out.String(); got != long+"\n" {
		t.Errorf("got %q", got)
	}
}

// Log records shown in the chat: warnings and up, each on a line of its
// own, the prompt put back after; before the chat, to the fallback.
func TestNoticesKeepApartFromThePrompt(t *testing.T) {
	for _, tc := range []struct {
		styled bool
		want   string
	}{
		{false, "> \n[log] WARN provider failed provider=main attempt=2 err=\"connection refused\"\n> "},
		{true, "> \r\x1b[K\x1b[2m[log] WARN provider failed provider=main attempt=2 err=\"connection refused\"\x1b[0m\n> "},
	} {
		var fallback bytes.Buffer
		n := &Notices{Fallback: &fallback}
		log := slog.New(n.Handler(slog.LevelWarn)).With("provider", "main")
		log.Warn("before the chat")
		log.Info("not shown")

		v, out := newTestView(true, tc.styled)
		n.attach(v)
		v.start(switchboard.ReadyData{}, false)
		v.prompt()
		log.Info("not shown either")
		log.Warn("provider failed", "attempt", 2, "err", "connection refused")
		if got := out.String(); got != tc.want {
			t.Errorf("styled %v:\n got %q\nwant %q", tc.styled, got, tc.want)
		}
		n.detach(v)
		log.WithGroup("g").Error("after", "k", "v")
		if got, want := fallback.String(), "[log] WARN before the chat provider=main\n[log] ERROR after provider=main g.k=v\n"; got != want {
			t.Errorf("fallback:\n got %q\nwant %q", got, want)
		}
	}
}

// A pipe is a one-off: a new conversation each run, never the terminal's,
// unless Session says which to continue.
func TestPipeStartsANewConversation(t *testing.T) {
	gw := newGateway(t)
	pipe := func(session, line string) string {
		t.Helper()
		var out bytes.Buffer
		l := &Listener{In: strings.NewReader(line + "\n"), Out: &out, Author: tester, Guide: "assistant", Sessions: gw.Manager,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Session: session}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if err := l.Run(ctx); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if !strings.Contains(out.String(), "You said: "+line) {
			t.Fatalf("%q not answered:\n%s", line, out.String())
		}
		return l.homeID
	}
	tm := startTerm(t, gw.Manager)
	tm.send("the terminal's own")
	tm.expect("You said: the terminal's own")
	tm.quit()
	own := ownSession(t, gw)

	a, b := pipe("", "one-off a"), pipe("", "one-off b")
	if a == own || b == own || a == b || a == "" {
		t.Fatalf("one-offs in %q and %q, the terminal's is %q", a, b, own)
	}
	pipe(SessionTerminal, "to the terminal")
	pipe(a, "to a again")
	in := map[string]string{}
	for _, sid := range []string{own, a, b} {
		evs, err := gw.DB.EventsAfter(context.Background(), sid, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if p, err := ev.Payload(); err == nil {
				if d, ok := p.(*switchboard.MessageData); ok && d.Role == switchboard.RoleUser {
					in[d.Content] = sid
				}
			}
		}
	}
	for text, want := range map[string]string{"the terminal's own": own, "to the terminal": own, "one-off a": a, "to a again": a, "one-off b": b} {
		if in[text] != want {
			t.Errorf("%q is in %q, want %q", text, in[text], want)
		}
	}
}
