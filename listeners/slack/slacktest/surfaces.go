package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ---- views.* ----

// useTriggerLocked exchanges a trigger_id, answering Slack's errors for
// unknown, reused and expired ones.
func (s *Server) useTriggerLocked(id string) string {
	tr, ok := s.triggers[id]
	switch {
	case !ok:
		return "invalid_trigger_id"
	case tr.used:
		return "exchanged_trigger_id"
	case s.now().Sub(tr.issued) > TriggerTTL:
		return "expired_trigger_id"
	}
	tr.used = true
	return ""
}

func (s *Server) viewsOpen(p url.Values) apiResult { return s.openView(p, false) }
func (s *Server) viewsPush(p url.Values) apiResult { return s.openView(p, true) }

func (s *Server) openView(p url.Values, push bool) apiResult {
	raw := json.RawMessage(p.Get("view"))
	if err := ValidateView(raw); err != nil {
		return validationResult(err)
	}
	trig := p.Get("trigger_id")
	if trig == "" && p.Get("interactivity_pointer") != "" {
		trig = p.Get("interactivity_pointer")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.useTriggerLocked(trig); code != "" {
		return errResult(code)
	}
	var head viewHead
	_ = json.Unmarshal(raw, &head)
	if head.ExternalID != "" {
		for _, v := range s.views {
			if v.ExternalID == head.ExternalID {
				return errResult("duplicate_external_id")
			}
		}
	}
	v := &View{ID: s.newIDLocked("V"), ExternalID: head.ExternalID, CallbackID: head.CallbackID,
		TriggerID: trig, Raw: compact(raw), Hash: s.viewHashLocked()}
	v.RootViewID = v.ID
	if push {
		// A pushed view stacks on the most recently opened one.
		var last *View
		for _, o := range s.views {
			if last == nil || o.ID > last.ID {
				last = o
			}
		}
		if last != nil {
			v.PreviousViewID, v.RootViewID = last.ID, last.RootViewID
		}
	}
	s.views[v.ID] = v
	return okResult(map[string]any{"view": s.viewJSON(v, nil)})
}

type viewHead struct {
	Type       string `json:"type"`
	ExternalID string `json:"external_id"`
	CallbackID string `json:"callback_id"`
}

func (s *Server) viewsUpdate(p url.Values) apiResult {
	raw := json.RawMessage(p.Get("view"))
	if err := ValidateView(raw); err != nil {
		return validationResult(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var v *View
	for _, o := range s.views {
		if (p.Get("view_id") != "" && o.ID == p.Get("view_id")) ||
			(p.Get("view_id") == "" && p.Get("external_id") != "" && o.ExternalID == p.Get("external_id")) {
			v = o
		}
	}
	if v == nil {
		return errResult("not_found")
	}
	if h := p.Get("hash"); h != "" && h != v.Hash {
		return errResult("hash_conflict")
	}
	var head viewHead
	_ = json.Unmarshal(raw, &head)
	v.Raw, v.CallbackID, v.Hash = compact(raw), head.CallbackID, s.viewHashLocked()
	if head.ExternalID != "" {
		v.ExternalID = head.ExternalID
	}
	v.Updates++
	return okResult(map[string]any{"view": s.viewJSON(v, nil)})
}

func (s *Server) viewHashLocked() string {
	s.seq++
	return fmt.Sprintf("%d.%s", s.now().Unix(), strconv.FormatUint(s.seq, 16)+randomHex(3))
}

// viewJSON renders a stored view as Slack's view object, with state.values
// (empty unless given).
func (s *Server) viewJSON(v *View, values map[string]map[string]any) map[string]any {
	out := map[string]any{}
	_ = json.Unmarshal(v.Raw, &out)
	if values == nil {
		values = map[string]map[string]any{}
	}
	var prev any
	if v.PreviousViewID != "" {
		prev = v.PreviousViewID
	}
	for k, val := range map[string]any{
		"id": v.ID, "team_id": s.cfg.teamID, "state": map[string]any{"values": values},
		"hash": v.Hash, "root_view_id": v.RootViewID, "previous_view_id": prev,
		"app_id": s.cfg.appID, "bot_id": s.cfg.botID, "app_installed_team_id": s.cfg.teamID,
		"external_id": v.ExternalID, "callback_id": v.CallbackID,
	} {
		out[k] = val
	}
	for _, k := range []string{"private_metadata"} {
		if _, ok := out[k]; !ok {
			out[k] = ""
		}
	}
	for _, k := range []string{"clear_on_close", "notify_on_close"} {
		if _, ok := out[k]; !ok {
			out[k] = false
		}
	}
	return out
}

// ---- files ----

func (s *Server) filesGetUploadURLExternal(p url.Values) apiResult {
	name := p.Get("filename")
	length, err := strconv.Atoi(p.Get("length"))
	if name == "" || err != nil || length <= 0 {
		return errResult("missing_argument")
	}
	if utf8.RuneCountInString(p.Get("alt_txt")) > MaxAltTextChars {
		return errResult("alt_txt_too_large")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &File{ID: s.newIDLocked("F"), Name: name, Title: name, Length: length,
		AltText: p.Get("alt_txt"), SnippetType: p.Get("snippet_type")}
	s.files[f.ID] = f
	tok := randomHex(12)
	s.uploads[tok] = f.ID
	return okResult(map[string]any{"upload_url": s.http.URL + "/upload/v1/" + tok, "file_id": f.ID})
}

// handleUpload is the upload URL files.getUploadURLExternal hands out. Like
// Slack's it takes the bytes as a multipart "file" part or as the raw body
// and answers "OK - <length>".
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	tok := strings.TrimPrefix(r.URL.Path, "/upload/v1/")
	var data []byte
	mt, mp, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, mp["boundary"])
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			if part.FormName() == "file" || part.FileName() != "" {
				data, _ = io.ReadAll(part)
				break
			}
		}
	} else {
		data, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	id, ok := s.uploads[tok]
	if ok {
		f := s.files[id]
		f.Content, f.Uploaded = data, true
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "OK - %d", len(data))
}

func (s *Server) filesCompleteUploadExternal(p url.Values) apiResult {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p.Get("files")), &files); err != nil || len(files) == 0 {
		return errResult("invalid_arguments")
	}
	var blocks json.RawMessage
	if b := p.Get("blocks"); b != "" && p.Get("initial_comment") == "" {
		if !isJSONArray(json.RawMessage(b)) {
			return errResult("invalid_blocks")
		}
		if err := ValidateBlocks(json.RawMessage(b)); err != nil {
			return validationResult(err)
		}
		blocks = compact(json.RawMessage(b))
	}
	threadTS := p.Get("thread_ts")
	if threadTS != "" && !validTS(threadTS) {
		return errResult("invalid_thread_ts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var channels []string
	for _, c := range append([]string{p.Get("channel_id")}, strings.Split(p.Get("channels"), ",")...) {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if _, ok := s.channelLocked(c); !ok {
			return errResult("channel_not_found")
		}
		channels = append(channels, c)
	}
	var ids []string
	out := make([]any, 0, len(files))
	for _, fs := range files {
		f, ok := s.files[fs.ID]
		if !ok || !f.Uploaded {
			return errResult("file_not_found")
		}
		if fs.Title != "" {
			f.Title = fs.Title
		}
		ids = append(ids, f.ID)
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
	}
	for _, id := range ids {
		f := s.files[id]
		f.Completed, f.Channels, f.ThreadTS, f.InitialComment = true, channels, threadTS, p.Get("initial_comment")
	}
	// Sharing a file posts a message carrying it.
	for _, c := range channels {
		s.storeMessageLocked(&Message{Channel: c, TS: s.newTSLocked(), ThreadTS: threadTS, User: s.cfg.botUserID,
			BotID: s.cfg.botID, Text: p.Get("initial_comment"), Blocks: blocks, Files: ids}, "files.completeUploadExternal")
	}
	return okResult(map[string]any{"files": out})
}

// ---- response_url ----

// responseTarget is what a response_url answers for: the conversation, the
// user who acted and, for interactions on a message, that message.
type responseTarget struct {
	channel   string
	user      string
	messageTS string
}

func (s *Server) newResponseURLLocked(t responseTarget) string {
	path := "/response/" + s.cfg.teamID + "/" + randomHex(12)
	s.responses[path] = t
	return s.http.URL + path
}

// handleResponseURL implements the response_url of slash commands and
// interactions: ephemeral or in_channel replies, replace_original and
// delete_original for the message an action came from.
func (s *Server) handleResponseURL(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		Text            string          `json:"text"`
		Blocks          json.RawMessage `json:"blocks"`
		ResponseType    string          `json:"response_type"`
		ReplaceOriginal bool            `json:"replace_original"`
		DeleteOriginal  bool            `json:"delete_original"`
		ThreadTS        string          `json:"thread_ts"`
	}
	post := ResponseURLPost{URL: s.http.URL + r.URL.Path, Body: body}
	answer := func(status int, code string) {
		post.Error = code
		s.mu.Lock()
		post.At = s.now()
		s.respPosts = append(s.respPosts, post)
		s.mu.Unlock()
		if code == "" {
			writeJSON(w, status, map[string]any{"ok": true})
			return
		}
		writeJSON(w, status, map[string]any{"ok": false, "error": code})
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		answer(http.StatusBadRequest, "invalid_payload")
		return
	}
	if string(msg.Blocks) == "null" {
		msg.Blocks = nil
	}
	post.Text, post.Blocks, post.ResponseType = msg.Text, cloneRaw(msg.Blocks), msg.ResponseType
	post.ReplaceOriginal, post.DeleteOriginal, post.ThreadTS = msg.ReplaceOriginal, msg.DeleteOriginal, msg.ThreadTS
	if post.ResponseType == "" {
		post.ResponseType = "ephemeral"
	}
	if msg.Blocks != nil {
		if err := ValidateBlocks(msg.Blocks); err != nil {
			answer(http.StatusOK, "invalid_blocks")
			return
		}
	}
	if !msg.DeleteOriginal && msg.Text == "" && !nonEmptyArray(msg.Blocks) {
		answer(http.StatusOK, "no_text")
		return
	}

	s.mu.Lock()
	t, ok := s.responses[r.URL.Path]
	var code string
	switch {
	case !ok:
		code = "expired_url"
	case msg.DeleteOriginal || msg.ReplaceOriginal:
		m, found := s.messages[t.channel][t.messageTS]
		switch {
		case !found || m.Deleted:
			code = "message_not_found"
		case msg.DeleteOriginal:
			m.Deleted, m.Streaming = true, false
		default:
			m.Text, m.Blocks = msg.Text, compactOrNil(msg.Blocks)
			s.reviseLocked(m, "response_url")
		}
	case post.ResponseType == "in_channel":
		s.storeMessageLocked(&Message{Channel: t.channel, TS: s.newTSLocked(), ThreadTS: msg.ThreadTS,
			User: s.cfg.botUserID, BotID: s.cfg.botID, Text: msg.Text, Blocks: compactOrNil(msg.Blocks)}, "response_url")
	default:
		s.ephemerals = append(s.ephemerals, Ephemeral{Channel: t.channel, User: t.user, TS: s.newTSLocked(),
			ThreadTS: msg.ThreadTS, Text: msg.Text, Blocks: compactOrNil(msg.Blocks), At: s.now()})
	}
	s.mu.Unlock()
	if code == "expired_url" {
		answer(http.StatusNotFound, code)
		return
	}
	answer(http.StatusOK, code)
}

func compactOrNil(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	return compact(raw)
}
