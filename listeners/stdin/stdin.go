// Package stdin is the terminal listener: a REPL on standard input and
// output. It works the same with a pipe, where it answers every line in turn
// and returns once the last turn has ended, so
//
//	printf 'what time is it?\ny\n' | gateway --config config.yaml
//
// prints the answer, with "y" answering the approval prompt.
//
// The terminal shows its own session (Key) until /join CODE binds its one
// place (Channel, Address) to a conversation someone shared; it shows that
// one, after restarts too, until the session's /leave unbinds the place.
// A pipe is a one-off: it starts a new conversation each time, unless
// Listener.Session names the one to continue (SessionTerminal: the one the
// terminal shows).
package stdin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/places"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

// Key is the session key of the terminal: one session, the same across
// restarts, until /reset starts a new one.
const Key = "stdin"

// The terminal's one place: a session it shows after /join is bound to it
// (Manager.Bind), so the next start shows that session again.
const (
	// Channel is the terminal's channel: its Author's and its binding's.
	Channel = "stdin"
	// Address is the terminal's place in its channel.
	Address = "terminal"
	// Place is Input.Place of what is typed in a joined session: the
	// session's /leave unbinds it.
	Place = Channel + ":" + Address
)

// SessionTerminal, as Listener.Session, continues the conversation the
// terminal shows (its own, or the one it joined) from a pipe.
const SessionTerminal = "terminal"

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
	JoinPlace(ctx context.Context, code string, author switchboard.Author, p sessions.Place, recap int, prove func(context.Context) error) (string, collaboration.Role, error)
	BindWithRecap(ctx context.Context, channel, address, sessionID string, recap int) (switchboard.Binding, error)
	Binding(ctx context.Context, channel, address string) (switchboard.Binding, error)
	Unbind(ctx context.Context, channel, address string) error
	// Upload saves the files /attach staged (files.go) in the session's
	// workspace, for the message they go with.
	Upload(ctx context.Context, sessionID string, in switchboard.Input, files []sessions.Incoming) ([]switchboard.File, error)
	// Discard removes files Upload saved that no message will bring.
	Discard(ctx context.Context, sessionID string, files []switchboard.File)
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
	// ImageDir is where images sent as data (a chart a tool drew) are
	// saved, one folder per session, so the terminal can print a path to
	// open; empty: they are only named.
	ImageDir string
	// Session is the conversation to continue: a session id (one this
	// person is in), or SessionTerminal for the one the terminal shows.
	// Empty: input that is not a terminal (a pipe, a one-off) starts a new
	// conversation every run, so it never lands in the person's, and a
	// terminal shows the one it showed last (its own, or one it joined).
	Session string
	// Width is the terminal's width in columns, asked each time the
	// gateway's own texts (/tools, /help) are wrapped to fit it; nil:
	// Out's, when Out is a terminal, else 80. A pipe is not wrapped.
	Width func() int
	// Notices, if set, shows log records in the chat while it runs: on
	// lines of their own, the prompt put back after them.
	Notices *Notices
	// LogNote is said once under the banner: where the log goes.
	LogNote string

	// homeID is the conversation the terminal goes back to (/leave, a
	// joined one gone) when it is not found by Key: a pipe's new one, or
	// the one Session named.
	homeID string
	// files are what /attach staged for the next message (files.go).
	files attachments
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
		changed: make(chan struct{}), images: l.ImageDir, cols: l.width(),
	}
	if l.Notices != nil {
		l.Notices.attach(v)
		defer l.Notices.detach(v)
	}
	at, err := l.initial(ctx)
	if err != nil {
		return err
	}
	first := true
	for {
		sub, err := l.Sessions.Attach(ctx, at.opts)
		if err != nil && at.named && (errors.Is(err, switchboard.ErrNotFound) || errors.Is(err, sessions.ErrForbidden)) {
			return fmt.Errorf("stdin: cannot continue the session %s: %w", at.opts.SessionID, err)
		}
		if err != nil && at.bound && (errors.Is(err, switchboard.ErrNotFound) || errors.Is(err, sessions.ErrForbidden)) {
			// The joined session is gone (or this person is no longer in
			// it): the terminal shows its own rather than not starting.
			if err := l.Sessions.Unbind(ctx, Channel, Address); err != nil {
				return fmt.Errorf("stdin: unbind a session that is gone: %w", err)
			}
			l.logger().Warn("the terminal's joined session is gone; back to its own", "session", at.opts.SessionID, "err", err)
			at = l.own(l.Interactive)
			at.note = func(switchboard.ReadyData) string {
				return "The shared conversation this terminal showed is gone; back in your own."
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("stdin: attach: %w", err)
		}
		if at.opts.SessionID == "" && at.opts.Key == "" {
			l.homeID = sub.Ready.Session // a pipe's new conversation
		}
		v.start(sub.Ready, at.opts.Recap > 0)
		if l.Interactive {
			v.banner(sub.Ready, first)
			if first && l.LogNote != "" {
				v.printf("%s\n", v.dim(l.LogNote))
			}
		}
		if at.note != nil {
			// Before the recap: it says why these messages are shown.
			v.printf("%s\n", at.note(sub.Ready))
		}
		v.tellWaiting()
		rendered := make(chan struct{})
		go func() {
			defer close(rendered)
			for ev := range sub.Events() {
				v.render(ev)
			}
		}()
		next, err := l.serve(ctx, at, sub.Ready.Session, v, src)
		sub.Close()
		<-rendered
		if err != nil || next == nil {
			v.end()
			return err
		}
		at, first = *next, false
	}
}

// attachment is a session for the terminal to show, and how.
type attachment struct {
	opts sessions.AttachOptions
	// bound: a session joined with /join, bound to the terminal's place.
	bound bool
	// named: the session Listener.Session named, which must be there.
	named bool
	// note, if set, is printed once attached, before the recap: what
	// changed (joined, back in one's own conversation).
	note func(switchboard.ReadyData) string
}

// own is the terminal's own session, found by its key; a pipe's is the
// one it started in (or the one Session named).
func (l *Listener) own(recap bool) attachment {
	opts := sessions.AttachOptions{Key: Key, Guide: l.Guide, Author: l.Author, AfterSeq: -1}
	if l.homeID != "" {
		opts = sessions.AttachOptions{SessionID: l.homeID, Author: l.Author, AfterSeq: -1}
	}
	if recap {
		opts.Recap = recapMessages
	}
	return attachment{opts: opts}
}

// joined is a session the terminal's place is bound to. Only a member
// may attach: knowing the id is not enough, and one who is no longer in
// it goes home (Run).
func (l *Listener) joined(sessionID string, recap bool) attachment {
	opts := sessions.AttachOptions{SessionID: sessionID, Author: l.Author, AfterSeq: -1, MembersOnly: true}
	if recap {
		opts.Recap = recapMessages
	}
	return attachment{opts: opts, bound: true}
}

// initial is what the terminal shows at start: the session Session names,
// else the session its place is bound to (a /join before the last stop),
// else its own; a pipe, unless Session says to continue one, a new one.
func (l *Listener) initial(ctx context.Context) (attachment, error) {
	switch l.Session {
	case "":
		if !l.Interactive {
			// A one-off: a new conversation, not the person's.
			return attachment{opts: sessions.AttachOptions{Guide: l.Guide, Author: l.Author, AfterSeq: -1}}, nil
		}
	case SessionTerminal:
	default:
		l.homeID = l.Session
		opts := sessions.AttachOptions{SessionID: l.Session, Author: l.Author, AfterSeq: -1, MembersOnly: true}
		if l.Interactive {
			opts.Recap = recapMessages
		}
		return attachment{opts: opts, named: true}, nil
	}
	b, err := l.Sessions.Binding(ctx, Channel, Address)
	if errors.Is(err, switchboard.ErrNotFound) {
		return l.own(l.Interactive), nil
	}
	if err != nil {
		return attachment{}, fmt.Errorf("stdin: the session the terminal shows: %w", err)
	}
	at := l.joined(b.SessionID, l.Interactive)
	if l.Interactive {
		at.note = func(r switchboard.ReadyData) string {
			return fmt.Sprintf("This terminal shows %s; you are %s there. /leave returns to your own.", sharedName(r, l.Author), places.WithArticle(collaboration.Role(r.Role)))
		}
	}
	return at, nil
}

// sharedName is "Alice's shared conversation", or "the shared
// conversation" when the owner is not known (or is oneself).
func sharedName(r switchboard.ReadyData, self switchboard.Author) string {
	for _, m := range r.Members {
		if m.Role == string(collaboration.Owner) && !(m.Channel == self.Channel && m.ID == self.ID) {
			return m.Name + "'s shared conversation"
		}
	}
	return "the shared conversation"
}

func (l *Listener) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
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

// serve answers lines until input ends or /quit; it returns the session
// to show next after /reset, /join or /leave (nil: the end).
func (l *Listener) serve(ctx context.Context, at attachment, sessionID string, v *view, src *lineSource) (*attachment, error) {
	place := ""
	if at.bound {
		place = Place
	}
	for {
		line, ok := l.nextLine(ctx, v, src)
		if !ok || isQuit(line) {
			return nil, nil
		}
		var in switchboard.Input
		switch name, args := command(line); name {
		case "join":
			// The terminal's own business: which session it shows.
			if next := l.join(ctx, v, at, sessionID, args); next != nil {
				return next, nil
			}
			continue
		case "attach", "detach":
			// The terminal's own too: files on this machine, staged for
			// the next message (files.go); "/attach PATH message" sends
			// that message with them.
			text, ok := l.files.command(ctx, v, l.Sessions, name, args)
			if !ok {
				continue
			}
			in = switchboard.Input{Kind: switchboard.InputText, Author: l.Author, Text: text}
		default:
			var ok bool
			if in, ok = l.interpret(ctx, v, line, src); !ok {
				continue
			}
		}
		in.Place = place
		if in.Kind == switchboard.InputText && !isCommand(in.Text) && l.files.staged() {
			files, ok := l.files.upload(ctx, v, l.Sessions, sessionID, in)
			if !ok {
				continue
			}
			in.Files = files
		}
		r, err := l.Sessions.Submit(ctx, sessionID, in)
		if err != nil {
			if len(in.Files) > 0 {
				v.printf("! Not sent: %s. The files stay attached for your next message.\n", sessions.Reason(err, err.Error()))
				continue
			}
			v.printf("! %v\n", err)
			continue
		}
		if len(in.Files) > 0 {
			l.files.sent()
		}
		seq, ok := l.wait(ctx, sessionID, place, v, r, src)
		if !ok {
			return nil, nil
		}
		v.waitPrinted(ctx, seq)
		if r.NewSession != "" {
			return l.afterReset(ctx, v, at, r.NewSession), nil
		}
		if in.Kind != switchboard.InputText {
			continue
		}
		switch name, _ := command(in.Text); name {
		case "help":
			v.printf("%s", v.fit(joinHelp))
		case "leave":
			if next := l.afterLeave(ctx, v, at, sessionID); next != nil {
				return next, nil
			}
		}
	}
}

// joinHelp follows the session's /help: the terminal's own commands.
const joinHelp = `In the terminal:
  /join CODE                show a conversation someone shared with you (/leave comes back)
  /attach PATH [message]    a file of this machine for your next message ("quote" a path with spaces)
  /attach                   list the files attached; /detach drops them
  /quit                     leave the terminal (Ctrl-D too)
`

// command reads "/name args"; name is "" for a line that is no command.
func command(line string) (name, args string) {
	f := strings.Fields(line)
	if len(f) == 0 || len(f[0]) < 2 || f[0][0] != '/' {
		return "", ""
	}
	_, args, _ = strings.Cut(strings.TrimSpace(line), f[0])
	return strings.ToLower(f[0][1:]), strings.TrimSpace(args)
}

// join answers "/join CODE": the code makes this person a member of the
// session it names; the terminal's place is bound to that session, so a
// restart shows it again, and the terminal shows it from a short recap.
// A code that does not work changes nothing.
func (l *Listener) join(ctx context.Context, v *view, cur attachment, current, args string) *attachment {
	code := inviteCode(args)
	if code == "" {
		v.printf("Usage: /join CODE, with the code (or the link) someone's /share gave you.\n")
		return nil
	}
	// One call: a conversation shown in as many places as it may be is
	// refused before the code is spent.
	// The terminal is one person's: their join may point it elsewhere.
	sessionID, role, err := l.Sessions.JoinPlace(ctx, code, l.Author, sessions.Place{Channel: Channel, Address: Address, Direct: true}, recapMessages, nil)
	switch {
	case errors.Is(err, sessions.ErrTooManyPlaces):
		v.printf("! Not joined, and the code is not used: %s.\n", sessions.ErrTooManyPlaces)
		return nil
	case err != nil && sessionID != "":
		l.logger().Error("stdin: bind a joined session", "session", sessionID, "err", err)
		v.printf("! You joined as %s, but the terminal could not show the conversation; try /join again.\n", role)
		return nil
	case err != nil:
		msg, known := places.JoinRefusal(err)
		if !known {
			l.logger().Error("stdin: join by invite", "err", err)
		}
		v.printf("! Not joined: %s.\n", msg)
		return nil
	}
	if sessionID == current {
		if !cur.bound {
			// Its own conversation: the terminal shows it as its own, not
			// as one it joined.
			if err := l.Sessions.Unbind(ctx, Channel, Address); err != nil {
				l.logger().Warn("stdin: unbind the terminal's own session", "err", err)
			}
		}
		v.printf("This terminal already shows that conversation; you are %s in it.\n", places.WithArticle(role))
		return nil
	}
	at := l.joined(sessionID, true)
	at.note = func(r switchboard.ReadyData) string {
		return fmt.Sprintf("Joined %s as %s. /leave returns to your own.", sharedName(r, l.Author), role)
	}
	return &at
}

// inviteCode is the code of "/join CODE" or of "/join <public_url>/s/CODE".
func inviteCode(args string) string {
	f := strings.Fields(args)
	if len(f) != 1 {
		return ""
	}
	code := f[0]
	if i := strings.LastIndex(code, "/s/"); i >= 0 {
		code = code[i+len("/s/"):]
	}
	return strings.Trim(code, "/")
}

// afterReset follows /reset to the new conversation; a terminal showing a
// joined session keeps showing the new one after a restart too.
func (l *Listener) afterReset(ctx context.Context, v *view, at attachment, sessionID string) *attachment {
	next := attachment{opts: sessions.AttachOptions{SessionID: sessionID, Author: l.Author, AfterSeq: -1}}
	if !at.bound {
		if l.homeID != "" {
			l.homeID = sessionID // a pipe's home is where /reset went
		}
		return &next
	}
	if _, err := l.Sessions.BindWithRecap(ctx, Channel, Address, sessionID, 0); err != nil {
		// Shown now, but the next start shows the old one.
		l.logger().Error("stdin: bind the new conversation after /reset", "session", sessionID, "err", err)
		v.printf("! The terminal shows the new conversation, but will not after a restart: %v\n", err)
		return &next
	}
	next.bound = true
	return &next
}

// afterLeave: the session answers /leave typed in a joined session by
// unbinding the terminal's place; the terminal then goes back to its own
// session. Still bound (the session refused, or it was the terminal's own
// session), it stays.
func (l *Listener) afterLeave(ctx context.Context, v *view, at attachment, sessionID string) *attachment {
	if !at.bound {
		return nil
	}
	b, err := l.Sessions.Binding(ctx, Channel, Address)
	switch {
	case err == nil && b.SessionID == sessionID:
		return nil
	case err != nil && !errors.Is(err, switchboard.ErrNotFound):
		v.printf("! %v\n", err)
		return nil
	}
	next := l.own(true)
	next.note = func(switchboard.ReadyData) string { return "Back in your own conversation." }
	return &next
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
func (l *Listener) wait(ctx context.Context, sessionID, place string, v *view, r *sessions.Receipt, src *lineSource) (int64, bool) {
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
				if _, err := l.Sessions.Submit(ctx, sessionID, switchboard.Input{Kind: switchboard.InputCancel, Author: l.Author, Place: place}); err != nil {
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
	stale := v.takeStale()
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
	if stale != "" && isAnswer(trimmed) {
		// Typed at a question that someone else answered meanwhile: it
		// was meant for the question, not as a message to the model.
		v.printf("  Not sent: %s. Type %q again to send it as a message.\n", stale, trimmed)
		return in, false
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

// isAnswer: a line that answers an approval question.
func isAnswer(line string) bool {
	switch strings.ToLower(line) {
	case "y", "yes", "n", "no", "a", "always":
		return true
	}
	return false
}

// fillForm asks for each field of a form, one line each, from the same
// lines as everything else: in a pipe the answers are the lines that
// follow the choice. Each answer is checked as it is given, by the rule
// the session applies to the whole form; one that does not do is refused
// with the reason and that field asked again. /cancel leaves the form
// unsent.
func (l *Listener) fillForm(ctx context.Context, v *view, f *switchboard.UIForm, src *lineSource) (string, bool) {
	values := map[string]string{}
	defer v.setAsk("")
	for _, field := range f.Inputs {
		var marks []string
		switch field.Type {
		case "number", "email":
			marks = append(marks, field.Type)
		}
		if field.Required {
			marks = append(marks, "required")
		}
		mark := ""
		if len(marks) > 0 {
			mark = " (" + strings.Join(marks, ", ") + ")"
		}
		v.setAsk(fmt.Sprintf("  %s%s: ", v.md(field.Label), mark))
		for {
			line, ok := l.nextLine(ctx, v, src)
			if !ok {
				return "", false
			}
			line = strings.TrimSpace(line)
			if strings.EqualFold(line, "/cancel") {
				v.printf("  The form was not sent.\n")
				return "", false
			}
			if why := checkField(field, line); why != "" {
				v.printf("  ! %s. Try again, or /cancel to leave the form.\n", why)
				continue
			}
			if line != "" {
				values[field.Name] = line
			}
			break
		}
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// checkField says why value does not do for field, "" when it does: the
// session's own check of a submitted form (tools.DescribeAction), asked of
// a form of this one field.
func checkField(field switchboard.UIFormInput, value string) string {
	const id = "ui_field"
	form := switchboard.UIForm{ActionID: id + ":" + tools.ActionForm, Inputs: []switchboard.UIFormInput{field}}
	raw, err := json.Marshal(map[string]string{field.Name: value})
	if err != nil {
		return err.Error()
	}
	if _, err := tools.DescribeAction(switchboard.UI{ID: id, Form: &form}, form.ActionID, string(raw)); err != nil {
		msg := err.Error() // "field \"Age\" must be a number": a sentence's start
		return strings.ToUpper(msg[:min(1, len(msg))]) + msg[min(1, len(msg)):]
	}
	return ""
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
	images      string     // Listener.ImageDir
	session     string     // the session shown, for the images' folder
	cols        func() int // the terminal's width (Listener.width)

	mu       sync.Mutex
	out      io.Writer
	printed  int64
	changed  chan struct{} // closed and replaced whenever printed grows
	confirms []switchboard.ConfirmationRequestData
	warned   map[string]bool // confirmation ids whose warning was shown
	choices  map[int]choice
	streamed map[string]string // message ids whose deltas were printed: what they printed
	// Events with 0 < seq <= recapThrough are the recap: stored messages
	// shown on start, before the live ones.
	recapThrough int64
	recapShown   bool
	// role is this person's in the session: one who may not approve is not
	// asked the approval questions ("" is taken as may).
	role string
	// members are the session's people as last told (key channel:id), to
	// tell arrivals and departures; newcomers, those told as joined by the
	// last roster (whose arrival, if it follows, is the same news).
	members   map[string]switchboard.MemberData
	newcomers map[string]bool
	// stale says what became of a question this terminal was asked and
	// someone else answered (or that expired); the next line, if it is
	// an answer, was meant for it.
	stale string

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
	v.session = r.Session
	v.confirms = nil
	v.warned = map[string]bool{}
	v.choices = nil
	v.streamed = map[string]string{}
	v.recapThrough, v.recapShown = 0, false
	if recap {
		v.recapThrough = r.LastSeq
	}
	v.role, v.stale = r.Role, ""
	// The roster as attached is no news: only its changes are told.
	v.members, v.newcomers = map[string]switchboard.MemberData{}, nil
	for _, m := range r.Members {
		v.members[m.Channel+":"+m.ID] = m
	}
	// Requests open before this listener came: a restart, another
	// channel's turn. The next prompt is the first one's question.
	for _, c := range r.Pending {
		v.addConfirmLocked(c)
	}
}

// tellWaiting tells one who may not answer the requests open as the
// terminal attached that the conversation waits for them.
func (v *view) tellWaiting() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mayApproveLocked() {
		return
	}
	for _, c := range v.confirms {
		v.writeLocked(v.waitsLocked(c))
	}
}

// mayApproveLocked: this person may answer approval requests.
func (v *view) mayApproveLocked() bool {
	return v.role == "" || collaboration.Role(v.role).CanApprove()
}

// waitsLocked is the line for a request this person may not answer.
func (v *view) waitsLocked(c switchboard.ConfirmationRequestData) string {
	return fmt.Sprintf("  %s %s waits for approval by the owner or an approver\n", c.ToolName, compact(c.Args))
}

// takeStale returns and forgets what became of a question answered
// elsewhere since the last line.
func (v *view) takeStale() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.stale
	v.stale = ""
	return s
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

// dim is s dimmed where the terminal shows styles.
func (v *view) dim(s string) string {
	if !v.styled {
		return s
	}
	return ansiDim + s + "\x1b[0m"
}

// fit wraps a text of the gateway's own (/tools, /help) to the
// terminal's width; a pipe's lines are left as they are.
func (v *view) fit(s string) string {
	if !v.interactive || v.cols == nil {
		return s
	}
	return wrap(s, v.cols())
}

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
	case len(v.confirms) > 0 && v.mayApproveLocked():
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
	if len(v.confirms) > 0 && v.ask == "" && v.mayApproveLocked() {
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
	if len(v.confirms) == 0 || !v.mayApproveLocked() {
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
		v.streamed[d.MessageID] += d.Content
	case *switchboard.MessageData:
		switch {
		case d.Role == switchboard.RoleAssistant && v.wasStreamed(d.ID):
			printed := v.streamed[d.ID]
			delete(v.streamed, d.ID)
			if v.midLine && v.shown == "" {
				io.WriteString(v.out, "\n")
				v.midLine = false
			}
			if printed != d.Content {
				// Not what streamed: replaced (a guardrail blocked the
				// answer, docs/guardrails.md). The answer as it stands.
				v.writeLocked(markdown(d.Content, v.styled, "") + "\n")
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
				v.writeLocked(othersMessage(d) + "\n" + fileLines(d.Files))
			} else if len(d.Files) > 0 {
				// One's own line is on the screen; where its files went
				// is news.
				v.writeLocked(fileLines(d.Files))
			}
		default:
			v.writeLocked(v.fit(d.Content) + "\n")
		}
	case *switchboard.ToolCallData:
		if d.Name == tools.PlanTool {
			return // the plan it shows is printed (plan.go)
		}
		v.writeLocked(fmt.Sprintf("  → %s %s\n", d.Name, compact(d.Args)))
	case *switchboard.ToolResponseData:
		if tools.ShownAsCard(d.Name) && !d.IsError {
			return // the card or plan it showed is printed; its result speaks to the model
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
		switch {
		case !v.mayApproveLocked():
			v.writeLocked(v.waitsLocked(*d))
		case len(v.confirms) == 1:
			// Its question is the prompt, shown now: the turn waits for it.
			v.showPromptLocked()
		default:
			v.writeLocked(fmt.Sprintf("  (next) %s %s also waits for approval\n", d.ToolName, compact(d.Args)))
		}
	case *switchboard.ConfirmationResolvedData:
		v.resolvedLocked(d)
	case *switchboard.MembersData:
		v.membersLocked(d.Members)
	case *switchboard.CompactionData:
		v.writeLocked(v.dim(fmt.Sprintf("· %d earlier messages summarised for the assistant (all still stored)", d.Messages)) + "\n")
	case *switchboard.HandoffData:
		v.writeLocked(v.handoffLine(*d)) // handoff.go
	case *switchboard.UI:
		v.writeLocked(v.renderUILocked(d))
	case *switchboard.PlanData:
		v.writeLocked(planText(d))
	case *switchboard.ErrorData:
		if d.Code == sessions.NoticeInfo {
			v.writeLocked(d.Message + "\n") // an answer (/who, /share), no error
			return
		}
		v.writeLocked(fmt.Sprintf("! %s\n", d.Message))
	}
}

// resolvedLocked shows who answered an approval request, and from where
// when it was not this terminal. A question this terminal was asking
// that was answered elsewhere (or expired) is taken back, saying so.
func (v *view) resolvedLocked(d *switchboard.ConfirmationResolvedData) {
	var asked *switchboard.ConfirmationRequestData
	for i, c := range v.confirms {
		if c.ConfirmationID == d.ConfirmationID {
			asked = &c
			v.confirms = append(v.confirms[:i], v.confirms[i+1:]...)
			break
		}
	}
	word := "denied"
	if d.Approved {
		word = "approved"
	}
	var what string
	why := d.Why() // never by By: a person may be called "Expired"
	switch {
	case why == switchboard.ReasonExpired:
		what = word + ": nobody answered in time"
	case why == switchboard.ReasonCancelled && d.Reason == "": // stored before reasons: By says only "cancelled"
		what = word + ": the turn was stopped"
	case why == switchboard.ReasonCancelled:
		what = word + ": the turn was stopped by " + d.By
	case d.Channel == "" || d.Channel == v.self.Channel:
		// No channel: a /stop stored before reasons, or an answer stored
		// before channels were.
		what = word + " by " + d.By
	default:
		what = word + " by " + d.By + " · " + switchboard.ChannelName(d.Channel)
	}
	if d.Scope == switchboard.ScopeSession {
		what += " (for this session)"
	}
	mine := d.Channel == v.self.Channel || d.Channel == "" && why != switchboard.ReasonExpired && d.By == v.self.DisplayName()
	if asked == nil || mine || !v.mayApproveLocked() {
		v.writeLocked("  " + what + "\n")
		return
	}
	what = asked.ToolName + " " + what
	v.stale = what
	v.writeLocked("  " + what + "; no answer needed here\n")
}

// membersLocked tells who arrived and who left since the last roster:
// one line each, dimmed, never the whole list. Someone whose place does
// not count as being here (a Slack or Discord thread) is told as joined.
func (v *view) membersLocked(ms []switchboard.MemberData) {
	next := make(map[string]switchboard.MemberData, len(ms))
	newcomers := map[string]bool{}
	var lines []string
	self := v.self.Key()
	for _, m := range ms {
		key := m.Channel + ":" + m.ID
		next[key] = m
		if key == self {
			v.role = m.Role // the prompt follows (below)
			continue
		}
		was, known := v.members[key]
		switch {
		case !known:
			// A first appearance: attached at once, or joined with a code
			// and not here yet (a web page opens right after; a chat
			// app's thread never counts as here).
			if !m.Here {
				newcomers[key] = true
			}
			lines = append(lines, fmt.Sprintf("%s (%s) joined", m.Name, switchboard.ChannelName(m.Channel)))
		case m.Here && !was.Here && !v.newcomers[key]:
			lines = append(lines, fmt.Sprintf("%s (%s) is here", m.Name, switchboard.ChannelName(m.Channel)))
		case was.Here && !m.Here:
			lines = append(lines, m.Name+" left")
		}
	}
	// Gone from the roster: one who was here left (the session says so
	// of the others in a message).
	var gone []string
	for key, m := range v.members {
		if _, ok := next[key]; !ok && m.Here && key != self {
			gone = append(gone, m.Name+" left")
		}
	}
	slices.Sort(gone)
	lines = append(lines, gone...)
	v.members, v.newcomers = next, newcomers
	if len(lines) == 0 {
		if v.waiting {
			v.showPromptLocked() // a new role may change the question
		}
		return
	}
	var b strings.Builder
	for _, line := range lines {
		if v.styled {
			b.WriteString(ansiDim + "  " + line + "\x1b[0m\n")
		} else {
			b.WriteString("  " + line + "\n")
		}
	}
	v.writeLocked(b.String())
}

// othersMessage is someone else's message: "Carol · Slack: text".
func othersMessage(d *switchboard.MessageData) string {
	name := d.Author
	if name == "" {
		name = d.AuthorID
	}
	if d.Channel != "" {
		name += " · " + switchboard.ChannelName(d.Channel)
	}
	if d.Content == "" {
		return name + ":" // files alone: they follow
	}
	return name + ": " + d.Content
}

func (v *view) isSelf(d *switchboard.MessageData) bool {
	return d.Channel == v.self.Channel && d.AuthorID == v.self.ID
}

// recapLocked shows a stored message from before this start, dimmed
// under a heading; one's own messages too, as they were typed.
func (v *view) recapLocked(payload any) {
	d, ok := payload.(*switchboard.MessageData)
	if !ok || d.Content == "" && len(d.Files) == 0 {
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
		text = othersMessage(d)
	case d.Role == switchboard.RoleAssistant:
		text = markdown(d.Content, v.styled, base)
	default:
		text = v.fit(d.Content)
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
	for _, line := range strings.SplitAfter(fileLines(d.Files), "\n") {
		if line != "" && v.styled {
			line = base + strings.TrimSuffix(line, "\n") + "\x1b[0m\n"
		}
		b.WriteString(line)
	}
	v.writeLocked(b.String())
}

// imageExt is the file extension of the image types the channels show.
var imageExt = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/svg+xml": ".svg",
}

// saveImageLocked writes an image sent as data to the session's folder of
// ImageDir, once (a replay finds it there), and says where it is.
func (v *view) saveImageLocked(id string, img switchboard.UIImage) string {
	inline := "inline " + img.MIMEType
	ext, ok := imageExt[img.MIMEType]
	if v.images == "" || !ok || !safeName(id) || !safeName(v.session) {
		return inline
	}
	raw, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		return inline + " (not valid base64)"
	}
	dir := filepath.Join(v.images, v.session)
	path := filepath.Join(dir, id+ext)
	if _, err := os.Stat(path); err == nil {
		return "saved to " + path
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return inline + " (not saved: " + err.Error() + ")"
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return inline + " (not saved: " + err.Error() + ")"
	}
	return "saved to " + path
}

// safeName: an id the session made (s_…, ui_…) is a file name as it is;
// anything else is not used as one.
func safeName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
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
			src = v.saveImageLocked(ui.ID, *ui.Image)
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

// wasStreamed reports whether a message's deltas were printed.
func (v *view) wasStreamed(id string) bool {
	_, ok := v.streamed[id]
	return ok
}
