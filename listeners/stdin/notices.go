package stdin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// Notices shows log records in the terminal chat, apart from the
// conversation: each on lines of its own, prefixed "[log]" and dimmed, the
// prompt taken off the screen first and put back after (as for anything
// else the terminal prints while a person types). The gateway sends it the
// warnings and errors while the full log goes to a file.
//
// Before Run shows the chat, and after it ends, the records go to Fallback
// in the same form: nothing else is on the screen then.
type Notices struct {
	Fallback io.Writer
	// Styled: Fallback is a terminal that shows ANSI styles (dim).
	Styled bool

	mu sync.Mutex
	v  *view // the chat on the screen, if any
}

// Handler is a slog.Handler that shows the records at level or above here.
func (n *Notices) Handler(level slog.Leveler) slog.Handler {
	return &noticeHandler{n: n, level: level}
}

func (n *Notices) attach(v *view) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.v = v
}

func (n *Notices) detach(v *view) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.v == v {
		n.v = nil
	}
}

// show prints one record's text.
func (n *Notices) show(text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.v != nil {
		n.v.printf("%s", noticeLines(text, n.v.styled))
		return
	}
	if n.Fallback != nil {
		io.WriteString(n.Fallback, noticeLines(text, n.Styled))
	}
}

// noticeLines is a record's text as the chat shows it: every line
// prefixed, dimmed where styles show.
func noticeLines(text string, styled bool) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if styled {
			b.WriteString(ansiDim + "[log] " + line + "\x1b[0m\n")
		} else {
			b.WriteString("[log] " + line + "\n")
		}
	}
	return b.String()
}

// noticeHandler writes "LEVEL message key=value …", without the time.
type noticeHandler struct {
	n      *Notices
	level  slog.Leveler
	attrs  string // " key=value" of WithAttrs
	prefix string // "group." of WithGroup
}

func (h *noticeHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *noticeHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message + h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.prefix, a)
		return true
	})
	h.n.show(b.String())
	return nil
}

func (h *noticeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	var b strings.Builder
	for _, a := range attrs {
		appendAttr(&b, h.prefix, a)
	}
	c.attrs += b.String()
	return &c
}

func (h *noticeHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix += name + "."
	return &c
}

// appendAttr writes " key=value", quoting a value that needs it.
func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			appendAttr(b, prefix, g)
		}
		return
	}
	s := a.Value.String()
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		s = strconv.Quote(s)
	}
	fmt.Fprintf(b, " %s%s=%s", prefix, a.Key, s)
}
