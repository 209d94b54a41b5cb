package stdin

// Files from the terminal: /attach PATH stages a file of this machine
// (the gateway reads it: the terminal is its operator's) for the next
// message, which carries it into the conversation's workspace; /attach
// alone lists what is staged, /detach drops it. A message's files are
// shown as lines under it, with where they were saved.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// maxAttached bounds what /attach stages; the session's own limit (10
// files by default) is the one a message meets.
const maxAttached = 50

// attachments are the files /attach staged, and what of them was saved
// for a message that was then not taken (sent again with the next one,
// not saved twice).
type attachments struct {
	paths   []string
	saved   []switchboard.File
	savedIn string // the session saved holds files of
}

func (a *attachments) staged() bool { return len(a.paths) > 0 }

// command answers /attach and /detach. With a message after the path
// ("/attach rain.csv which city is wetter?") it returns the message, to
// send now with the files.
func (a *attachments) command(ctx context.Context, v *view, s Sessions, name, args string) (string, bool) {
	if name == "detach" {
		if len(a.paths) == 0 {
			v.printf("No files were attached.\n")
		} else {
			v.printf("Detached %s.\n", a.names())
		}
		a.paths = nil
		a.unsave(ctx, s)
		return "", false
	}
	if args == "" {
		a.list(v)
		return "", false
	}
	path, message, err := attachArgs(args)
	if err != nil {
		v.printf("! %s\n", err)
		return "", false
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		v.printf("! No file %s here.\n", shown(path))
		return "", false
	case err != nil:
		v.printf("! %s cannot be read: %s.\n", shown(path), shown(err.Error()))
		return "", false
	case st.IsDir():
		v.printf("! %s is a folder: attach its files one by one.\n", shown(path))
		return "", false
	case !st.Mode().IsRegular():
		v.printf("! %s is not a regular file.\n", shown(path))
		return "", false
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	for _, p := range a.paths {
		if p == path {
			v.printf("%s is attached already.\n", shown(filepath.Base(path)))
			return message, message != ""
		}
	}
	if len(a.paths) >= maxAttached {
		v.printf("! %d files are attached already: send them first.\n", len(a.paths))
		return "", false
	}
	a.paths = append(a.paths, path)
	a.unsave(ctx, s) // the next message saves them all again
	if message == "" {
		v.printf("Attached %s (%s): it goes with your next message. /attach lists the files, /detach drops them.\n", shown(filepath.Base(path)), switchboard.ByteSize(st.Size()))
	}
	return message, message != ""
}

// list shows what is staged.
func (a *attachments) list(v *view) {
	if len(a.paths) == 0 {
		v.printf("No files attached. /attach PATH attaches a file of this machine to your next message.\n")
		return
	}
	var b strings.Builder
	b.WriteString("Attached for your next message (/detach drops them):\n")
	for _, p := range a.paths {
		what := "gone"
		if st, err := os.Stat(p); err == nil {
			what = switchboard.ByteSize(st.Size())
		}
		fmt.Fprintf(&b, "  %s (%s) %s\n", shown(filepath.Base(p)), what, shown(p))
	}
	v.printf("%s", b.String())
}

// names are the staged files' names, for a sentence.
func (a *attachments) names() string {
	names := make([]string, len(a.paths))
	for i, p := range a.paths {
		names[i] = shown(filepath.Base(p))
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// upload saves the staged files in the session's workspace for in, the
// message they go with. A refusal is told and the message not sent; the
// files stay staged.
func (a *attachments) upload(ctx context.Context, v *view, s Sessions, sessionID string, in switchboard.Input) ([]switchboard.File, bool) {
	if a.saved != nil && a.savedIn == sessionID {
		return a.saved, true // saved for a message that was not taken
	}
	incoming := make([]sessions.Incoming, len(a.paths))
	for i, p := range a.paths {
		st, err := os.Stat(p)
		if err != nil {
			v.printf("! Not sent: %s cannot be read any more (%s). /detach drops the files.\n", shown(filepath.Base(p)), shown(err.Error()))
			return nil, false
		}
		incoming[i] = sessions.Incoming{Name: filepath.Base(p), Size: st.Size(), Open: func(context.Context) (io.ReadCloser, error) { return os.Open(p) }}
	}
	files, err := s.Upload(ctx, sessionID, switchboard.Input{Author: in.Author, Place: in.Place}, incoming)
	switch {
	case errors.Is(err, sessions.ErrNotStored):
		v.printf("! Not sent: the gateway cannot store files now (its disk is full or failing), and kept none of them.\n")
		return nil, false
	case err != nil:
		v.printf("! Not sent: %s. /detach drops the files.\n", shown(sessions.Reason(err, err.Error())))
		return nil, false
	}
	a.saved, a.savedIn = files, sessionID
	return files, true
}

// unsave removes what was saved for a message that was not taken and
// will not be sent as it was: it would only fill the workspace.
func (a *attachments) unsave(ctx context.Context, s Sessions) {
	if len(a.saved) > 0 {
		s.Discard(context.WithoutCancel(ctx), a.savedIn, a.saved)
	}
	a.saved, a.savedIn = nil, ""
}

// sent: the message took the files.
func (a *attachments) sent() { a.paths, a.saved, a.savedIn = nil, nil, "" }

// attachArgs reads "/attach PATH [message]": a path in double or single
// quotes may have spaces, and so may an unquoted one that names a file;
// otherwise the path ends at the first space. A leading ~/ is the home
// folder.
func attachArgs(args string) (path, message string, err error) {
	if q := args[0]; q == '"' || q == '\'' {
		end := strings.IndexByte(args[1:], q)
		if end < 0 {
			return "", "", fmt.Errorf("the path's closing %c is missing", q)
		}
		path, message = args[1:end+1], strings.TrimSpace(args[end+2:])
	} else if _, err := os.Stat(home(args)); err == nil {
		path = args
	} else {
		path, message, _ = strings.Cut(args, " ")
		message = strings.TrimSpace(message)
	}
	if path == "" {
		return "", "", errors.New("the path is empty")
	}
	return home(path), message, nil
}

// home expands a leading ~/.
func home(path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if dir, err := os.UserHomeDir(); err == nil {
			return filepath.Join(dir, rest)
		}
	}
	return path
}

// isCommand: a line the session takes as a command, not a message.
func isCommand(text string) bool {
	name, _ := command(text)
	return name != ""
}

// fileLines are the lines under a message for its files: name, size and
// where the conversation's code finds each.
func fileLines(files []switchboard.File) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "  [file] %s (%s) saved as %s\n", shown(f.Name), switchboard.ByteSize(f.Size), shown(f.WorkspacePath()))
	}
	return b.String()
}

// shown is a name from elsewhere as the terminal prints it: without
// control characters, so it cannot move the cursor or restyle the screen.
func shown(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
