package sessions

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// File is one file a session keeps outside the conversation: in its
// sandbox's workspace (/files).
type File struct {
	Path     string // relative to the workspace, slash-separated
	Size     int64
	Modified time.Time
}

// ErrNoFiles: the gateway keeps no files for sessions (no sandbox).
var ErrNoFiles = errors.New("this gateway keeps no files for conversations (tools.sandbox and uploads are off)")

// files answers /files to the one who asked: the session's sandbox files.
func (s *session) files(by switchboard.Author) {
	if s.m.cfg.Files == nil {
		s.tell(by, NoticeInfo, ErrNoFiles.Error()+".")
		return
	}
	fs, err := s.m.cfg.Files(s.id)
	switch {
	case errors.Is(err, ErrNoFiles):
		s.tell(by, NoticeInfo, err.Error()+".")
		return
	case err != nil:
		s.log.Warn("files not listed", "err", err)
		s.tell(by, switchboard.ErrCodeInternal, "The files could not be listed; try again.")
		return
	case len(fs) == 0:
		s.tell(by, NoticeInfo, "This conversation has no files yet: files people send, the python tool and sandbox_fs_write put them in its workspace.")
		return
	}
	var b strings.Builder
	var total int64
	for _, f := range fs {
		total += f.Size
	}
	fmt.Fprintf(&b, "%d %s in this conversation's workspace (%s):", len(fs), plural(len(fs), "file", "files"), switchboard.ByteSize(total))
	for i, f := range fs {
		if i == 50 {
			fmt.Fprintf(&b, "\n  … and %d more", len(fs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s  %s  %s UTC", f.Path, switchboard.ByteSize(f.Size), f.Modified.UTC().Format("2006-01-02 15:04"))
	}
	s.tell(by, NoticeInfo, b.String())
}
