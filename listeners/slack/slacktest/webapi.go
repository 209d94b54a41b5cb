package slacktest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Slack's documented size limits for message content.
const (
	MaxTextChars         = 40000 // chat.postMessage text; longer answers msg_too_long
	MaxMarkdownTextChars = 12000 // markdown_text on chat.* and the streaming methods
	MaxAltTextChars      = 1000  // files.getUploadURLExternal alt_txt
)

var conversationID = regexp.MustCompile(`^[CDG][A-Z0-9]{2,}$`)

// apiResult is one Web API answer: an HTTP status, headers and a JSON body.
type apiResult struct {
	status int
	header http.Header
	body   map[string]any
}

func okResult(fields map[string]any) apiResult {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["ok"] = true
	return apiResult{status: http.StatusOK, body: fields}
}

func errResult(code string) apiResult {
	return apiResult{status: http.StatusOK, body: map[string]any{"ok": false, "error": code}}
}

// validationResult answers the way Slack reports schema problems: the error
// code, the problems under "errors", and "[ERROR] …" lines under
// response_metadata.messages (which slack-go exposes as
// SlackErrorResponse.ResponseMetadata.Messages).
func validationResult(err error) apiResult {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return errResult("invalid_arguments")
	}
	msgs := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		msgs[i] = "[ERROR] " + p
	}
	return apiResult{status: http.StatusOK, body: map[string]any{
		"ok":                false,
		"error":             ve.Code,
		"errors":            ve.Problems,
		"response_metadata": map[string]any{"messages": msgs},
	}}
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body)
	rec := Request{Method: method, Body: body, ContentType: r.Header.Get("Content-Type"), Time: s.now()}

	res := func() apiResult {
		params, token, perr := parseParams(r, body)
		rec.Params, rec.Token = params, token
		if perr != "" {
			return errResult(perr)
		}
		if code := s.authorize(method, token); code != "" {
			return errResult(code)
		}
		// Injected faults come after authentication, as Slack rate limits
		// per token and method.
		if f, ok := s.takeFailure(method); ok {
			switch {
			case f.status == http.StatusTooManyRequests:
				res := errResult(f.code)
				res.status = f.status
				res.header = http.Header{"Retry-After": {retryAfterSeconds(f.retryAfter)}}
				return res
			case f.status != http.StatusOK:
				return apiResult{status: f.status}
			default:
				return errResult(f.code)
			}
		}
		h, ok := s.handlers[method]
		if !ok {
			return errResult("unknown_method")
		}
		return h(params)
	}()

	rec.Status = res.status
	if res.body != nil {
		if ok, _ := res.body["ok"].(bool); !ok {
			rec.Error, _ = res.body["error"].(string)
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	for k, v := range res.header {
		w.Header()[k] = v
	}
	if res.body == nil {
		// Slack sends an HTML page with 5xx answers; slack-go ignores it.
		w.WriteHeader(res.status)
		return
	}
	writeJSON(w, res.status, res.body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// parseParams reads the arguments of a Web API call. Slack takes them as a
// form body, a JSON body (application/json, token only in the Authorization
// header) or a query string; the token comes from "Authorization: Bearer" or,
// for forms, the token field. It returns a Slack error code on failure.
func parseParams(r *http.Request, body []byte) (url.Values, string, string) {
	params := r.URL.Query()
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if len(bytes.TrimSpace(body)) == 0 {
		if token == "" {
			token = params.Get("token")
		}
		params.Del("token")
		return params, token, ""
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return params, token, "missing_post_type"
	}
	mt, mp, err := mime.ParseMediaType(ct)
	if err != nil {
		return params, token, "invalid_post_type"
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return params, token, "invalid_form_data"
		}
		for k, v := range form {
			params[k] = append(params[k], v...)
		}
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), mp["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return params, token, "invalid_form_data"
			}
			if part.FileName() == "" {
				v, _ := io.ReadAll(part)
				params.Add(part.FormName(), string(v))
			}
		}
	case "application/json":
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil {
			return params, token, "invalid_json"
		}
		for k, v := range obj {
			if k == "token" {
				continue // Slack ignores tokens inside JSON bodies
			}
			var str string
			if json.Unmarshal(v, &str) == nil {
				params.Set(k, str)
				continue
			}
			var buf bytes.Buffer
			if json.Compact(&buf, v) == nil {
				params.Set(k, buf.String())
			}
		}
		params.Del("token")
		return params, token, ""
	default:
		return params, token, "invalid_post_type"
	}
	if token == "" {
		token = params.Get("token")
	}
	params.Del("token")
	return params, token, ""
}

// authorize checks the token the way Slack does: no token is not_authed, a
// token of the wrong kind (bot token on apps.connections.open, app token
// elsewhere) is not_allowed_token_type, anything else unknown is
// invalid_auth.
func (s *Server) authorize(method, token string) string {
	appMethod := method == "apps.connections.open"
	switch token {
	case "":
		return "not_authed"
	case s.cfg.botToken:
		if appMethod {
			return "not_allowed_token_type"
		}
		return ""
	case s.cfg.appToken:
		if !appMethod {
			return "not_allowed_token_type"
		}
		return ""
	default:
		return "invalid_auth"
	}
}

func (s *Server) methods() map[string]func(url.Values) apiResult {
	return map[string]func(url.Values) apiResult{
		"api.test":                              func(p url.Values) apiResult { return okResult(map[string]any{"args": flatten(p)}) },
		"auth.test":                             s.authTest,
		"apps.connections.open":                 s.appsConnectionsOpen,
		"chat.postMessage":                      s.chatPostMessage,
		"chat.postEphemeral":                    s.chatPostEphemeral,
		"chat.update":                           s.chatUpdate,
		"chat.delete":                           s.chatDelete,
		"chat.getPermalink":                     s.chatGetPermalink,
		"chat.startStream":                      s.chatStartStream,
		"chat.appendStream":                     s.chatAppendStream,
		"chat.stopStream":                       s.chatStopStream,
		"users.info":                            s.usersInfo,
		"conversations.info":                    s.conversationsInfo,
		"conversations.open":                    s.conversationsOpen,
		"conversations.replies":                 s.conversationsReplies,
		"conversations.history":                 s.conversationsHistory,
		"reactions.add":                         s.reactionsAdd,
		"reactions.remove":                      s.reactionsRemove,
		"views.open":                            s.viewsOpen,
		"views.push":                            s.viewsPush,
		"views.update":                          s.viewsUpdate,
		"assistant.threads.setStatus":           s.assistantSetStatus,
		"assistant.threads.setSuggestedPrompts": s.assistantSetSuggestedPrompts,
		"assistant.threads.setTitle":            s.assistantSetTitle,
		"files.getUploadURLExternal":            s.filesGetUploadURLExternal,
		"files.completeUploadExternal":          s.filesCompleteUploadExternal,
		"files.info":                            s.filesInfo,
	}
}

func flatten(p url.Values) map[string]string {
	out := make(map[string]string, len(p))
	for k := range p {
		out[k] = p.Get(k)
	}
	return out
}

// ---- auth, users, conversations ----

func (s *Server) authTest(url.Values) apiResult {
	return okResult(map[string]any{
		"url":                   "https://" + s.cfg.host + ".slack.com/",
		"team":                  s.cfg.teamName,
		"user":                  s.cfg.botName,
		"team_id":               s.cfg.teamID,
		"user_id":               s.cfg.botUserID,
		"bot_id":                s.cfg.botID,
		"is_enterprise_install": false,
	})
}

func (s *Server) usersInfo(p url.Values) apiResult {
	s.mu.Lock()
	u, ok := s.users[p.Get("user")]
	s.mu.Unlock()
	if !ok {
		return errResult("user_not_found")
	}
	return okResult(map[string]any{"user": s.userJSON(u)})
}

func (s *Server) userJSON(u User) map[string]any {
	profile := map[string]any{
		"real_name":               u.RealName,
		"real_name_normalized":    u.RealName,
		"display_name":            u.DisplayName,
		"display_name_normalized": u.DisplayName,
		"team":                    s.cfg.teamID,
	}
	if u.Email != "" {
		profile["email"] = u.Email
	}
	if u.ID == s.cfg.botUserID {
		profile["bot_id"] = s.cfg.botID
		profile["api_app_id"] = s.cfg.appID
	}
	return map[string]any{
		"id":          u.ID,
		"team_id":     s.cfg.teamID,
		"name":        u.Name,
		"deleted":     u.Deleted,
		"real_name":   u.RealName,
		"tz":          u.TZ,
		"is_bot":      u.IsBot,
		"is_app_user": false,
		"profile":     profile,
	}
}

func (s *Server) channelLocked(id string) (Channel, bool) {
	if c, ok := s.channels[id]; ok {
		return c, true
	}
	if !conversationID.MatchString(id) {
		return Channel{}, false
	}
	c := Channel{ID: id, Name: strings.ToLower(id)}
	s.channels[id] = c
	return c, true
}

func (s *Server) conversationsInfo(p url.Values) apiResult {
	s.mu.Lock()
	c, ok := s.channelLocked(p.Get("channel"))
	s.mu.Unlock()
	if !ok || c.NotMember && c.Type() != "channel" {
		return errResult("channel_not_found") // a private conversation the bot is not in is invisible to it
	}
	ch := map[string]any{
		"id":          c.ID,
		"is_channel":  c.Type() == "channel",
		"is_group":    c.Type() == "group",
		"is_im":       c.Type() == "im",
		"is_mpim":     false,
		"is_private":  c.Type() != "channel",
		"is_archived": c.Archived,
		"is_member":   !c.NotMember,
	}
	if c.Type() == "im" {
		ch["user"] = c.User
	} else {
		ch["name"] = c.Name
		ch["name_normalized"] = c.Name
	}
	return okResult(map[string]any{"channel": ch})
}

// conversationsOpen opens (or finds) the bot's direct message with one
// person: the DM channel added with that User, else a new one.
func (s *Server) conversationsOpen(p url.Values) apiResult {
	users := strings.Split(p.Get("users"), ",")
	if p.Get("users") == "" {
		return errResult("users_list_not_supplied")
	}
	if len(users) > 1 {
		return errResult("not_enough_users") // a group DM is more than the fake models
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[users[0]]
	if !ok || u.Deleted {
		return errResult("user_not_found")
	}
	if u.IsBot {
		return errResult("cannot_dm_bot")
	}
	var found *Channel
	for _, c := range s.channels {
		if c.Type() == "im" && c.User == u.ID && !c.NotMember {
			found = &c
			break
		}
	}
	open := found != nil
	if !open {
		c := Channel{ID: s.newIDLocked("D"), User: u.ID}
		s.channels[c.ID] = c
		found = &c
	}
	return okResult(map[string]any{"channel": map[string]any{"id": found.ID}, "already_open": open, "no_op": open})
}

func (s *Server) conversationsReplies(p url.Values) apiResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return errResult("channel_not_found")
	}
	if code := ch.readRefusal(); code != "" {
		return errResult(code)
	}
	msgs := s.collect(p.Get("channel"), func(m *Message) bool { return m.TS == p.Get("ts") || m.ThreadTS == p.Get("ts") })
	if len(msgs) == 0 {
		return errResult("thread_not_found")
	}
	return s.page(p, msgs)
}

func (s *Server) conversationsHistory(p url.Values) apiResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return errResult("channel_not_found")
	}
	if code := ch.readRefusal(); code != "" {
		return errResult(code)
	}
	msgs := s.collect(p.Get("channel"), func(m *Message) bool { return !m.IsReply() || m.ReplyBroadcast })
	// History is newest first.
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	return s.page(p, msgs)
}

// page applies limit and an offset cursor to a list of messages.
func (s *Server) page(p url.Values, msgs []Message) apiResult {
	start := 0
	if c := p.Get("cursor"); c != "" {
		n, err := parsePositive(strings.TrimPrefix(c, "offset:"))
		if err != nil || n > len(msgs) {
			return errResult("invalid_cursor")
		}
		start = n
	}
	limit := 100
	if l := p.Get("limit"); l != "" {
		if n, err := parsePositive(l); err == nil && n > 0 {
			limit = min(n, 1000)
		}
	}
	end := min(start+limit, len(msgs))
	out := make([]any, 0, end-start)
	for i := start; i < end; i++ {
		out = append(out, s.messageJSON(&msgs[i]))
	}
	next := ""
	if end < len(msgs) {
		next = "offset:" + strconv.Itoa(end)
	}
	return okResult(map[string]any{
		"messages":          out,
		"has_more":          next != "",
		"response_metadata": map[string]any{"next_cursor": next},
	})
}

func (s *Server) reactionsAdd(p url.Values) apiResult    { return s.react(p, true) }
func (s *Server) reactionsRemove(p url.Values) apiResult { return s.react(p, false) }

func (s *Server) react(p url.Values, add bool) apiResult {
	name := strings.Trim(p.Get("name"), ":")
	if name == "" {
		return errResult("invalid_name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[p.Get("channel")][p.Get("timestamp")]
	if !ok || m.Deleted {
		return errResult("message_not_found")
	}
	users := m.Reactions[name]
	i := indexOf(users, s.cfg.botUserID)
	switch {
	case add && i >= 0:
		return errResult("already_reacted")
	case !add && i < 0:
		return errResult("no_reaction")
	case add:
		if m.Reactions == nil {
			m.Reactions = map[string][]string{}
		}
		m.Reactions[name] = append(users, s.cfg.botUserID)
	default:
		m.Reactions[name] = append(users[:i:i], users[i+1:]...)
		if len(m.Reactions[name]) == 0 {
			delete(m.Reactions, name)
		}
	}
	return okResult(nil)
}

func indexOf(list []string, v string) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

// ---- message content ----

// content is the content arguments of a chat.* call.
type content struct {
	text, markdown                                     string
	hasText, hasBlocks, hasAttachments, hasMeta, hasMD bool
	blocks, attachments, metadata                      json.RawMessage
}

func (c content) empty() bool {
	return c.text == "" && c.markdown == "" && !nonEmptyArray(c.blocks) && !nonEmptyArray(c.attachments)
}

// parseContent validates the content arguments the way chat.postMessage
// does. requireContent answers no_text when nothing would be shown.
func parseContent(p url.Values, requireContent bool) (content, *apiResult) {
	c := content{
		text: p.Get("text"), hasText: p.Has("text"),
		markdown: p.Get("markdown_text"), hasMD: p.Has("markdown_text"),
		hasBlocks: p.Has("blocks"), hasAttachments: p.Has("attachments"), hasMeta: p.Has("metadata"),
	}
	fail := func(r apiResult) (content, *apiResult) { return c, &r }
	if c.markdown != "" && (c.text != "" || c.hasBlocks) {
		return fail(errResult("markdown_text_conflict"))
	}
	if utf8.RuneCountInString(c.markdown) > MaxMarkdownTextChars {
		// Slack documents the 12,000-character limit without naming its
		// error; msg_too_long is the error of the text field.
		return fail(errResult("msg_too_long"))
	}
	if utf8.RuneCountInString(c.text) > MaxTextChars {
		return fail(errResult("msg_too_long"))
	}
	if c.hasBlocks && strings.TrimSpace(p.Get("blocks")) != "" {
		raw := json.RawMessage(p.Get("blocks"))
		if !isJSONArray(raw) {
			return fail(errResult("invalid_blocks_format"))
		}
		if err := ValidateBlocks(raw); err != nil {
			return fail(validationResult(err))
		}
		if nonEmptyArray(raw) { // "[]" means none (and on chat.update, remove them)
			c.blocks = compact(raw)
		}
	}
	if c.hasAttachments && strings.TrimSpace(p.Get("attachments")) != "" {
		raw := json.RawMessage(p.Get("attachments"))
		if !isJSONArray(raw) {
			return fail(errResult("invalid_attachments"))
		}
		if nonEmptyArray(raw) {
			c.attachments = compact(raw)
		}
	}
	if c.hasMeta {
		raw := json.RawMessage(p.Get("metadata"))
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return fail(errResult("invalid_metadata_format"))
		}
		if len(obj) > 0 {
			_, hasType := obj["event_type"]
			_, hasEntities := obj["entities"] // Work Object metadata
			if !hasType && !hasEntities {
				return fail(errResult("invalid_metadata_schema"))
			}
		}
		c.metadata = compact(raw)
	}
	if requireContent && c.empty() {
		return fail(errResult("no_text"))
	}
	return c, nil
}

func isJSONArray(raw json.RawMessage) bool {
	var arr []json.RawMessage
	return json.Unmarshal(raw, &arr) == nil
}

func nonEmptyArray(raw json.RawMessage) bool {
	var arr []json.RawMessage
	return json.Unmarshal(raw, &arr) == nil && len(arr) > 0
}

func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return cloneRaw(raw)
	}
	return buf.Bytes()
}

// messageJSON renders a stored message as Slack's message object.
func (s *Server) messageJSON(m *Message) map[string]any {
	out := map[string]any{
		"type": "message",
		"ts":   m.TS,
		"text": m.Text,
		"team": s.cfg.teamID,
	}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		out["app_id"] = s.cfg.appID
		out["bot_profile"] = map[string]any{
			"id": m.BotID, "app_id": s.cfg.appID, "user_id": s.cfg.botUserID,
			"name": s.cfg.botName, "deleted": false, "team_id": s.cfg.teamID,
		}
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
		if m.IsReply() {
			if parent, ok := s.messages[m.Channel][m.ThreadTS]; ok {
				out["parent_user_id"] = parent.User
			}
		}
	}
	if m.ReplyCount > 0 {
		out["reply_count"] = m.ReplyCount
	}
	if m.Blocks != nil {
		out["blocks"] = m.Blocks
	}
	if m.Attachments != nil {
		out["attachments"] = m.Attachments
	}
	if len(m.Metadata) > 2 { // "{}" means none
		out["metadata"] = m.Metadata
	}
	if len(m.Files) > 0 {
		files := make([]any, 0, len(m.Files))
		for _, id := range m.Files {
			if f, ok := s.files[id]; ok {
				files = append(files, map[string]any{"id": f.ID, "name": f.Name, "title": f.Title, "size": len(f.Content)})
			}
		}
		out["files"] = files
		out["upload"] = true
	}
	if len(m.Reactions) > 0 {
		var rs []any
		for name, users := range m.Reactions {
			rs = append(rs, map[string]any{"name": name, "users": users, "count": len(users)})
		}
		out["reactions"] = rs
	}
	if m.Edits() > 0 {
		last := m.History[len(m.History)-1]
		out["edited"] = map[string]any{"user": m.User, "ts": formatTS(last.At)}
	}
	return out
}

// storeMessageLocked adds a message to the model and threads it; method
// is what created it (an API method, "response_url" or "user").
func (s *Server) storeMessageLocked(m *Message, method string) {
	if s.messages[m.Channel] == nil {
		s.messages[m.Channel] = map[string]*Message{}
	}
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		// Replies to a reply land in the parent's thread.
		if parent, ok := s.messages[m.Channel][m.ThreadTS]; ok {
			if parent.IsReply() {
				m.ThreadTS = parent.ThreadTS
				parent = s.messages[m.Channel][m.ThreadTS]
			}
			if parent != nil {
				parent.ThreadTS = parent.TS
				parent.ReplyCount++
			}
		}
	}
	m.History = []Revision{{Method: method, Text: m.Text, Blocks: cloneRaw(m.Blocks), At: s.now()}}
	s.messages[m.Channel][m.TS] = m
}

// reviseLocked records a content change of m made by method.
func (s *Server) reviseLocked(m *Message, method string) {
	m.History = append(m.History, Revision{Method: method, Text: m.Text, Blocks: cloneRaw(m.Blocks), At: s.now()})
}

// ---- chat.* ----

func (s *Server) chatPostMessage(p url.Values) apiResult {
	c, fail := parseContent(p, true)
	if fail != nil {
		return *fail
	}
	threadTS := p.Get("thread_ts")
	if threadTS != "" && !validTS(threadTS) {
		return errResult("invalid_thread_ts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return errResult("channel_not_found")
	}
	if code := ch.postRefusal(); code != "" {
		return errResult(code)
	}
	m := &Message{
		Channel:        ch.ID,
		TS:             s.newTSLocked(),
		ThreadTS:       threadTS,
		User:           s.cfg.botUserID,
		BotID:          s.cfg.botID,
		Text:           c.text + c.markdown,
		MarkdownText:   c.markdown != "",
		Blocks:         c.blocks,
		Attachments:    c.attachments,
		Metadata:       c.metadata,
		ReplyBroadcast: p.Get("reply_broadcast") == "true",
	}
	s.storeMessageLocked(m, "chat.postMessage")
	return okResult(map[string]any{"channel": ch.ID, "ts": m.TS, "message": s.messageJSON(m)})
}

func (s *Server) chatPostEphemeral(p url.Values) apiResult {
	c, fail := parseContent(p, true)
	if fail != nil {
		return *fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return errResult("channel_not_found")
	}
	if code := ch.postRefusal(); code != "" {
		return errResult(code)
	}
	if _, ok := s.users[p.Get("user")]; !ok {
		return errResult("user_not_in_channel") // not a member of the workspace
	}
	e := Ephemeral{Channel: ch.ID, User: p.Get("user"), TS: s.newTSLocked(), ThreadTS: p.Get("thread_ts"),
		Text: c.text + c.markdown, Blocks: c.blocks, At: s.now()}
	s.ephemerals = append(s.ephemerals, e)
	return okResult(map[string]any{"message_ts": e.TS})
}

// ownMessageLocked finds a message the bot may edit, or the error Slack
// gives.
func (s *Server) ownMessageLocked(channel, ts, notOwned string) (*Message, string) {
	if _, ok := s.channelLocked(channel); !ok {
		return nil, "channel_not_found"
	}
	m, ok := s.messages[channel][ts]
	if !ok || m.Deleted {
		return nil, "message_not_found"
	}
	if m.User != s.cfg.botUserID {
		return nil, notOwned
	}
	return m, ""
}

func (s *Server) chatUpdate(p url.Values) apiResult {
	c, fail := parseContent(p, false)
	if fail != nil {
		return *fail
	}
	if !c.hasText && !c.hasMD && !c.hasBlocks && !c.hasAttachments && !c.hasMeta && !p.Has("file_ids") {
		return errResult("no_text")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, code := s.ownMessageLocked(p.Get("channel"), p.Get("ts"), "cant_update_message")
	if code != "" {
		return errResult(code)
	}
	if m.Streaming {
		return errResult("streaming_state_conflict")
	}
	// Slack: text replaces the text; omitted blocks are kept only when text
	// is omitted too, and an empty array removes them; omitted attachments
	// and metadata are kept ("{}" removes metadata).
	text, md, blocks, attachments, metadata := m.Text, m.MarkdownText, m.Blocks, m.Attachments, m.Metadata
	switch {
	case c.markdown != "":
		text, md, blocks = c.markdown, true, nil
	case c.hasText:
		text, md = c.text, false
	}
	switch {
	case c.hasBlocks:
		blocks = c.blocks
	case c.hasText:
		blocks = nil
	}
	if c.hasAttachments {
		attachments = c.attachments
	}
	if c.hasMeta {
		metadata = c.metadata
	}
	if text == "" && !nonEmptyArray(blocks) && !nonEmptyArray(attachments) {
		return errResult("no_text")
	}
	m.Text, m.MarkdownText, m.Blocks, m.Attachments, m.Metadata = text, md, blocks, attachments, metadata
	s.reviseLocked(m, "chat.update")
	return okResult(map[string]any{"channel": m.Channel, "ts": m.TS, "text": m.Text, "message": s.messageJSON(m)})
}

func (s *Server) chatGetPermalink(p url.Values) apiResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[p.Get("channel")][p.Get("message_ts")]
	if !ok || m.Deleted {
		return errResult("message_not_found")
	}
	link := "https://" + s.cfg.host + ".slack.com/archives/" + m.Channel + "/p" + strings.ReplaceAll(m.TS, ".", "")
	if m.IsReply() {
		link += "?thread_ts=" + m.ThreadTS + "&cid=" + m.Channel
	}
	return okResult(map[string]any{"channel": m.Channel, "permalink": link})
}

func (s *Server) chatDelete(p url.Values) apiResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, code := s.ownMessageLocked(p.Get("channel"), p.Get("ts"), "cant_delete_message")
	if code != "" {
		return errResult(code)
	}
	m.Deleted = true
	m.Streaming = false
	return okResult(map[string]any{"channel": m.Channel, "ts": m.TS})
}

// streamText validates markdown_text and chunks of a streaming call and
// returns the text they add, and the task and plan updates (tasks.go).
func streamText(p url.Values) (string, []taskUpdate, *apiResult) {
	text := p.Get("markdown_text")
	if utf8.RuneCountInString(text) > MaxMarkdownTextChars {
		r := errResult("msg_too_long")
		return "", nil, &r
	}
	var tasks []taskUpdate
	if raw := p.Get("chunks"); raw != "" {
		var chunks []map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &chunks) != nil {
			r := errResult("invalid_chunks")
			return "", nil, &r
		}
		for _, ch := range chunks {
			var typ string
			_ = json.Unmarshal(ch["type"], &typ)
			switch typ {
			case "markdown_text":
				var t string
				if json.Unmarshal(ch["text"], &t) != nil {
					r := errResult("invalid_chunks")
					return "", nil, &r
				}
				text += t
			case "blocks":
				var blocks []json.RawMessage
				if json.Unmarshal(ch["blocks"], &blocks) != nil {
					r := errResult("invalid_chunks")
					return "", nil, &r
				}
				if len(blocks) > 50 {
					r := errResult("msg_blocks_too_many")
					return "", nil, &r
				}
			case "task_update", "plan_update":
				u, ok := parseTaskChunk(typ, ch)
				if !ok {
					r := errResult("invalid_chunks")
					return "", nil, &r
				}
				tasks = append(tasks, u)
			default:
				r := errResult("invalid_chunks")
				return "", nil, &r
			}
		}
	}
	return text, tasks, nil
}

func (s *Server) chatStartStream(p url.Values) apiResult {
	s.mu.Lock()
	streamErr := s.streamErr
	s.mu.Unlock()
	if streamErr != "" {
		return errResult(streamErr)
	}
	text, tasks, fail := streamText(p)
	if fail != nil {
		return *fail
	}
	mode := p.Get("task_display_mode")
	if mode != "" && mode != "timeline" && mode != "plan" {
		return errResult("invalid_arguments")
	}
	// A streamed message is always a reply to a person's request: Slack
	// requires thread_ts, in DMs too, and answers its absence as it does
	// every missing required argument.
	threadTS := p.Get("thread_ts")
	if threadTS == "" {
		return validationResult(&ValidationError{Code: "invalid_arguments", Problems: []string{"missing required field: thread_ts"}})
	}
	if !validTS(threadTS) {
		return errResult("invalid_thread_ts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return errResult("channel_not_found")
	}
	if code := ch.postRefusal(); code != "" {
		return errResult(code)
	}
	// Slack requires the recipient when streaming into a channel (not a DM).
	if ch.Type() != "im" {
		if p.Get("recipient_user_id") == "" {
			return errResult("missing_recipient_user_id")
		}
		if p.Get("recipient_team_id") == "" {
			return errResult("missing_recipient_team_id")
		}
	}
	m := &Message{Channel: ch.ID, TS: s.newTSLocked(), ThreadTS: threadTS, User: s.cfg.botUserID,
		BotID: s.cfg.botID, Text: text, MarkdownText: true, Streaming: true, TaskDisplayMode: cmp.Or(mode, "timeline")}
	applyTasks(m, tasks)
	s.storeMessageLocked(m, "chat.startStream")
	return okResult(map[string]any{"channel": ch.ID, "ts": m.TS})
}

func (s *Server) streamingMessageLocked(p url.Values) (*Message, string) {
	m, code := s.ownMessageLocked(p.Get("channel"), p.Get("ts"), "message_not_owned_by_app")
	if code != "" {
		return nil, code
	}
	if !m.Streaming {
		return nil, "message_not_in_streaming_state"
	}
	return m, ""
}

func (s *Server) chatAppendStream(p url.Values) apiResult {
	text, tasks, fail := streamText(p)
	if fail != nil {
		return *fail
	}
	if p.Get("markdown_text") == "" && p.Get("chunks") == "" {
		return errResult("no_text")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, code := s.streamingMessageLocked(p)
	if code != "" {
		return errResult(code)
	}
	m.Text += text
	applyTasks(m, tasks)
	s.reviseLocked(m, "chat.appendStream")
	return okResult(map[string]any{"channel": m.Channel, "ts": m.TS})
}

func (s *Server) chatStopStream(p url.Values) apiResult {
	text, tasks, fail := streamText(p)
	if fail != nil {
		return *fail
	}
	final := url.Values{}
	for _, k := range []string{"blocks", "metadata"} {
		if p.Has(k) {
			final[k] = p[k]
		}
	}
	c, fail := parseContent(final, false)
	if fail != nil {
		return *fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, code := s.streamingMessageLocked(p)
	if code != "" {
		return errResult(code)
	}
	m.Text += text
	applyTasks(m, tasks)
	if c.hasBlocks {
		m.Blocks = c.blocks
	}
	if c.hasMeta {
		m.Metadata = c.metadata
	}
	m.Streaming = false
	s.reviseLocked(m, "chat.stopStream")
	return okResult(map[string]any{"channel": m.Channel, "ts": m.TS, "message": s.messageJSON(m)})
}

// ---- assistant.threads.* ----

func (s *Server) assistantThread(p url.Values) (string, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelLocked(p.Get("channel_id"))
	if !ok {
		return "", "", "channel_not_found"
	}
	if !validTS(p.Get("thread_ts")) {
		return "", "", "invalid_thread_ts"
	}
	return ch.ID, p.Get("thread_ts"), ""
}

func (s *Server) assistantSetStatus(p url.Values) apiResult {
	ch, ts, code := s.assistantThread(p)
	if code != "" {
		return errResult(code)
	}
	var loading []string
	if l := p.Get("loading_messages"); l != "" {
		loading = strings.Split(l, ",")
	}
	s.mu.Lock()
	s.statuses = append(s.statuses, AssistantStatus{Channel: ch, ThreadTS: ts, Status: p.Get("status"), LoadingMessages: loading, At: s.now()})
	s.mu.Unlock()
	return okResult(nil)
}

func (s *Server) assistantSetSuggestedPrompts(p url.Values) apiResult {
	ch, ts, code := s.assistantThread(p)
	if code != "" {
		return errResult(code)
	}
	var prompts []Prompt
	if err := json.Unmarshal([]byte(p.Get("prompts")), &prompts); err != nil || len(prompts) == 0 {
		return errResult("invalid_arguments")
	}
	for _, pr := range prompts {
		if pr.Title == "" || pr.Message == "" {
			return errResult("invalid_arguments")
		}
	}
	s.mu.Lock()
	s.prompts = append(s.prompts, SuggestedPrompts{Channel: ch, ThreadTS: ts, Title: p.Get("title"), Prompts: prompts, At: s.now()})
	s.mu.Unlock()
	return okResult(nil)
}

func (s *Server) assistantSetTitle(p url.Values) apiResult {
	if _, _, code := s.assistantThread(p); code != "" {
		return errResult(code)
	}
	return okResult(nil)
}

func parsePositive(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New("not a non-negative number")
	}
	return n, nil
}
