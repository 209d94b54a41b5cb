// Package stdin is the terminal listener: a REPL on standard input and
// output. It works the same with a pipe, where it answers every line in turn
// and returns once the last turn has ended, so
//
//	printf 'what time is it?\ny\n' | gateway --config config.yaml
//
// prints the answer, with "y" answering the approval prompt.
package stdin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

// Key is the session key of the terminal: one session, the same across
// restarts, until /reset starts a new one.
const Key = "stdin"

// recapMessages is how many of the remembered conversation's last
// messages a terminal shows when it starts.
const recapMessages = 6

// ErrNoInput is what Run returns when input that is not a terminal (a
// pipe, a file) ends before its first line: there was nothing to answer,
// which is what a service's empty standard input looks like. Nothing was
// attached or stored.
var ErrNoInput = errors.New("stdin: input ended before its first line")

// Sessions is what the listener needs of the session manager.
type Sessions interface {
	Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error)
	Submit(ctx context.Context, sessionID string, in switchboard.Input) (*sessions.Receipt, error)
}

// Listener reads lines from In and writes the session's events to Out.
type Listener struct {
	In  io.Reader
	Out io.Writer
	// Interactive shows a prompt, a banner and the last messages of the
	// conversation (a terminal); without it the output is only what the
	// session says (a pipe).
	Interactive bool
	// Styled: Out is a terminal that shows ANSI styles. Markdown's bold and
	// italics are shown as such, the recap is dimmed, and a prompt that
	// output interrupts is redrawn in place. Without it Markdown is plain
	// text, its markers removed.
	Styled   bool
	Author   switchboard.Author
	Guide    string
	Sessions Sessions
	Logger   *slog.Logger
}

// Run serves the terminal until ctx ends, input ends or /quit. It returns
// ErrNoInput when input that is not interactive ends before its first line.
func (l *Listener) Run(ctx context.Context) error {
	src := &lineSource{ch: readLines(ctx, l.In)}
	if !l.Interactive {
		// A pipe is attached only once it says something.
		line, _, ok := src.next(ctx)
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return ErrNoInput
		}
		src.queue = append(src.queue, line)
	}
	v := &view{
		out: l.Out, self: l.Author, interactive: l.Interactive, styled: l.Styled,
		changed: make(chan struct{}),
	}
	opts := sessions.AttachOptions{Key: Key, Guide: l.Guide, Author: l.Author, AfterSeq: -1}
	if l.Interactive {
		opts.Recap = recapMessages
	}
	sub, err := l.Sessions.Attach(ctx, opts)
	if err != nil {
		return fmt.Errorf("stdin: attach: %w", err)
	}
	first := true
	for {
		v.start(sub.Ready, opts.Recap > 0)
		if l.Interactive {
			v.banner(sub.Ready, first)
		}
		rendered := make(chan struct{})
		go func() {
			defer close(rendered)
			for ev := range sub.Events() {
				v.render(ev)
			}
		}()
		next, err := l.serve(ctx, sub.Ready.Session, v, src)
		sub.Close()
		<-rendered
		if err != nil || next == "" {
			v.end()
			return err
		}
		opts = sessions.AttachOptions{SessionID: next, Author: l.Author, AfterSeq: -1}
		sub, err = l.Sessions.Attach(ctx, opts)
		if err != nil {
			return fmt.Errorf("stdin: attach after reset: %w", err)
		}
		first = false
	}
}

// readLines reads In a line at a time; the channel is closed at its end.
func readLines(ctx context.Context, in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// lineSource is the one place lines come from, in the order they were
// written: those read while a turn ran wait in the queue, and the queue
// outlives a /reset. serve, interpret and fillForm all read from it.
type lineSource struct {
	ch    <-chan string // closed at the end of input
	queue []string
	ended bool // ch is closed
}

// next returns the next line; typed is false for one that was queued
// (read while a turn ran) rather than read now.
func (s *lineSource) next(ctx context.Context) (line string, typed, ok bool) {
	if len(s.queue) > 0 {
		line, s.queue = s.queue[0], s.queue[1:]
		return line, false, true
	}
	if s.ended {
		return "", false, false
	}
	select {
	case line, ok := <-s.ch:
		if !ok {
			s.ended = true
			return "", false, false
		}
		return line, true, true
	case <-ctx.Done():
		return "", false, false
	}
}

// more is the channel to read further lines from, nil once input ended.
func (s *lineSource) more() <-chan string {
	if s.ended {
		return nil
	}
	return s.ch
}

func (s *lineSource) queued() bool { return len(s.queue) > 0 }

// serve answers lines until input ends or /quit; it returns a session id
// to move to after /reset.
func (l *Listener) serve(ctx context.Context, sessionID string, v *view, src *lineSource) (string, error) {
	for {
		line, ok := l.nextLine(ctx, v, src)
		if !ok || isQuit(line) {
			return "", nil
		}
		in, ok := l.interpret(ctx, v, line, src)
		if !ok {
			continue
		}
		r, err := l.Sessions.Submit(ctx, sessionID, in)
		if err != nil {
			v.printf("! %v\n", err)
			continue
		}
		seq, ok := l.wait(ctx, sessionID, v, r, src)
		if !ok {
			return "", nil
		}
		v.waitPrinted(ctx, seq)
		if r.NewSession != "" {
			return r.NewSession, nil
		}
	}
}

// nextLine shows the prompt (in a terminal, unless a line typed earlier is
// waiting) and returns the next line.
func (l *Listener) nextLine(ctx context.Context, v *view, src *lineSource) (string, bool) {
	if !l.Interactive || !src.queued() {
		v.prompt()
	}
	line, typed, ok := src.next(ctx)
	v.consumed(typed && ok)
	return line, ok
}

// wait waits for the session to finish with an input, queueing the lines
// that come meanwhile and taking /stop at once.
func (l *Listener) wait(ctx context.Context, sessionID string, v *view, r *sessions.Receipt, src *lineSource) (int64, bool) {
	waited := make(chan int64, 1)
	go func() {
		seq, _ := r.Wait(ctx)
		waited <- seq
	}()
	for {
		select {
		case seq := <-waited:
			return seq, true
		case line, ok := <-src.more():
			if !ok {
				src.ended = true // keep waiting for the turn; input is over
				continue
			}
			// A pipe's /stop stops the turn it follows; one typed in a
			// terminal stops the turn running now.
			if strings.TrimSpace(line) == "/stop" && (l.Interactive || !src.queued()) {
				if _, err := l.Sessions.Submit(ctx, sessionID, switchboard.Input{Kind: switchboard.InputCancel, Author: l.Author}); err != nil {
					v.printf("! %v\n", err)
				}
				continue
			}
			src.queue = append(src.queue, line)
		case <-ctx.Done():
			return 0, false
		}
	}
}

func isQuit(line string) bool {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "/quit", "/exit":
		return true
	}
	return false
}

// interpret turns a typed line into an input: the answer to an open
// approval request, a click on a numbered choice, or a message. Commands
// (/approve, /deny, /pending, /stop…) go to the session as they are,
// approval request open or not.
func (l *Listener) interpret(ctx context.Context, v *view, line string, src *lineSource) (switchboard.Input, bool) {
	in := switchboard.Input{Author: l.Author}
	trimmed := strings.TrimSpace(line)
	if c, ok := v.openConfirmation(); ok && !strings.HasPrefix(trimmed, "/") {
		in.Kind = switchboard.InputConfirm
		in.ConfirmationID = c.ConfirmationID
		switch strings.ToLower(trimmed) {
		case "y", "yes":
			in.Approved = true
		case "a", "always":
			in.Approved = true
			in.Scope = switchboard.ScopeSession
		case "", "n", "no":
		default:
			if l.Interactive {
				// A person who typed something else did not see the
				// question: ask again rather than deny.
				v.printf("  Answer y to approve, n to deny, or a to always allow %s in this session.\n", c.ToolName)
				return in, false
			}
			// In a pipe, the line after the question answers it.
		}
		return in, true
	}
	if n, err := strconv.Atoi(trimmed); err == nil {
		if ch, ok := v.choice(n); ok {
			in.Kind = switchboard.InputAction
			in.ActionID = ch.actionID
			in.Value = ch.value
			if ch.form != nil {
				value, ok := l.fillForm(ctx, v, ch.form, src)
				if !ok {
					return in, false
				}
				in.Value = value
			}
			return in, true
		}
	}
	if trimmed == "" {
		return in, false
	}
	in.Kind = switchboard.InputText
	in.Text = line
	return in, true
}

// fillForm asks for each field of a form, one line each, from the same
// lines as everything else: in a pipe the answers are the lines that
// follow the choice.
func (l *Listener) fillForm(ctx context.Context, v *view, f *switchboard.UIForm, src *lineSource) (string, bool) {
	values := map[string]string{}
	defer v.setAsk("")
	for _, field := range f.Inputs {
		mark := ""
		if field.Required {
			mark = " (required)"
		}
		v.setAsk(fmt.Sprintf("  %s%s: ", v.md(field.Label), mark))
		line, ok := l.nextLine(ctx, v, src)
		if !ok {
			return "", false
		}
		if line = strings.TrimSpace(line); line != "" {
			values[field.Name] = line
		}
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// choice is a numbered control of the last UI segment shown.
type choice struct {
	actionID string
	value    string
	form     *switchboard.UIForm
}

// view is the terminal's screen: what the renderer knows that the input
// loop needs (open approval requests, the numbered choices, how far it
// has printed) and where the cursor is, so that a prompt is never glued
// to other output. One mutex guards it all and is held while writing, so
// lines never interleave.
type view struct {
	interactive bool
	styled      bool
	self        switchboard.Author

	mu       sync.Mutex
	out      io.Writer
	printed  int64
	changed  chan struct{} // closed and replaced whenever printed grows
	confirms []switchboard.ConfirmationRequestData
	warned   map[string]bool // confirmation ids whose warning was shown
	choices  map[int]choice
	streamed map[string]bool // message ids whose deltas were printed
	// Events with 0 < seq <= recapThrough are the recap: stored messages
	// shown on start, before the live ones.
	recapThrough int64
	recapShown   bool

	midLine bool   // the cursor is not at the start of a line
	waiting bool   // the input loop waits for a line to be typed
	shown   string // the prompt at the cursor, "" when none is
	ask     string // a form field's question, the prompt while set
}

// start resets what belongs to one session: on start and after /reset.
func (v *view) start(r switchboard.ReadyData, recap bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.printed = r.LastSeq
	v.confirms = nil
	v.warned = map[string]bool{}
	v.choices = nil
	v.streamed = map[string]bool{}
	v.recapThrough, v.recapShown = 0, false
	if recap {
		v.recapThrough = r.LastSeq
	}
	// Requests open before this listener came: a restart, another
	// channel's turn. The next prompt is the first one's question.
	for _, c := range r.Pending {
		v.addConfirmLocked(c)
	}
}

// banner greets a person at a terminal; an empty conversation also gets
// the guide's greeting and suggestions.
func (v *view) banner(r switchboard.ReadyData, first bool) {
	var b strings.Builder
	if first {
		fmt.Fprintf(&b, "Switchboard · session %s · guide %s\n", r.Session, r.Guide)
	}
	if r.LastSeq == 0 {
		if r.Greeting != "" {
			b.WriteString(v.md(r.Greeting) + "\n")
		}
		if len(r.Suggestions) > 0 {
			b.WriteString("Try: " + strings.Join(r.Suggestions, " · ") + "\n")
		}
	}
	if first {
		b.WriteString("Type /help for commands, /quit or Ctrl-D to leave.\n")
	}
	v.printf("%s", b.String())
}

// end leaves the cursor at the start of a line.
func (v *view) end() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.waiting = false
	if v.shown != "" || v.midLine {
		io.WriteString(v.out, "\n")
	}
	v.shown, v.midLine = "", false
}

func (v *view) md(s string) string { return markdown(s, v.styled, "") }

func (v *view) printf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.writeLocked(fmt.Sprintf(format, args...))
}

// writeLocked prints whole lines: on a line of their own, taking a prompt
// off the screen first and putting it back after.
func (v *view) writeLocked(s string) {
	v.freshLineLocked()
	io.WriteString(v.out, s)
	v.midLine = s != "" && !strings.HasSuffix(s, "\n")
	if v.waiting && !v.midLine {
		v.showPromptLocked()
	}
}

// freshLineLocked moves to the start of a line. A prompt on the screen is
// erased where the terminal can (it is shown again after the output),
// else left behind with a newline.
func (v *view) freshLineLocked() {
	switch {
	case v.shown != "" && v.styled:
		io.WriteString(v.out, "\r\x1b[K")
	case v.shown != "" || v.midLine:
		io.WriteString(v.out, "\n")
	}
	v.shown, v.midLine = "", false
}

// promptLocked is what the input loop asks with now: a form field, the
// first open approval request, or "> " in a terminal ("" in a pipe).
func (v *view) promptLocked() string {
	switch {
	case v.ask != "":
		return v.ask
	case len(v.confirms) > 0:
		c := v.confirms[0]
		return fmt.Sprintf("  Run %s %s? Approve? [y/N/a=always] ", c.ToolName, compact(c.Args))
	case v.interactive:
		return "> "
	}
	return ""
}

// showPromptLocked puts the prompt at the cursor unless it is there.
func (v *view) showPromptLocked() {
	p := v.promptLocked()
	if p == "" || p == v.shown {
		return
	}
	v.freshLineLocked()
	if len(v.confirms) > 0 && v.ask == "" {
		c := v.confirms[0]
		if c.SecurityWarning != "" && !v.warned[c.ConfirmationID] {
			v.warned[c.ConfirmationID] = true
			fmt.Fprintf(v.out, "  ⚠ %s\n", c.SecurityWarning)
		}
	}
	io.WriteString(v.out, p)
	v.shown, v.midLine = p, true
}

// prompt shows the prompt before the input loop waits for a line.
func (v *view) prompt() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.waiting = v.interactive
	v.showPromptLocked()
}

// consumed: the input loop took a line. One typed at the prompt of a
// terminal was echoed with its newline; a piped one (or one typed ahead)
// was not, so the line of the prompt it answers is ended here.
func (v *view) consumed(typed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.waiting = false
	if typed && v.interactive {
		v.shown, v.midLine = "", false
		return
	}
	if v.shown != "" {
		io.WriteString(v.out, "\n")
		v.shown, v.midLine = "", false
	}
}

func (v *view) setAsk(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ask = s
}

func (v *view) openConfirmation() (switchboard.ConfirmationRequestData, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.confirms) == 0 {
		return switchboard.ConfirmationRequestData{}, false
	}
	return v.confirms[0], true
}

// addConfirmLocked notes an open request once (the one open as the
// listener attached may also come as an event).
func (v *view) addConfirmLocked(c switchboard.ConfirmationRequestData) bool {
	for _, have := range v.confirms {
		if have.ConfirmationID == c.ConfirmationID {
			return false
		}
	}
	v.confirms = append(v.confirms, c)
	return true
}

func (v *view) choice(n int) (choice, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.choices[n]
	return c, ok
}

// waitPrinted returns once the event with seq has been printed.
func (v *view) waitPrinted(ctx context.Context, seq int64) {
	for {
		v.mu.Lock()
		done, ch := v.printed >= seq, v.changed
		v.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (v *view) markPrinted(seq int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if seq > v.printed {
		v.printed = seq
		close(v.changed)
		v.changed = make(chan struct{})
	}
}

// render prints one event in the terminal's idiom.
func (v *view) render(ev switchboard.Event) {
	defer v.markPrinted(ev.Seq)
	payload, err := ev.Payload()
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Seq > 0 && ev.Seq <= v.recapThrough {
		v.recapLocked(payload)
		return
	}
	switch d := payload.(type) {
	case *switchboard.DeltaData:
		if v.shown != "" {
			v.freshLineLocked()
		}
		io.WriteString(v.out, d.Content)
		if d.Content != "" {
			v.midLine = !strings.HasSuffix(d.Content, "\n")
		}
		v.streamed[d.MessageID] = true
	case *switchboard.MessageData:
		switch {
		case d.Role == switchboard.RoleAssistant && v.streamed[d.ID]:
			delete(v.streamed, d.ID)
			if v.midLine && v.shown == "" {
				io.WriteString(v.out, "\n")
				v.midLine = false
			}
			if v.waiting {
				v.showPromptLocked()
			}
		case d.Role == switchboard.RoleAssistant:
			if d.Content != "" {
				v.writeLocked(markdown(d.Content, v.styled, "") + "\n")
			}
		case d.Role == switchboard.RoleUser:
			if !v.isSelf(d) {
				v.writeLocked(fmt.Sprintf("[%s] %s\n", d.Author, d.Content))
			}
		default:
			v.writeLocked(d.Content + "\n")
		}
	case *switchboard.ToolCallData:
		v.writeLocked(fmt.Sprintf("  → %s %s\n", d.Name, compact(d.Args)))
	case *switchboard.ToolResponseData:
		if d.Name == tools.PresentTool && !d.IsError {
			return // the card it showed is printed; its result speaks to the model
		}
		mark := "←"
		if d.IsError {
			mark = "✗"
		}
		v.writeLocked(fmt.Sprintf("  %s %s: %s\n", mark, d.Name, d.ContentPreview))
	case *switchboard.ConfirmationRequestData:
		if !v.addConfirmLocked(*d) {
			return
		}
		if len(v.confirms) == 1 {
			// Its question is the prompt, shown now: the turn waits for it.
			v.showPromptLocked()
		} else {
			v.writeLocked(fmt.Sprintf("  (next) %s %s also waits for approval\n", d.ToolName, compact(d.Args)))
		}
	case *switchboard.ConfirmationResolvedData:
		for i, c := range v.confirms {
			if c.ConfirmationID == d.ConfirmationID {
				v.confirms = append(v.confirms[:i], v.confirms[i+1:]...)
				break
			}
		}
		word := "denied"
		if d.Approved {
			word = "approved"
		}
		if d.Scope == switchboard.ScopeSession {
			word += fmt.Sprintf(" by %s (for this session)", d.By)
		} else {
			word += " by " + d.By
		}
		v.writeLocked("  " + word + "\n")
	case *switchboard.UI:
		v.writeLocked(v.renderUILocked(d))
	case *switchboard.ErrorData:
		v.writeLocked(fmt.Sprintf("! %s\n", d.Message))
	}
}

func (v *view) isSelf(d *switchboard.MessageData) bool {
	return d.Channel == v.self.Channel && d.AuthorID == v.self.ID
}

// recapLocked shows a stored message from before this start, dimmed
// under a heading; one's own messages too, as they were typed.
func (v *view) recapLocked(payload any) {
	d, ok := payload.(*switchboard.MessageData)
	if !ok || d.Content == "" {
		return
	}
	base := ""
	if v.styled {
		base = ansiDim
	}
	var text string
	switch {
	case d.Role == switchboard.RoleUser && v.isSelf(d):
		text = "> " + d.Content
	case d.Role == switchboard.RoleUser:
		text = fmt.Sprintf("[%s] %s", d.Author, d.Content)
	case d.Role == switchboard.RoleAssistant:
		text = markdown(d.Content, v.styled, base)
	default:
		text = d.Content
	}
	var b strings.Builder
	if !v.recapShown {
		v.recapShown = true
		b.WriteString(base + "── earlier in this conversation ──\n")
	}
	b.WriteString(base + text)
	if v.styled {
		b.WriteString("\x1b[0m")
	}
	b.WriteString("\n")
	v.writeLocked(b.String())
}

// renderUILocked shows a card as text with numbered choices; typing a
// number clicks it.
func (v *view) renderUILocked(ui *switchboard.UI) string {
	var b strings.Builder
	choices := map[int]choice{}
	n := 0
	add := func(c choice) int {
		n++
		choices[n] = c
		return n
	}
	md := func(s string) string { return markdown(s, v.styled, "") }
	if ui.Title != "" {
		fmt.Fprintf(&b, "┌ %s\n", mdRenderer{styled: v.styled}.bold(ui.Title))
	}
	if ui.Text != "" {
		for _, line := range strings.Split(md(ui.Text), "\n") {
			fmt.Fprintf(&b, "│ %s\n", line)
		}
	}
	for _, f := range ui.Fields {
		fmt.Fprintf(&b, "│ %s: %s\n", md(f.Label), md(f.Value))
	}
	if ui.Image != nil {
		src := ui.Image.URL
		if src == "" {
			src = "inline " + ui.Image.MIMEType
		}
		fmt.Fprintf(&b, "│ [image: %s] %s\n", ui.Image.Alt, src)
	}
	if len(ui.Buttons) > 0 {
		b.WriteString("│")
		for _, btn := range ui.Buttons {
			fmt.Fprintf(&b, " [%d] %s", add(choice{actionID: btn.ActionID, value: btn.Value}), md(btn.Label))
		}
		b.WriteString("\n")
	}
	if ui.Select != nil {
		fmt.Fprintf(&b, "│ %s:", md(firstNonEmpty(ui.Select.Placeholder, "Choose")))
		for _, o := range ui.Select.Options {
			fmt.Fprintf(&b, " [%d] %s", add(choice{actionID: ui.Select.ActionID, value: o.Value}), md(o.Label))
		}
		b.WriteString("\n")
	}
	if ui.Form != nil {
		names := make([]string, len(ui.Form.Inputs))
		for i, in := range ui.Form.Inputs {
			names[i] = md(in.Label)
		}
		fmt.Fprintf(&b, "│ [%d] %s (%s)\n", add(choice{actionID: ui.Form.ActionID, form: ui.Form}),
			md(firstNonEmpty(ui.Form.SubmitLabel, "Fill in the form")), strings.Join(names, ", "))
	}
	if n > 0 {
		b.WriteString("└ type a number to choose\n")
	} else {
		b.WriteString("└\n")
	}
	v.choices = choices
	return b.String()
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
