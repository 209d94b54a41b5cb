package sandbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// Tool names, as a guide lists them.
const (
	ToolPython = "python"
	ToolList   = "sandbox_fs_list"
	ToolRead   = "sandbox_fs_read"
	ToolWrite  = "sandbox_fs_write"
)

// Tools are the sandbox's four tools. Each works on the workspace of the
// session the call runs for (tools.SessionOf) and refuses without one.
func (s *Sandbox) Tools() []tools.Tool {
	return []tools.Tool{s.pythonTool(), s.listTool(), s.readTool(), s.writeTool()}
}

// session is the call's session, checked.
func session(ctx context.Context, tool string) (string, error) {
	id := tools.SessionOf(ctx)
	if id == "" {
		return "", fmt.Errorf("%s works in a session's sandbox, and this call has no session", tool)
	}
	if err := validSession(id); err != nil {
		return "", err
	}
	return id, nil
}

func (s *Sandbox) pythonTool() tools.Tool {
	c := s.cfg
	return tools.Tool{
		Name: ToolPython,
		Description: "Runs Python 3 code in a sandbox and returns its exit status, stdout and stderr. " +
			"The working directory is /workspace: files written there stay for the rest of the conversation. " +
			"Pictures the code saves there as .png, .jpg, .gif, .webp or .svg are shown to the user. " +
			"print() the results you need: only stdout and stderr come back. " +
			fmt.Sprintf("There is no network. Limits: %s wall clock, %d s of CPU, %s of memory per process, %s per file, %s in /workspace. ",
				formatDuration(c.Timeout), c.CPUSeconds, formatBytes(c.MemoryBytes), formatBytes(c.FileSizeBytes), formatBytes(c.QuotaBytes)) +
			"The standard library is there; other packages only if installed on the gateway (try importing them).",
		Parameters: json.RawMessage(fmt.Sprintf(`{
			"type": "object",
			"properties": {
				"code": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The program, run as a script in /workspace."},
				"dependencies": {
					"type": "array", "maxItems": 20,
					"items": {"type": "string", "minLength": 1, "maxLength": 100},
					"description": "Packages to install first, such as pandas or numpy==2.1 (only from the gateway's wheelhouse: there is no network)."
				}
			},
			"required": ["code"],
			"additionalProperties": false
		}`, maxCodeBytes)),
		SecurityWarning: "Runs code the model wrote, in a sandbox without network, with this session's files.",
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			var in struct {
				Code         string   `json:"code"`
				Dependencies []string `json:"dependencies"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return tools.Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			id, err := session(ctx, ToolPython)
			if err != nil {
				return tools.Result{}, err
			}
			return s.Run(ctx, id, in.Code, in.Dependencies)
		},
	}
}

// requirement is a dependency as pip takes it: a name, extras, versions.
// Nothing that pip would read as an option or a URL.
var requirement = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?((==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!-]+)?(,(==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!-]+)*$`)

// Run runs code in the session's sandbox and reports what happened as a
// tool result. The error is for a run that did not happen: the sandbox is
// unavailable, the workspace is over quota, dependencies were refused, or
// ctx ended.
func (s *Sandbox) Run(ctx context.Context, sessionID, code string, deps []string) (tools.Result, error) {
	if err := validSession(sessionID); err != nil {
		return tools.Result{}, err
	}
	if len(code) > maxCodeBytes {
		return tools.Result{}, fmt.Errorf("the code is %s; at most %s", formatBytes(int64(len(code))), formatBytes(maxCodeBytes))
	}
	if len(deps) > 0 {
		if s.cfg.Wheelhouse == "" {
			return tools.Result{}, fmt.Errorf("dependencies cannot be installed: the sandbox has no network, and this gateway has no wheelhouse of packages. "+
				"Use the standard library, or a package already installed for the sandbox's Python (import it and see); refused: %s", strings.Join(deps, ", "))
		}
		for _, d := range deps {
			if !requirement.MatchString(d) {
				return tools.Result{}, fmt.Errorf("dependency %q: give a package name with an optional version, such as pandas or numpy==2.1", d)
			}
		}
	}
	r, err := s.ready(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	// The session's turn first, then a slot: a call queued behind another
	// of its session holds no slot while it waits.
	defer s.lock(sessionID)()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return tools.Result{}, fmt.Errorf("waiting for a free sandbox: %w", ctx.Err())
	}
	ws, err := s.ensureWorkspace(sessionID)
	if err != nil {
		return tools.Result{}, err
	}
	before, err := s.snapshot(ws)
	if err != nil {
		return tools.Result{}, err
	}
	if why := s.over(before); why != "" {
		return tools.Result{}, fmt.Errorf("the workspace holds %s: nothing runs until files are removed (sandbox_fs_write with \"delete\": true)", why)
	}

	// The registry gives the call a deadline (sessions.tool_timeout); stop
	// the code a little before it, so the model reads why.
	timeout := s.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - time.Second; left < timeout {
			timeout = max(left, 100*time.Millisecond)
		}
	}
	watch := func() error {
		snap, err := s.snapshot(ws)
		if err != nil {
			// Unmeasured is not under quota: a run that hides its files
			// from the gateway is stopped.
			return fmt.Errorf("the workspace could not be measured against its quota (%v)", err)
		}
		if s.over(snap) != "" {
			return errQuota
		}
		return nil
	}
	res, err := s.exec(ctx, r, execSpec{workspace: ws, code: code, deps: deps, timeout: timeout, watch: watch})
	if err != nil {
		return tools.Result{}, err
	}
	after, err := s.snapshot(ws)
	if err != nil {
		return tools.Result{}, err
	}
	changed, removed := diff(before, after)
	out := s.report(res, timeout, after, changed, removed)
	out.Images, out.Content = s.images(ws, changed, out.Content)
	s.log.Info("sandbox run", "session", sessionID, "status", res.status, "signal", int(res.signal), "stopped", errString(res.stopped),
		"elapsed", res.elapsed.Round(time.Millisecond), "cpu", res.cpu.Round(time.Millisecond), "images", len(out.Images))
	return out, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// report words a run's outcome for the model: changed and removed are the
// files the run wrote and removed (diff), after the workspace it left.
func (s *Sandbox) report(res *execResult, timeout time.Duration, after *snapshot, changed, removed []string) tools.Result {
	var b strings.Builder
	switch {
	case errors.Is(res.stopped, errTimeout):
		fmt.Fprintf(&b, "killed: the code ran longer than %s, its time limit\n", formatDuration(timeout))
	case errors.Is(res.stopped, errQuota):
		fmt.Fprintf(&b, "killed: the workspace went over its quota (%s, %d files and directories)\n", formatBytes(s.cfg.QuotaBytes), maxEntries)
	case res.stopped != nil:
		fmt.Fprintf(&b, "killed: %v\n", res.stopped)
	case res.signal == sigXCPU || res.signal == sigKill && res.cpu >= time.Duration(s.cfg.CPUSeconds)*time.Second:
		fmt.Fprintf(&b, "killed: the code used its %d s of CPU time\n", s.cfg.CPUSeconds)
	case res.signal != 0:
		fmt.Fprintf(&b, "killed by signal %d (%v)\n", int(res.signal), res.signal)
	default:
		fmt.Fprintf(&b, "exit status %d\n", res.status)
	}
	section := func(name string, c *capped) {
		if t := c.text(); t != "" {
			fmt.Fprintf(&b, "%s:\n%s", name, t)
			if !strings.HasSuffix(t, "\n") {
				b.WriteByte('\n')
			}
		} else {
			fmt.Fprintf(&b, "%s: (empty)\n", name)
		}
	}
	section("stdout", res.stdout)
	section("stderr", res.stderr)
	for _, n := range s.notes(res.stdout.String() + res.stderr.String()) {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if len(changed) > 0 {
		const most = 20
		names := make([]string, 0, min(len(changed), most))
		for _, p := range changed[:min(len(changed), most)] {
			names = append(names, fmt.Sprintf("%s (%s)", p, formatBytes(after.files[p].size)))
		}
		if n := len(changed) - most; n > 0 {
			names = append(names, fmt.Sprintf("and %d more", n))
		}
		fmt.Fprintf(&b, "files written: %s\n", strings.Join(names, ", "))
	}
	if len(removed) > 0 {
		fmt.Fprintf(&b, "files removed: %s\n", strings.Join(removed[:min(len(removed), 20)], ", "))
	}
	if why := s.over(after); why != "" {
		fmt.Fprintf(&b, "the workspace now holds %s: remove files (sandbox_fs_write with \"delete\": true) before running code again\n", why)
	}
	return tools.Result{Content: b.String()}
}

// notes explain the sandbox's part in errors the code reports (on
// stderr, or caught and printed).
func (s *Sandbox) notes(output string) []string {
	var out []string
	add := func(cond bool, note string) {
		if cond {
			out = append(out, note)
		}
	}
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(output, sub) {
				return true
			}
		}
		return false
	}
	// Python's own wording of the errors the limits cause.
	add(has("MemoryError", "[Errno 12] Cannot allocate memory"),
		fmt.Sprintf("each process may use at most %s of memory", formatBytes(s.cfg.MemoryBytes)))
	add(has("[Errno 27] File too large"),
		fmt.Sprintf("files are limited to %s each", formatBytes(s.cfg.FileSizeBytes)))
	add(has("[Errno 11] Resource temporarily unavailable", "can't start new thread"),
		fmt.Sprintf("the code may have at most %d processes and threads", s.cfg.MaxProcs))
	add(has("[Errno 24] Too many open files"),
		fmt.Sprintf("a process may have at most %d files open", s.cfg.MaxFiles))
	add(has("[Errno 28] No space left on device"),
		fmt.Sprintf("/tmp holds at most %s", formatBytes(s.cfg.TmpBytes)))
	add(has("[Errno 101] Network is unreachable", "[Errno -3] Temporary failure in name resolution",
		"[Errno -2] Name or service not known", "[Errno 111] Connection refused"),
		"the sandbox has no network")
	return out
}

// diff lists the files new or changed since before, and those removed.
func diff(before, after *snapshot) (changed, removed []string) {
	for p, st := range after.files {
		if old, ok := before.files[p]; !ok || old != st {
			changed = append(changed, p)
		}
	}
	for p := range before.files {
		if _, ok := after.files[p]; !ok {
			removed = append(removed, p)
		}
	}
	slices.Sort(changed)
	slices.Sort(removed)
	return changed, removed
}

// images are the pictures among the files a run wrote (changed), for the
// users; content says which were shown and which not.
func (s *Sandbox) images(ws string, changed []string, content string) ([]switchboard.UIImage, string) {
	var names []string
	for _, p := range changed {
		if isImageName(p) {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return nil, content
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, content
	}
	defer root.Close()
	var imgs []switchboard.UIImage
	var shown, skipped []string
	for _, p := range names {
		if len(imgs) == maxImages {
			skipped = append(skipped, p+" (too many pictures in one run)")
			continue
		}
		img, why := loadImage(root, p)
		if why != "" {
			skipped = append(skipped, p+" ("+why+")")
			continue
		}
		imgs = append(imgs, img)
		shown = append(shown, p)
	}
	if len(shown) > 0 {
		content += "shown to the user: " + strings.Join(shown, ", ") + "\n"
	}
	if len(skipped) > 0 {
		content += "not shown: " + strings.Join(skipped, ", ") + "\n"
	}
	return imgs, content
}

// loadImage reads a picture from the workspace, or says why not.
func loadImage(root *os.Root, p string) (switchboard.UIImage, string) {
	data, size, err := readRegular(root, p, 0, maxImageBytes+1)
	if err != nil {
		return switchboard.UIImage{}, err.Error()
	}
	if size > maxImageBytes {
		return switchboard.UIImage{}, fmt.Sprintf("%s, over %s", formatBytes(size), formatBytes(maxImageBytes))
	}
	mime := sniffImage(p, data)
	if mime == "" {
		return switchboard.UIImage{}, fmt.Sprintf("not a %s file", strings.ToUpper(strings.TrimPrefix(path.Ext(p), ".")))
	}
	return switchboard.UIImage{Data: base64.StdEncoding.EncodeToString(data), MIMEType: mime, Alt: path.Base(p)}, ""
}

func (s *Sandbox) listTool() tools.Tool {
	return tools.Tool{
		Name:        ToolList,
		Description: "Lists the files in this conversation's sandbox workspace (/workspace, where the python tool runs), with their sizes.",
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path": {"type": "string", "maxLength": 1024, "description": "A directory relative to /workspace; the whole workspace when left out."}
			},
			"additionalProperties": false
		}`),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			var in struct {
				Path string `json:"path"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return tools.Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			id, err := session(ctx, ToolList)
			if err != nil {
				return tools.Result{}, err
			}
			p, err := cleanPath(in.Path)
			if err != nil {
				return tools.Result{}, err
			}
			defer s.lock(id)()
			ws, err := s.ensureWorkspace(id)
			if err != nil {
				return tools.Result{}, err
			}
			return s.list(ws, p)
		},
	}
}

// maxListed bounds sandbox_fs_list's answer.
const maxListed = 500

func (s *Sandbox) list(ws, p string) (tools.Result, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return tools.Result{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	fi, err := root.Stat(p)
	if err != nil {
		return tools.Result{}, rootError(p, err)
	}
	if !fi.IsDir() {
		return tools.Result{Content: fmt.Sprintf("%s  %s\n", p, formatBytes(fi.Size()))}, nil
	}
	var lines []string
	n := 0
	err = fs.WalkDir(root.FS(), p, func(q string, d fs.DirEntry, err error) error {
		if err != nil || q == p {
			return nil
		}
		if n++; n > maxListed {
			return fs.SkipAll
		}
		rel := q
		switch {
		case d.IsDir():
			lines = append(lines, rel+"/")
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := root.Readlink(q)
			lines = append(lines, fmt.Sprintf("%s -> %s", rel, target))
		default:
			info, err := d.Info()
			if err != nil {
				return nil
			}
			if !info.Mode().IsRegular() {
				lines = append(lines, fmt.Sprintf("%s  (%s)", rel, kindOf(info)))
			} else {
				lines = append(lines, fmt.Sprintf("%s  %s", rel, formatBytes(info.Size())))
			}
		}
		return nil
	})
	if err != nil {
		return tools.Result{}, rootError(p, err)
	}
	var b strings.Builder
	if len(lines) == 0 {
		b.WriteString("(no files)\n")
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if n > maxListed {
		fmt.Fprintf(&b, "[… more not listed: list a subdirectory]\n")
	}
	if snap, err := s.snapshot(ws); err == nil {
		fmt.Fprintf(&b, "workspace: %s of %s used\n", formatBytes(snap.bytes), formatBytes(s.cfg.QuotaBytes))
	}
	return tools.Result{Content: b.String()}, nil
}

func (s *Sandbox) readTool() tools.Tool {
	return tools.Tool{
		Name: ToolRead,
		Description: fmt.Sprintf("Reads a file from this conversation's sandbox workspace (/workspace). Text comes back as text, "+
			"%s at a time (use offset for more); a picture (.png, .jpg, .gif, .webp, .svg) is shown to the user.", formatBytes(maxReadBytes)),
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "Relative to /workspace, such as results.csv"},
				"offset": {"type": "integer", "minimum": 0, "description": "Byte to start at (0)."}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			var in struct {
				Path   string `json:"path"`
				Offset int64  `json:"offset"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return tools.Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			id, err := session(ctx, ToolRead)
			if err != nil {
				return tools.Result{}, err
			}
			p, err := cleanPath(in.Path)
			if err != nil {
				return tools.Result{}, err
			}
			defer s.lock(id)()
			ws, err := s.ensureWorkspace(id)
			if err != nil {
				return tools.Result{}, err
			}
			return s.read(ws, p, in.Offset)
		},
	}
}

func (s *Sandbox) read(ws, p string, offset int64) (tools.Result, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return tools.Result{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	if isImageName(p) && offset == 0 {
		img, why := loadImage(root, p)
		if why == "" {
			return tools.Result{Content: fmt.Sprintf("%s: %s picture, shown to the user", p, img.MIMEType), Images: []switchboard.UIImage{img}}, nil
		}
		if fi, err := root.Stat(p); err != nil || !fi.Mode().IsRegular() {
			if err != nil {
				return tools.Result{}, rootError(p, err)
			}
			return tools.Result{}, fmt.Errorf("%s is not a regular file (%s)", p, kindOf(fi))
		}
		// Not a picture after all: read on as a file.
	}
	data, size, err := readRegular(root, p, offset, maxReadBytes)
	if err != nil {
		return tools.Result{}, err
	}
	if offset > size {
		offset = size
	}
	if !utf8.Valid(trimPartialRune(data)) || strings.ContainsRune(string(data), 0) {
		return tools.Result{Content: fmt.Sprintf("%s: a binary file of %s, not shown; read it with the python tool", p, formatBytes(size))}, nil
	}
	end := offset + int64(len(data))
	if end < size {
		data = trimPartialRune(data)
		end = offset + int64(len(data))
	}
	var b strings.Builder
	b.Write(data)
	if end < size || offset > 0 {
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[bytes %d-%d of %d", offset, end, size)
		if end < size {
			fmt.Fprintf(&b, "; call again with offset %d for more", end)
		}
		b.WriteString("]\n")
	}
	return tools.Result{Content: b.String()}, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence cut at the end.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b // ASCII: nothing cut
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

func (s *Sandbox) writeTool() tools.Tool {
	return tools.Tool{
		Name: ToolWrite,
		Description: "Writes a file in this conversation's sandbox workspace (/workspace), for the python tool to use; " +
			"creates the directories it needs. With \"append\" it adds to the end; with \"delete\" it removes the file or directory.",
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "Relative to /workspace, such as data/input.csv"},
				"content": {"type": "string", "description": "The file's content."},
				"encoding": {"type": "string", "enum": ["text", "base64"], "description": "How content is given (text)."},
				"append": {"type": "boolean", "description": "Add to the end of the file instead of replacing it."},
				"delete": {"type": "boolean", "description": "Remove the file (or directory, with everything in it) instead; content is not needed."}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			var in struct {
				Path     string  `json:"path"`
				Content  *string `json:"content"`
				Encoding string  `json:"encoding"`
				Append   bool    `json:"append"`
				Delete   bool    `json:"delete"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return tools.Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			id, err := session(ctx, ToolWrite)
			if err != nil {
				return tools.Result{}, err
			}
			p, err := cleanPath(in.Path)
			if err != nil {
				return tools.Result{}, err
			}
			if p == "." {
				return tools.Result{}, errors.New("give the path of a file in /workspace, not the workspace itself")
			}
			defer s.lock(id)()
			ws, err := s.ensureWorkspace(id)
			if err != nil {
				return tools.Result{}, err
			}
			if in.Delete {
				return s.remove(ws, p)
			}
			if in.Content == nil {
				return tools.Result{}, errors.New("content is required (or \"delete\": true)")
			}
			data := []byte(*in.Content)
			if in.Encoding == "base64" {
				if data, err = base64.StdEncoding.DecodeString(*in.Content); err != nil {
					return tools.Result{}, fmt.Errorf("content is not valid base64: %w", err)
				}
			}
			return s.write(ws, p, data, in.Append)
		},
	}
}

func (s *Sandbox) remove(ws, p string) (tools.Result, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return tools.Result{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	if _, err := root.Lstat(p); err != nil {
		return tools.Result{}, rootError(p, err)
	}
	if err := root.RemoveAll(p); err != nil {
		return tools.Result{}, rootError(p, err)
	}
	return tools.Result{Content: "removed " + p}, nil
}

func (s *Sandbox) write(ws, p string, data []byte, appendTo bool) (tools.Result, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return tools.Result{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	var old int64
	fi, err := root.Stat(p)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return tools.Result{}, fmt.Errorf("%s is %s, not a file", p, kindOf(fi))
	case err == nil:
		old = fi.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return tools.Result{}, rootError(p, err)
	}
	size := int64(len(data))
	if appendTo {
		size += old
	}
	if size > s.cfg.FileSizeBytes {
		return tools.Result{}, fmt.Errorf("refused: %s would be %s; files are limited to %s each", p, formatBytes(size), formatBytes(s.cfg.FileSizeBytes))
	}
	snap, err := s.snapshot(ws)
	if err != nil {
		return tools.Result{}, err
	}
	if total := snap.bytes - old + size; total > s.cfg.QuotaBytes && size > old {
		return tools.Result{}, fmt.Errorf("refused: the workspace would hold %s, over its %s quota; remove files first (\"delete\": true)",
			formatBytes(total), formatBytes(s.cfg.QuotaBytes))
	}
	if snap.full || snap.entries >= maxEntries && old == 0 {
		return tools.Result{}, fmt.Errorf("refused: the workspace already has %d files and directories; remove some first", maxEntries)
	}
	if err := s.mkdirs(root, path.Dir(p)); err != nil {
		return tools.Result{}, rootError(p, err)
	}
	flag := os.O_WRONLY | os.O_CREATE | nonblock
	if appendTo {
		flag |= os.O_APPEND
	} else {
		flag |= os.O_TRUNC
	}
	f, err := root.OpenFile(p, flag, 0o644)
	if err != nil {
		return tools.Result{}, rootError(p, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return tools.Result{}, fmt.Errorf("write %s: %w", p, werr)
	}
	if s.dropUID >= 0 {
		if err := root.Lchown(p, s.dropUID, s.dropUID); err != nil {
			return tools.Result{}, fmt.Errorf("write %s: %w", p, err)
		}
	}
	verb := "wrote"
	if appendTo {
		verb = "appended to"
	}
	return tools.Result{Content: fmt.Sprintf("%s %s (%s now)", verb, p, formatBytes(size))}, nil
}

// mkdirs creates dir and its parents in root, owned by the sandbox's uid.
func (s *Sandbox) mkdirs(root *os.Root, dir string) error {
	if dir == "." {
		return nil
	}
	cur := "."
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		err := root.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if s.dropUID >= 0 {
			if err := root.Lchown(cur, s.dropUID, s.dropUID); err != nil {
				return err
			}
		}
	}
	return nil
}

// formatDuration is a time limit for people: 30 s, 1.5 s, 2 min.
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d >= 10*time.Second:
		return fmt.Sprintf("%d s", d.Round(time.Second)/time.Second)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
