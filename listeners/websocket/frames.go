package websocket

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Client frame types (CONTRACT §4).
const (
	frameHello   = "hello"
	frameInput   = "input"
	frameConfirm = "confirm"
	frameAction  = "action"
	frameCancel  = "cancel"
	// A file a person sends with their next message: announced by a
	// file frame, its bytes in file_chunk frames (files.go).
	frameFile      = "file"
	frameFileChunk = "file_chunk"
)

// clientFrame is every client frame's fields in one struct; decode checks
// that the ones its type needs are there.
type clientFrame struct {
	Type string `json:"type"`

	// hello
	Session     string `json:"session"`
	Guide       string `json:"guide"`
	ResumeAfter *int64 `json:"resume_after"`
	Token       string `json:"token"`
	// Invite is an invite code (/share): join the session it names.
	Invite string `json:"invite"`
	User   *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"user"`

	// input; file and file_chunk (the file's id)
	ID   string `json:"id"`
	Text string `json:"text"`
	// Files are the ids of files saved on this connection, sent with the
	// message.
	Files []string `json:"files"`

	// file
	Name string `json:"name"`
	Size *int64 `json:"size"`

	// file_chunk: Data is the next bytes in standard base64; Bytes, the
	// bytes, decoded by decodeFrame.
	Data  string `json:"data"`
	Bytes []byte `json:"-"`

	// confirm
	ConfirmationID string `json:"confirmation_id"`
	Approved       *bool  `json:"approved"`
	// Scope "session": approve this tool for the rest of the session.
	Scope string `json:"scope"`

	// action
	ActionID string          `json:"action_id"`
	Value    json.RawMessage `json:"value"`
}

// Limits on fields that end up stored or shown; the frame's own size is
// bounded by the read limit.
const (
	maxIDLen   = 128
	maxNameLen = 100
	// maxFileNameLen bounds a file's name as sent; the session shortens
	// it to 100 characters for saving.
	maxFileNameLen = 1024
	// maxInputFiles bounds a message's file ids; the session's own limit
	// (10 by default) is the one that counts.
	maxInputFiles = 100
)

var errBadFrame = errors.New("bad frame")

// decodeFrame parses and checks one client frame.
func decodeFrame(data []byte) (clientFrame, error) {
	var f clientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return f, fmt.Errorf("%w: not valid JSON (at byte %d)", errBadFrame, syn.Offset)
		case errors.As(err, &typ):
			return f, fmt.Errorf("%w: field %q must be a %s, not a %s", errBadFrame, typ.Field, typ.Type, typ.Value)
		}
		return f, fmt.Errorf("%w: %v", errBadFrame, err)
	}
	bad := func(format string, args ...any) (clientFrame, error) {
		return f, fmt.Errorf("%w: %s: %s", errBadFrame, f.Type, fmt.Sprintf(format, args...))
	}
	switch f.Type {
	case frameHello:
		if f.ResumeAfter != nil && *f.ResumeAfter < 0 {
			return bad("resume_after must be 0 or more")
		}
		if f.User != nil && (len(f.User.ID) > maxIDLen || len(f.User.Name) > maxNameLen) {
			return bad("user id or name too long")
		}
		f.Invite = strings.ToLower(strings.TrimSpace(f.Invite))
		if f.Invite != "" && f.Session != "" {
			return bad("send session or invite, not both: an invite names its session")
		}
		if len(f.Invite) > maxIDLen {
			return bad("invite longer than %d bytes", maxIDLen)
		}
	case frameInput:
		if strings.TrimSpace(f.Text) == "" && len(f.Files) == 0 {
			return bad("text is empty (it may be, with files)")
		}
		if len(f.ID) > maxIDLen {
			return bad("id longer than %d bytes", maxIDLen)
		}
		if len(f.Files) > maxInputFiles {
			return bad("%d files; a message takes far fewer", len(f.Files))
		}
		seen := make(map[string]bool, len(f.Files))
		for _, id := range f.Files {
			switch {
			case id == "":
				return bad("files: an empty id")
			case len(id) > maxIDLen:
				return bad("files: an id longer than %d bytes", maxIDLen)
			case seen[id]:
				return bad("files: %s twice", quote(id))
			}
			seen[id] = true
		}
		if len(f.Files) > 0 && strings.HasPrefix(strings.TrimSpace(f.Text), "/") {
			return bad("files go with a message, not with a command")
		}
	case frameFile:
		switch {
		case f.ID == "":
			return bad("id is missing")
		case len(f.ID) > maxIDLen:
			return bad("id longer than %d bytes", maxIDLen)
		case strings.TrimSpace(f.Name) == "":
			return bad("name is missing")
		case len(f.Name) > maxFileNameLen:
			return bad("name longer than %d bytes", maxFileNameLen)
		case f.Size == nil:
			return bad("size (in bytes) is missing")
		case *f.Size <= 0:
			return bad("size must be 1 byte or more, not %d", *f.Size)
		}
	case frameFileChunk:
		switch {
		case f.ID == "":
			return bad("id is missing")
		case len(f.ID) > maxIDLen:
			return bad("id longer than %d bytes", maxIDLen)
		case f.Data == "":
			return bad("data is empty")
		}
		b, err := base64.StdEncoding.DecodeString(f.Data)
		if err != nil {
			return bad("data is not standard base64: %v", err)
		}
		f.Bytes, f.Data = b, ""
	case frameConfirm:
		if f.ConfirmationID == "" {
			return bad("confirmation_id is missing")
		}
		if f.Approved == nil {
			return bad("approved (true or false) is missing")
		}
		switch f.Scope {
		case "":
		case switchboard.ScopeSession:
			if !*f.Approved {
				return bad(`scope "session" goes with approved: true (a denial is for this call)`)
			}
		default:
			if len(f.Scope) > 20 {
				f.Scope = f.Scope[:20] + "…"
			}
			return bad(`scope must be "session" or left out, not %q`, f.Scope)
		}
	case frameAction:
		if f.ActionID == "" {
			return bad("action_id is missing")
		}
	case frameCancel:
	case "":
		return f, fmt.Errorf("%w: no type (want %s)", errBadFrame, frameTypes)
	default:
		return f, fmt.Errorf("%w: unknown type %s (want %s)", errBadFrame, quote(f.Type), frameTypes)
	}
	return f, nil
}

const frameTypes = "hello, input, confirm, action, cancel, file or file_chunk"

// quote is a client's string for an error message: quoted, and cut
// short when long.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// actionValue is an action's value as the session takes it: a JSON string
// as its text, anything else (a form's object) as its JSON.
func actionValue(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// encodeEvent is the frame for one event. A Markdown message gets an html
// field beside its content, and a card a text_html beside its text: the
// rendered, sanitised form the widget shows. Those are rendered once per
// event and the frame is shared by every connection (h.frames).
func (h *Handler) encodeEvent(ev switchboard.Event) ([]byte, error) {
	if ev.Seq > 0 && (ev.Type == switchboard.EventMessage || ev.Type == switchboard.EventUI) {
		return h.frames.get(ev.Session, ev.Seq, func() ([]byte, error) { return h.encodeUncached(ev) })
	}
	return h.encodeUncached(ev)
}

func (h *Handler) encodeUncached(ev switchboard.Event) ([]byte, error) {
	switch ev.Type {
	case switchboard.EventMessage:
		var md switchboard.MessageData
		if err := json.Unmarshal(ev.Data, &md); err == nil && md.Format == switchboard.FormatMarkdown {
			data, err := json.Marshal(struct {
				switchboard.MessageData
				HTML string `json:"html"`
			}{md, h.md.render(md.Content)})
			if err != nil {
				return nil, err
			}
			ev.Data = data
		}
	case switchboard.EventUI:
		// A card's image URL gets image_allowed: whether the policy lets
		// it show inline (the widget shows others as links).
		var ui switchboard.UI
		if err := json.Unmarshal(ev.Data, &ui); err == nil && (ui.Text != "" || ui.Image != nil && ui.Image.URL != "") {
			out := struct {
				switchboard.UI
				TextHTML     *string `json:"text_html,omitempty"`
				ImageAllowed *bool   `json:"image_allowed,omitempty"`
			}{UI: ui}
			if ui.Text != "" {
				html := h.md.render(ui.Text)
				out.TextHTML = &html
			}
			if ui.Image != nil && ui.Image.URL != "" {
				ok := h.md.images.inline(ui.Image.URL)
				out.ImageAllowed = &ok
			}
			data, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			ev.Data = data
		}
	}
	return json.Marshal(ev)
}

// connEvent is an event of the connection rather than the session: ready,
// and errors about a frame. They carry seq 0 and are not stored.
func connEvent(sessionID, agent string, typ switchboard.EventType, data any) []byte {
	raw, _ := json.Marshal(data) // the payload types always encode
	b, _ := json.Marshal(switchboard.Event{
		Time: time.Now().UTC().Truncate(time.Millisecond), Session: sessionID, Agent: agent, Type: typ, Data: raw,
	})
	return b
}

// frameCache keeps the encoded frames of recent rendered events, so a
// message that every client of a session receives (or that reloads replay)
// goes through the Markdown renderer once. It is bounded by entries and
// bytes; the oldest go first. Concurrent requests for the same event wait
// for one encoding.
type frameCache struct {
	mu       sync.Mutex
	entries  map[frameKey]*frameEntry
	order    []frameKey // oldest first
	bytes    int
	maxCount int
	maxBytes int
}

type frameKey struct {
	session string
	seq     int64
}

type frameEntry struct {
	once sync.Once
	b    []byte
	err  error
}

func newFrameCache(maxCount, maxBytes int) *frameCache {
	return &frameCache{entries: map[frameKey]*frameEntry{}, maxCount: maxCount, maxBytes: maxBytes}
}

func (c *frameCache) get(session string, seq int64, encode func() ([]byte, error)) ([]byte, error) {
	k := frameKey{session, seq}
	c.mu.Lock()
	e, ok := c.entries[k]
	if !ok {
		e = &frameEntry{}
		c.entries[k] = e
		c.order = append(c.order, k)
	}
	c.mu.Unlock()
	e.once.Do(func() {
		e.b, e.err = encode()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.entries[k] == e {
			c.bytes += len(e.b)
		}
		c.evictLocked()
	})
	return e.b, e.err
}

// evictLocked drops the oldest entries while over either bound, keeping
// the newest one whatever its size.
func (c *frameCache) evictLocked() {
	for len(c.order) > 1 && (len(c.order) > c.maxCount || c.bytes > c.maxBytes) {
		k := c.order[0]
		c.order = c.order[1:]
		if e := c.entries[k]; e != nil {
			c.bytes -= len(e.b) // 0 while its encoding is under way
			delete(c.entries, k)
		}
	}
}
