package slacktest

// People's files: what a person shares with a message (UserMessage.Files),
// the file objects Slack puts in its events, files.info, and the download
// at url_private_download, which takes the bot token (with the files:read
// scope) and answers anyone else with Slack's sign-in page.

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// UserFile is a file a person shares with a message.
type UserFile struct {
	Name     string
	Mimetype string // "text/plain" when empty
	Data     []byte
	// Size is the size Slack announces in the file object; 0 announces
	// len(Data). A smaller one makes the download bigger than announced.
	Size int
	// External: a link to a file kept outside Slack (Google Drive, say):
	// is_external, with url_private the outside link and no
	// url_private_download.
	External bool
	// Mode is the file object's mode ("hosted" when empty).
	// "hidden_by_limit" (older than a free workspace's history) and
	// "tombstone" (deleted) leave the object its id and mode alone, as
	// Slack does.
	Mode string
	// CheckFileInfo: the event's file object holds only the id and
	// file_access "check_file_info", as Slack sends for some shares (in
	// Slack Connect channels, say); files.info has the rest.
	CheckFileInfo bool
	// Stall: a download sends half the file, then nothing, until the
	// client gives up.
	Stall bool
}

// Download is one request for a file's url_private(_download).
type Download struct {
	FileID string
	Token  string // the bearer token sent, "" for none
	Status int    // what the file's URL answered (302: to the sign-in page)
}

// WithoutFilesRead installs the app without the files:read scope (an app
// installed before its manifest asked for it): files.info answers
// missing_scope and a download, the sign-in page, as Slack does.
func WithoutFilesRead() Option { return func(c *config) { c.noFilesRead = true } }

// Downloads returns the requests for people's files, in arrival order.
func (s *Server) Downloads() []Download {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.downloads)
}

// addUserFilesLocked stores the files of a person's message and returns
// their IDs.
func (s *Server) addUserFilesLocked(user, channel string, files []UserFile) []string {
	var ids []string
	for _, uf := range files {
		f := &File{ID: s.newIDLocked("F"), Name: uf.Name, Title: uf.Name, Content: slices.Clone(uf.Data), Uploaded: true, Completed: true,
			Channels: []string{channel}, User: user, Mimetype: uf.Mimetype, Announced: uf.Size, External: uf.External, Mode: uf.Mode,
			CheckFileInfo: uf.CheckFileInfo, Stall: uf.Stall, Created: s.now().Unix()}
		if f.Mimetype == "" {
			f.Mimetype = "text/plain"
		}
		if f.Announced == 0 {
			f.Announced = len(uf.Data)
		}
		if f.Mode == "" {
			f.Mode = "hosted"
			if f.External {
				f.Mode = "external"
			}
		}
		s.files[f.ID] = f
		ids = append(ids, f.ID)
	}
	return ids
}

// fileObjectLocked is a person's file as Slack describes it: in full
// (files.info, and events but for check_file_info) or as an event has it.
func (s *Server) fileObjectLocked(f *File, inEvent bool) map[string]any {
	switch {
	case f.Mode == "hidden_by_limit" || f.Mode == "tombstone":
		return map[string]any{"id": f.ID, "mode": f.Mode}
	case inEvent && f.CheckFileInfo:
		return map[string]any{"id": f.ID, "file_access": "check_file_info", "created": f.Created, "timestamp": f.Created, "user": f.User}
	}
	ext := ""
	if i := strings.LastIndexByte(f.Name, '.'); i >= 0 {
		ext = strings.ToLower(f.Name[i+1:])
	}
	o := map[string]any{
		"id": f.ID, "created": f.Created, "timestamp": f.Created, "name": f.Name, "title": f.Title,
		"mimetype": f.Mimetype, "filetype": ext, "pretty_type": strings.ToUpper(ext), "user": f.User, "user_team": s.cfg.teamID,
		"editable": false, "size": f.Announced, "mode": f.Mode, "is_external": f.External, "external_type": "",
		"is_public": false, "public_url_shared": false, "display_as_bot": false, "username": "",
		"permalink":   "https://" + s.cfg.host + ".slack.com/files/" + f.User + "/" + f.ID + "/" + url.PathEscape(f.Name),
		"file_access": "visible", "has_rich_preview": false,
	}
	if f.External {
		o["external_type"] = "gdrive"
		o["url_private"] = "https://drive.google.com/file/d/" + f.ID + "/view"
		return o
	}
	base := s.http.URL + "/files-pri/" + s.cfg.teamID + "-" + f.ID + "/"
	o["url_private"] = base + url.PathEscape(f.Name)
	o["url_private_download"] = base + "download/" + url.PathEscape(f.Name)
	return o
}

// filesOfLocked are the file objects of a stored message, as its events
// carry them.
func (s *Server) filesOfLocked(channel, ts string) []any {
	m, ok := s.messages[channel][ts]
	if !ok {
		return nil
	}
	var out []any
	for _, id := range m.Files {
		if f, ok := s.files[id]; ok {
			out = append(out, s.fileObjectLocked(f, true))
		}
	}
	return out
}

// filesInfo is files.info: a file's object in full.
func (s *Server) filesInfo(p url.Values) apiResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.noFilesRead {
		res := errResult("missing_scope")
		res.body["needed"], res.body["provided"] = "files:read", "chat:write,commands,users:read"
		return res
	}
	f, ok := s.files[p.Get("file")]
	if !ok || f.Mode == "tombstone" {
		return errResult("file_not_found")
	}
	return okResult(map[string]any{"file": s.fileObjectLocked(f, false), "comments": []any{},
		"response_metadata": map[string]any{"next_cursor": ""}})
}

// handleFile serves url_private and url_private_download. Slack gives a
// file to a request with "Authorization: Bearer" and a token that may
// read it (files:read); anything else is redirected to the workspace's
// sign-in page, an HTML page answered 200.
func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/files-pri/")
	key, _, _ := strings.Cut(rest, "/")
	id := strings.TrimPrefix(key, s.cfg.teamID+"-")
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	f, ok := s.files[id]
	var data []byte
	var mimetype string
	var stall bool
	if ok {
		data, mimetype, stall = slices.Clone(f.Content), f.Mimetype, f.Stall
	}
	allowed := token == s.cfg.botToken && !s.cfg.noFilesRead
	status := http.StatusOK
	switch {
	case !ok || f.External || f.Mode == "tombstone" || f.Mode == "hidden_by_limit":
		status = http.StatusNotFound
	case !allowed:
		status = http.StatusFound
	}
	s.downloads = append(s.downloads, Download{FileID: id, Token: token, Status: status})
	s.mu.Unlock()
	switch status {
	case http.StatusNotFound:
		http.NotFound(w, r)
		return
	case http.StatusFound:
		w.Header().Set("X-Slack-Meta", "?;acl_fail")
		http.Redirect(w, r, s.http.URL+"/?redirect="+url.QueryEscape(r.URL.Path), http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", mimetype)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if !stall {
		_, _ = w.Write(data)
		return
	}
	_, _ = w.Write(data[:len(data)/2])
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

// handleSignIn is the workspace's sign-in page, where Slack sends a
// request for a file it does not give.
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte("<!DOCTYPE html><html><head><title>Sign in | Slack</title></head><body>Sign in to " + s.cfg.teamName + "</body></html>"))
}
