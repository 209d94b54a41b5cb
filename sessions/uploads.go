package sessions

// Files from people: a listener hands the files of a message to Upload,
// which decides whether their sender may write here (the same decision
// as for their message, access.go), checks each file's announced size
// and, from its first bytes, its type, and only then has the listener's
// download start, into the conversation's workspace (uploads/). The
// message that follows carries the saved files (Input.Files).
//
// Downloads run on the listener's goroutine, never the session's: a slow
// one delays nobody else. A message's files are saved whole or not at
// all: when one is refused, those saved before it are removed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/images"
)

// Uploads keeps the files people send, in their conversation's workspace
// (the sandbox's, tools/sandbox).
type Uploads interface {
	// Save writes what r holds as a new file of the session's uploads/
	// folder, named after name and unique there, whole or not at all: at
	// most limit bytes (ErrFileTooLarge past it) within the workspace's
	// quota (ErrWorkspaceFull). It returns the path in the workspace.
	Save(ctx context.Context, sessionID, name string, r io.Reader, limit int64) (path string, size int64, err error)
	// Read returns a saved file, at most limit bytes of it.
	Read(ctx context.Context, sessionID, path string, limit int64) ([]byte, error)
	// Remove deletes a saved file.
	Remove(ctx context.Context, sessionID, path string) error
}

// Errors of uploads. A listener tells the sender the Refusal's Reason.
// ErrFileTooLarge and ErrWorkspaceFull are switchboard's, which the store
// of files returns too.
var (
	ErrFileTooLarge  = switchboard.ErrFileTooLarge
	ErrWorkspaceFull = switchboard.ErrWorkspaceFull
	ErrFileType      = errors.New("files of this type are not taken")
	ErrNoUploads     = errors.New("this gateway keeps no files for conversations")
)

// UploadLimits bound the files people send. Zero fields take the
// defaults.
type UploadLimits struct {
	FileBytes    int64 // one file (20 MiB)
	MessageBytes int64 // all the files of one message (50 MiB)
	Files        int   // files with one message (10)
	// Types are the media types taken, as a file's bytes show them (its
	// name only refines a text or zip type: .csv, .xlsx); "text/*" takes
	// a family. Empty: DefaultUploadTypes.
	Types []string
}

// Upload defaults.
const (
	DefaultUploadFileBytes    = 20 << 20
	DefaultUploadMessageBytes = 50 << 20
	DefaultUploadFiles        = 10
	maxFileName               = 100 // characters of a saved name
)

// DefaultUploadTypes are pictures, text of any kind (CSV, Markdown, code,
// JSON), PDF and zip containers (.xlsx, .docx): what people drop in a
// chat and a model or Python can read. Executables and unknown binaries
// are not among them.
func DefaultUploadTypes() []string {
	return []string{images.PNG, images.JPEG, images.GIF, images.WebP, "text/*", "application/json", "application/pdf", "application/zip"}
}

func (l UploadLimits) withDefaults() UploadLimits {
	if l.FileBytes <= 0 {
		l.FileBytes = DefaultUploadFileBytes
	}
	if l.MessageBytes <= 0 {
		l.MessageBytes = DefaultUploadMessageBytes
	}
	if l.Files <= 0 {
		l.Files = DefaultUploadFiles
	}
	if len(l.Types) == 0 {
		l.Types = DefaultUploadTypes()
	}
	return l
}

// Incoming is a file a person sent, not downloaded yet.
type Incoming struct {
	Name string
	// Size is the size the platform announced; -1 when it did not say.
	// A file bigger than announced is refused as it arrives.
	Size int64
	// Open starts the download; Upload calls it once the file may come.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// Upload saves the files a person sends with a message (in: its author,
// place and grant, as for the message) in the session's workspace and
// returns them, for the message's Input.Files. Nothing is downloaded for
// a person who may not write here, a file announced too large, or too
// many files. A refusal is a *Refusal with the sentence for the sender;
// a full disk wraps ErrNotStored.
func (m *Manager) Upload(ctx context.Context, sessionID string, in switchboard.Input, files []Incoming) ([]switchboard.File, error) {
	if m.isDraining() {
		return nil, ErrDraining
	}
	if m.cfg.Uploads == nil {
		return nil, refuse(ErrNoUploads, "this gateway keeps no files for conversations, so files cannot be sent here")
	}
	s, err := m.load(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if err := s.enter(ctx, in); err != nil { // who may act here (access.go)
		return nil, err
	}
	s.mu.Lock()
	role, closed := s.roleLocked(in.Author), s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case !role.CanWrite():
		return nil, refuse(ErrForbidden, "%s is a %s in this session and may not send files", in.Author.DisplayName(), role)
	}
	lim := m.cfg.UploadLimits.withDefaults()
	if len(files) > lim.Files {
		return nil, refuse(ErrFileTooLarge, "a message may bring at most %d files, not %d", lim.Files, len(files))
	}
	var announced int64
	for _, f := range files {
		name := cleanName(f.Name)
		if f.Size > lim.FileBytes {
			return nil, refuse(ErrFileTooLarge, "%s is %s; a file may be at most %s", name, switchboard.ByteSize(f.Size), switchboard.ByteSize(lim.FileBytes))
		}
		announced += max(f.Size, 0)
	}
	if announced > lim.MessageBytes {
		return nil, refuse(ErrFileTooLarge, "the files are %s together; a message's files may be at most %s", switchboard.ByteSize(announced), switchboard.ByteSize(lim.MessageBytes))
	}
	var saved []switchboard.File
	undo := func() {
		for _, f := range saved {
			if err := m.cfg.Uploads.Remove(context.WithoutCancel(ctx), sessionID, f.Path); err != nil {
				s.log.Warn("a file of a refused message was not removed", "path", f.Path, "err", err)
			}
		}
	}
	left := lim.MessageBytes
	for _, in := range files {
		f, err := m.saveOne(ctx, s, in, min(lim.FileBytes, left), lim)
		if err != nil {
			undo()
			return nil, err
		}
		left -= f.Size
		saved = append(saved, f)
	}
	return saved, nil
}

// saveOne downloads one file into the workspace, its type checked on its
// first bytes before the rest is read.
func (m *Manager) saveOne(ctx context.Context, s *session, in Incoming, limit int64, lim UploadLimits) (switchboard.File, error) {
	name := cleanName(in.Name)
	body, err := in.Open(ctx)
	if err != nil {
		return switchboard.File{}, fmt.Errorf("sessions: download %s: %w", name, err)
	}
	defer body.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(body, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return switchboard.File{}, fmt.Errorf("sessions: download %s: %w", name, err)
	}
	head = head[:n]
	typ := sniffType(head, name)
	if !typeAllowed(typ, lim.Types) {
		return switchboard.File{}, refuse(ErrFileType, "%s is %s, which this assistant does not take (it takes %s)", name, typeName(typ), strings.Join(lim.Types, ", "))
	}
	var r io.Reader = io.MultiReader(bytes.NewReader(head), body)
	if in.Size >= 0 {
		r = &announcedReader{r: r, left: in.Size, name: name}
	}
	p, n64, err := m.cfg.Uploads.Save(ctx, s.id, name, r, limit)
	switch {
	case errors.Is(err, ErrFileTooLarge):
		return switchboard.File{}, refuse(ErrFileTooLarge, "%s is larger than %s, the most it may be here", name, switchboard.ByteSize(limit))
	case errors.Is(err, ErrWorkspaceFull):
		return switchboard.File{}, refuse(ErrWorkspaceFull, "this conversation's workspace is full, so %s was not saved; remove files there first (the python tool can)", name)
	case errors.Is(err, errBiggerThanAnnounced):
		return switchboard.File{}, refuse(ErrFileTooLarge, "%s was bigger than announced, and was not saved", name)
	case isDiskFull(err):
		m.cfg.Metrics.WriteFailed()
		return switchboard.File{}, fmt.Errorf("sessions: save %s: %w: %w", name, ErrNotStored, err)
	case err != nil:
		return switchboard.File{}, fmt.Errorf("sessions: save %s: %w", name, err)
	}
	return switchboard.File{Name: name, Path: p, Type: typ, Size: n64}, nil
}

// isDiskFull: the disk the workspace is on has no room left.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// errBiggerThanAnnounced: a download brought more than the platform said.
var errBiggerThanAnnounced = errors.New("the file is bigger than announced")

// announcedReader fails once more than the announced size arrives.
type announcedReader struct {
	r    io.Reader
	left int64
	name string
}

func (a *announcedReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	a.left -= int64(n)
	if a.left < 0 {
		return n, errBiggerThanAnnounced
	}
	return n, err
}

// sniffType is the media type a file's first bytes show. Pictures are
// told by their signatures; for text and zip containers, which say
// nothing more of themselves, the name's extension refines the type
// (data.csv: text/csv) but never makes a binary file text.
func sniffType(head []byte, name string) string {
	if t := images.Sniff(head); t != "" {
		return t
	}
	t, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	byExt, _, _ := mime.ParseMediaType(mime.TypeByExtension(strings.ToLower(path.Ext(name))))
	switch {
	case t == "text/plain" && (strings.HasPrefix(byExt, "text/") || byExt == "application/json"):
		return byExt
	case t == "text/plain" && strings.ToLower(path.Ext(name)) == ".md":
		return "text/markdown"
	case t == "application/zip" && strings.HasPrefix(byExt, "application/vnd.openxmlformats"):
		return byExt
	}
	return t
}

// typeAllowed reports whether typ is one of allowed, or of a family
// ("text/*") one of them names. A zip container refined by its name
// (.xlsx) is allowed as a zip.
func typeAllowed(typ string, allowed []string) bool {
	family, _, _ := strings.Cut(typ, "/")
	zipped := strings.HasPrefix(typ, "application/vnd.openxmlformats")
	return slices.ContainsFunc(allowed, func(a string) bool {
		return a == typ || a == family+"/*" || zipped && a == "application/zip"
	})
}

func typeName(typ string) string {
	if typ == "application/octet-stream" {
		return "a binary file of no known type"
	}
	return typ
}

// cleanName is a file's name made safe to show and to save: its last
// path element, without control characters, NUL or separators, a leading
// dot or "..", at most maxFileName characters with its extension kept.
func cleanName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError, unicode.IsControl(r), r == ':', r == '*', r == '?', r == '"', r == '<', r == '>', r == '|':
			return '_'
		case unicode.IsSpace(r):
			return ' '
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ". ")
	if name == "" {
		name = "file"
	}
	if r := []rune(name); len(r) > maxFileName {
		ext := []rune(path.Ext(name))
		if len(ext) > 16 {
			ext = nil
		}
		name = string(r[:maxFileName-len(ext)]) + string(ext)
	}
	return name
}

// checkFiles refuses a message whose files, saved one by one (a
// WebSocket client sends them so), are more than a message may bring,
// and files with anything but a message.
func (m *Manager) checkFiles(in switchboard.Input) error {
	if len(in.Files) == 0 {
		return nil
	}
	if in.Kind != switchboard.InputText {
		return refuse(ErrFileType, "files go with a message, not with a %s", in.Kind)
	}
	lim := m.cfg.UploadLimits.withDefaults()
	var total int64
	for _, f := range in.Files {
		if !strings.HasPrefix(f.Path, "uploads/") || strings.Contains(f.Path[len("uploads/"):], "/") {
			return refuse(ErrFileType, "%s was not saved by Upload", f.Name)
		}
		total += f.Size
	}
	switch {
	case len(in.Files) > lim.Files:
		return refuse(ErrFileTooLarge, "a message may bring at most %d files, not %d", lim.Files, len(in.Files))
	case total > lim.MessageBytes:
		return refuse(ErrFileTooLarge, "the files are %s together; a message's files may be at most %s", switchboard.ByteSize(total), switchboard.ByteSize(lim.MessageBytes))
	}
	return nil
}

// Discard removes files Upload saved that no message brought after all
// (the message was refused, the connection that sent them closed): they
// would only fill the workspace. A path that is not an upload is left
// alone; what cannot be removed is logged, never fatal.
func (m *Manager) Discard(ctx context.Context, sessionID string, files []switchboard.File) {
	if m.cfg.Uploads == nil {
		return
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "uploads/") || strings.Contains(f.Path[len("uploads/"):], "/") {
			continue
		}
		if err := m.cfg.Uploads.Remove(ctx, sessionID, f.Path); err != nil {
			m.cfg.Logger.Warn("a file no message brought was not removed", "session", sessionID, "path", f.Path, "err", err)
		}
	}
}
