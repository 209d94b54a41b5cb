package sessions

// What the model is told of the files people sent: each message with
// files says which arrived (name, type, size, where the sandbox sees
// it), with a text file's content inline up to a bound; and the pictures
// of the latest such messages go with the request as image input
// (providers.Request.Images), scaled to what the vendors take. The stored
// message is what the person wrote; this is built per request, from
// reads cached for the session's life (a saved upload does not change
// under its name: a new upload gets a new one).

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/images"
	"github.com/switchboard-gw/switchboard/providers"
)

// Bounds on what goes inline, and on the pictures of one request.
const (
	inlineFileBytes    = 16 << 10 // of one text file
	inlineMessageBytes = 48 << 10 // of one message's text files
	maxPictures        = 4        // the latest, in the latest messages
)

// filesView is what a session has read of its uploads for the model.
type filesView struct {
	texts    map[string]string // path → its text, "" when not text or unread
	pictures map[string]*providers.Image
}

// forModel returns msgs with the messages that have files told of them.
// msgs is not modified.
func (s *session) forModel(ctx context.Context, msgs []switchboard.Message) []switchboard.Message {
	var out []switchboard.Message
	for i, m := range msgs {
		if len(m.Files) == 0 {
			continue
		}
		if out == nil {
			out = append([]switchboard.Message(nil), msgs...)
		}
		out[i].Content = s.withFileNote(ctx, m)
	}
	if out == nil {
		return msgs
	}
	return out
}

// withFileNote is a message's text followed by what arrived with it.
func (s *session) withFileNote(ctx context.Context, m switchboard.Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	if m.Content != "" {
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "[%s sent %d %s, saved in the conversation's workspace:]", cmp.Or(m.Author, "The person"), len(m.Files), plural(len(m.Files), "file", "files"))
	inlined := 0
	for _, f := range m.Files {
		fmt.Fprintf(&b, "\n- %s (%s, %s) at %s", f.Name, f.Type, switchboard.ByteSize(f.Size), f.WorkspacePath())
		if !inlinable(f.Type) || inlined >= inlineMessageBytes {
			continue
		}
		text := s.fileText(ctx, f)
		if text == "" {
			continue
		}
		if room := inlineMessageBytes - inlined; len(text) > room {
			text = preview(text, room)
		}
		inlined += len(text)
		more := ""
		if f.Size > int64(len(text)) {
			more = fmt.Sprintf(" (the first %s of %s; read the rest from the file)", switchboard.ByteSize(int64(len(text))), switchboard.ByteSize(f.Size))
		}
		fmt.Fprintf(&b, "\n  Its content%s:\n  ```\n%s\n  ```", more, text)
	}
	return b.String()
}

// inlinable: text a model reads as it is.
func inlinable(typ string) bool {
	return strings.HasPrefix(typ, "text/") || typ == "application/json"
}

// fileText is the start of a text upload, "" when it cannot be read or
// is not UTF-8 text.
func (s *session) fileText(ctx context.Context, f switchboard.File) string {
	if t, ok := s.uploaded.texts[f.Path]; ok {
		return t
	}
	data, err := s.m.cfg.Uploads.Read(ctx, s.id, f.Path, inlineFileBytes)
	text := ""
	switch {
	case err != nil:
		s.log.Warn("an uploaded file could not be read for the model", "path", f.Path, "err", err)
		return "" // not cached: the next request tries again
	case utf8.Valid(data) || len(data) == inlineFileBytes && utf8.Valid(trimPartialRune(data)):
		text = string(trimPartialRune(data))
	}
	if s.uploaded.texts == nil {
		s.uploaded.texts = map[string]string{}
	}
	s.uploaded.texts[f.Path] = text
	return text
}

// trimPartialRune drops a character cut at the end of data.
func trimPartialRune(data []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(data) > 0; i++ {
		if r, n := utf8.DecodeLastRune(data); r != utf8.RuneError || n != 1 {
			return data
		}
		data = data[:len(data)-1]
	}
	return data
}

// pictures are the images a request shows the model: those of the latest
// messages' files, newest first, at most maxPictures; none when the
// guide's provider or the guide's model takes no image input.
func (s *session) pictures(ctx context.Context, msgs []switchboard.Message) map[string]providers.Image {
	if p := s.provider(); s.m.cfg.Uploads == nil || p == nil || s.guide.NoVision {
		return nil
	} else if r, ok := p.(*providers.Resilient); ok && r.NoVision {
		return nil
	}
	var out map[string]providers.Image
	used := map[string]bool{}
	for i := len(msgs) - 1; i >= 0 && len(used) < maxPictures; i-- {
		for _, f := range msgs[i].Files {
			if !strings.HasPrefix(f.Type, "image/") || len(used) >= maxPictures {
				continue
			}
			used[f.Path] = true
			if img := s.picture(ctx, f); img != nil {
				if out == nil {
					out = map[string]providers.Image{}
				}
				out[f.Path] = *img
			}
		}
	}
	// What the session holds in memory is what its requests show now.
	for p := range s.uploaded.pictures {
		if !used[p] {
			delete(s.uploaded.pictures, p)
		}
	}
	return out
}

// picture reads and fits one picture, once; nil when it cannot be shown
// (the model still reads of the file in the message).
func (s *session) picture(ctx context.Context, f switchboard.File) *providers.Image {
	if img, ok := s.uploaded.pictures[f.Path]; ok {
		return img
	}
	limit := s.m.cfg.UploadLimits.withDefaults().FileBytes
	data, err := s.m.cfg.Uploads.Read(ctx, s.id, f.Path, limit)
	if err != nil {
		s.log.Warn("an uploaded picture could not be read for the model", "path", f.Path, "err", err)
		return nil // not cached: the next request tries again
	}
	var img *providers.Image
	if fitted, typ, err := images.Fit(data, images.ModelLimits()); err != nil {
		s.log.Info("an uploaded picture is not shown to the model", "path", f.Path, "err", err)
	} else {
		img = &providers.Image{Type: typ, Data: fitted}
	}
	if s.uploaded.pictures == nil {
		s.uploaded.pictures = map[string]*providers.Image{}
	}
	s.uploaded.pictures[f.Path] = img
	return img
}
