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
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Key is the session key of the terminal: one session, the same across
// restarts, until /reset starts a new one.
const Key = "stdin"

// Sessions is what the listener needs of the session manager.
type Sessions interface {
	Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error)
	Submit(ctx context.Context, sessionID string, in switchboard.Input) (*sessions.Receipt, error)
}

// Listener reads lines from In and writes the session's events to Out.
type Listener struct {
	In  io.Reader
	Out io.Writer
	// Interactive shows a prompt and a banner (a terminal); without it the
	// output is only what the session says (a pipe).
	Interactive bool
	Author      switchboard.Author
	Guide       string
	Sessions    Sessions
	Logger      *slog.Logger
}

// choice is a numbered control of the last UI segment shown.
type choice struct {
	actionID string
	value    string
	form     *switchboard.UIForm
}

// view is what the renderer knows that the input loop needs: open approval
// requests, the numbered choices, and how far it has printed.
type view struct {
	mu       sync.Mutex
	printed  int64
	changed  chan struct{} // closed and replaced whenever printed grows
	confirms []switchboard.ConfirmationRequestData
	choices  map[int]choice
	outMu    sync.Mutex
	out      io.Writer
	midLine  bool
	streamed map[string]bool // message ids whose deltas were printed
	self     switchboard.Author
}

// Run serves the terminal until ctx ends or input ends.
func (l *Listener) Run(ctx context.Context) error {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(l.In)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()

	sub, err := l.Sessions.Attach(ctx, sessions.AttachOptions{Key: Key, Guide: l.Guide, Author: l.Author, AfterSeq: -1})
	if err != nil {
		return fmt.Errorf("stdin: attach: %w", err)
	}
	for {
		v := &view{changed: make(chan struct{}), out: l.Out, streamed: map[string]bool{}, self: l.Author, printed: sub.Ready.LastSeq}
		rendered := make(chan struct{})
		go func() {
			defer close(rendered)
			for ev := range sub.Events() {
				v.render(ev)
			}
		}()
		if l.Interactive {
			v.printf("Switchboard: session %s, guide %s. Type /help for commands, Ctrl-D to quit.\n", sub.Ready.Session, sub.Ready.Guide)
		}
		next, err := l.serve(ctx, sub.Ready.Session, v, lines)
		sub.Close()
		<-rendered
		if err != nil || next == "" {
			return err
		}
		sub, err = l.Sessions.Attach(ctx, sessions.AttachOptions{SessionID: next, Author: l.Author, AfterSeq: -1})
		if err != nil {
			return fmt.Errorf("stdin: attach after reset: %w", err)
		}
	}
}

// serve answers lines until input ends; it returns a session id to move to
// after /reset.
func (l *Listener) serve(ctx context.Context, sessionID string, v *view, lines <-chan string) (string, error) {
	var queued []string // lines typed while a turn was running
	for {
		if lines == nil && len(queued) == 0 {
			return "", nil
		}
		if l.Interactive && len(queued) == 0 {
			v.prompt()
		}
		var line string
		if len(queued) > 0 {
			line, queued = queued[0], queued[1:]
		} else {
			select {
			case <-ctx.Done():
				return "", nil
			case next, ok := <-lines:
				if !ok {
					return "", nil
				}
				line = next
			}
		}
		in, ok := l.interpret(ctx, v, line, lines)
		if !ok {
			continue
		}
		r, err := l.Sessions.Submit(ctx, sessionID, in)
		if err != nil {
			v.printf("! %v\n", err)
			continue
		}
		// Wait for the turn to end, still taking /stop at once.
		waited := make(chan int64, 1)
		go func() {
			seq, _ := r.Wait(ctx)
			waited <- seq
		}()
		var seq int64
	wait:
		for {
			select {
			case seq = <-waited:
				break wait
			case next, ok := <-lines:
				if !ok {
					lines = nil // keep waiting for the turn; input is over
					continue
				}
				if strings.TrimSpace(next) == "/stop" {
					if _, err := l.Sessions.Submit(ctx, sessionID, switchboard.Input{Kind: switchboard.InputCancel, Author: l.Author}); err != nil {
						v.printf("! %v\n", err)
					}
					continue
				}
				queued = append(queued, next)
			case <-ctx.Done():
				return "", nil
			}
		}
		v.waitPrinted(ctx, seq)
		if r.NewSession != "" {
			return r.NewSession, nil
		}
	}
}

// interpret turns a typed line into an input: the answer to an open
// approval request, a click on a numbered choice, or a message.
func (l *Listener) interpret(ctx context.Context, v *view, line string, lines <-chan string) (switchboard.Input, bool) {
	in := switchboard.Input{Author: l.Author}
	if c, ok := v.openConfirmation(); ok && !strings.HasPrefix(strings.TrimSpace(line), "/") {
		answer := strings.ToLower(strings.TrimSpace(line))
		in.Kind = switchboard.InputConfirm
		in.ConfirmationID = c.ConfirmationID
		in.Approved = answer == "y" || answer == "yes"
		return in, true
	}
	if n, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
		if ch, ok := v.choice(n); ok {
			in.Kind = switchboard.InputAction
			in.ActionID = ch.actionID
			in.Value = ch.value
			if ch.form != nil {
				value, ok := l.fillForm(ctx, v, ch.form, lines)
				if !ok {
					return in, false
				}
				in.Value = value
			}
			return in, true
		}
	}
	if strings.TrimSpace(line) == "" {
		return in, false
	}
	in.Kind = switchboard.InputText
	in.Text = line
	return in, true
}

// fillForm asks for each field of a form, one line each.
func (l *Listener) fillForm(ctx context.Context, v *view, f *switchboard.UIForm, lines <-chan string) (string, bool) {
	values := map[string]string{}
	for _, field := range f.Inputs {
		mark := ""
		if field.Required {
			mark = " (required)"
		}
		v.printf("  %s%s: ", field.Label, mark)
		select {
		case line, ok := <-lines:
			if !ok {
				return "", false
			}
			if line = strings.TrimSpace(line); line != "" {
				values[field.Name] = line
			}
		case <-ctx.Done():
			return "", false
		}
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return "", false
	}
	return string(raw), true
}

func (v *view) printf(format string, args ...any) {
	v.outMu.Lock()
	defer v.outMu.Unlock()
	if v.midLine {
		fmt.Fprintln(v.out)
		v.midLine = false
	}
	fmt.Fprintf(v.out, format, args...)
}

func (v *view) prompt() {
	v.outMu.Lock()
	defer v.outMu.Unlock()
	fmt.Fprint(v.out, "> ")
}

func (v *view) openConfirmation() (switchboard.ConfirmationRequestData, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.confirms) == 0 {
		return switchboard.ConfirmationRequestData{}, false
	}
	return v.confirms[0], true
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

// render prints one event in the terminal's idiom.
func (v *view) render(ev switchboard.Event) {
	defer v.markPrinted(ev.Seq)
	payload, err := ev.Payload()
	if err != nil {
		return
	}
	switch d := payload.(type) {
	case *switchboard.DeltaData:
		v.outMu.Lock()
		fmt.Fprint(v.out, d.Content)
		v.midLine = !strings.HasSuffix(d.Content, "\n")
		v.streamed[d.MessageID] = true
		v.outMu.Unlock()
	case *switchboard.MessageData:
		switch {
		case d.Role == switchboard.RoleAssistant && v.streamed[d.ID]:
			v.outMu.Lock()
			delete(v.streamed, d.ID)
			if v.midLine {
				fmt.Fprintln(v.out)
				v.midLine = false
			}
			v.outMu.Unlock()
		case d.Role == switchboard.RoleAssistant:
			v.printf("%s\n", d.Content)
		case d.Role == switchboard.RoleUser:
			if d.Channel != v.self.Channel || d.AuthorID != v.self.ID {
				v.printf("[%s] %s\n", d.Author, d.Content)
			}
		default:
			v.printf("%s\n", d.Content)
		}
	case *switchboard.ToolCallData:
		v.printf("  → %s %s\n", d.Name, compact(d.Args))
	case *switchboard.ToolResponseData:
		mark := "←"
		if d.IsError {
			mark = "✗"
		}
		v.printf("  %s %s: %s\n", mark, d.Name, d.ContentPreview)
	case *switchboard.ConfirmationRequestData:
		v.mu.Lock()
		v.confirms = append(v.confirms, *d)
		v.mu.Unlock()
		if d.SecurityWarning != "" {
			v.printf("  ⚠ %s\n", d.SecurityWarning)
		}
		v.printf("  Run %s %s? Approve? [y/N] ", d.ToolName, compact(d.Args))
		v.outMu.Lock()
		v.midLine = true // a piped answer is not echoed: start the next line fresh
		v.outMu.Unlock()
	case *switchboard.ConfirmationResolvedData:
		v.mu.Lock()
		for i, c := range v.confirms {
			if c.ConfirmationID == d.ConfirmationID {
				v.confirms = append(v.confirms[:i], v.confirms[i+1:]...)
				break
			}
		}
		v.mu.Unlock()
		word := "denied"
		if d.Approved {
			word = "approved"
		}
		v.printf("  %s by %s\n", word, d.By)
	case *switchboard.UI:
		v.renderUI(d)
	case *switchboard.ErrorData:
		v.printf("! %s\n", d.Message)
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

// renderUI prints a card as text with numbered choices; typing a number
// clicks it.
func (v *view) renderUI(ui *switchboard.UI) {
	var b strings.Builder
	choices := map[int]choice{}
	n := 0
	add := func(c choice) int {
		n++
		choices[n] = c
		return n
	}
	if ui.Title != "" {
		fmt.Fprintf(&b, "┌ %s\n", ui.Title)
	}
	if ui.Text != "" {
		for _, line := range strings.Split(ui.Text, "\n") {
			fmt.Fprintf(&b, "│ %s\n", line)
		}
	}
	for _, f := range ui.Fields {
		fmt.Fprintf(&b, "│ %s: %s\n", f.Label, f.Value)
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
			fmt.Fprintf(&b, " [%d] %s", add(choice{actionID: btn.ActionID, value: btn.Value}), btn.Label)
		}
		b.WriteString("\n")
	}
	if ui.Select != nil {
		fmt.Fprintf(&b, "│ %s:", firstNonEmpty(ui.Select.Placeholder, "Choose"))
		for _, o := range ui.Select.Options {
			fmt.Fprintf(&b, " [%d] %s", add(choice{actionID: ui.Select.ActionID, value: o.Value}), o.Label)
		}
		b.WriteString("\n")
	}
	if ui.Form != nil {
		names := make([]string, len(ui.Form.Inputs))
		for i, in := range ui.Form.Inputs {
			names[i] = in.Label
		}
		fmt.Fprintf(&b, "│ [%d] %s (%s)\n", add(choice{actionID: ui.Form.ActionID, form: ui.Form}),
			firstNonEmpty(ui.Form.SubmitLabel, "Fill in the form"), strings.Join(names, ", "))
	}
	if n > 0 {
		b.WriteString("└ type a number to choose\n")
	} else {
		b.WriteString("└\n")
	}
	v.mu.Lock()
	v.choices = choices
	v.mu.Unlock()
	v.printf("%s", b.String())
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
