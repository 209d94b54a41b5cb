package discordtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// --- gateway, users, application ---

func (c *call) getGateway() result {
	return okJSON(map[string]any{"url": c.s.GatewayURL()})
}

func (c *call) getGatewayBot() result {
	s := c.s
	s.mu.Lock()
	remaining := max(s.cfg.sessionStartLimit-len(s.gw.identifies), 0)
	s.mu.Unlock()
	return okJSON(map[string]any{
		"url":    s.GatewayURL(),
		"shards": 1,
		"session_start_limit": map[string]any{
			"total": s.cfg.sessionStartLimit, "remaining": remaining, "reset_after": 14400000, "max_concurrency": 1,
		},
	})
}

func (c *call) getCurrentUser() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.userJSONLocked(s.cfg.botID)
	u["verified"] = true
	u["mfa_enabled"] = false
	u["email"] = nil
	u["locale"] = "en-US"
	u["bio"] = ""
	return okJSON(u)
}

func (c *call) getUser() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[c.param("user.id")]; !ok {
		return errorResult(errUnknownUser)
	}
	return okJSON(s.userJSONLocked(c.param("user.id")))
}

func (c *call) getCurrentApplication() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// The privileged-intent flags follow what the portal allows
	// (WithPrivilegedIntents), as the application's flags do on Discord:
	// the _LIMITED ones of a bot in fewer than 100 servers.
	const intentFlags = 1<<12 | 1<<13 | 1<<14 | 1<<15 | 1<<18 | 1<<19
	flags := s.cfg.appFlags &^ intentFlags
	for intent, flag := range map[int64]int{1 << 1: 1 << 15, 1 << 8: 1 << 13, 1 << 15: 1 << 19} {
		if s.cfg.allowedPrivileged&intent != 0 {
			flags |= flag
		}
	}
	return okJSON(map[string]any{
		"id": s.cfg.appID, "name": s.cfg.botName, "icon": nil, "description": "",
		"bot_public": true, "bot_require_code_grant": false, "verify_key": hex.EncodeToString(s.cfg.pub),
		"flags": flags, "bot": s.userJSONLocked(s.cfg.botID), "team": nil,
		"owner": s.userJSONLocked(DefaultOwnerID),
	})
}

func (c *call) createDM() result {
	var body struct {
		RecipientID string `json:"recipient_id"`
	}
	_ = json.Unmarshal(c.body, &body)
	if body.RecipientID == "" {
		v := newValidator(nil)
		v.add([]any{"recipient_id"}, "BASE_TYPE_REQUIRED", "This field is required")
		return errorResult(v.err())
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[body.RecipientID]; !ok {
		return errorResult(errUnknownUser)
	}
	return okJSON(s.channelJSONLocked(s.dmLocked(body.RecipientID)))
}

// --- guilds ---

func (c *call) getGuild() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.guilds[c.param("guild.id")]
	if !ok {
		return errorResult(errUnknownGuild)
	}
	return okJSON(s.guildJSONLocked(g))
}

func (c *call) getGuildMember() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.guilds[c.param("guild.id")]; !ok {
		return errorResult(errUnknownGuild)
	}
	m, ok := s.members[c.param("guild.id")][c.param("user.id")]
	if !ok {
		return errorResult(errUnknownMember)
	}
	return okJSON(s.memberJSONLocked(m, true))
}

// --- channels and messages ---

func (c *call) getChannel() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, 0); e != nil {
		return errorResult(e)
	}
	return okJSON(s.channelJSONLocked(ch))
}

// botDeniedLocked is what the bot may not do in ch: its own denials and,
// in a thread, its parent's.
func (s *Server) botDeniedLocked(ch *Channel) int64 {
	d := ch.BotDenied
	if p, ok := s.channels[ch.ParentID]; ok && ch.ParentID != "" {
		d |= p.BotDenied
	}
	return d
}

// botMayLocked is the error Discord answers the bot for an action in ch
// that needs perm (besides View Channel, which every one needs), nil when
// the bot may. DMs have no permissions to lack.
func (s *Server) botMayLocked(ch *Channel, perm int64) *Error {
	if ch.Type == ChannelTypeDM {
		return nil
	}
	d := s.botDeniedLocked(ch)
	switch {
	case d&PermissionViewChannel != 0:
		return errMissingAccess
	case d&perm != 0:
		return errMissingPermissions
	}
	return nil
}

// sendPermission is what posting in ch needs.
func sendPermission(ch *Channel) int64 {
	if ch.IsThread() {
		return PermissionSendMessagesInThreads
	}
	return PermissionSendMessages
}

func (c *call) getMessages() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	chID := c.param("channel.id")
	ch, ok := s.channels[chID]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, 0); e != nil {
		return errorResult(e)
	}
	limit := 50
	if n, err := strconv.Atoi(c.query.Get("limit")); err == nil && n >= 1 && n <= 100 {
		limit = n
	}
	var list []*Message
	for _, m := range s.messages[chID] {
		if !m.Deleted && !m.Ephemeral {
			list = append(list, m)
		}
	}
	// Newest first, as Discord returns them.
	slices.SortFunc(list, func(a, b *Message) int { return compareIDs(b.ID, a.ID) })
	out := []any{}
	for _, m := range list {
		if before := c.query.Get("before"); before != "" && compareIDs(m.ID, before) >= 0 {
			continue
		}
		if after := c.query.Get("after"); after != "" && compareIDs(m.ID, after) <= 0 {
			continue
		}
		out = append(out, s.messageJSONLocked(m, false, true))
		if len(out) == limit {
			break
		}
	}
	return okJSON(out)
}

func (c *call) getMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, 0); e != nil {
		return errorResult(e)
	}
	m, ok := s.messages[c.param("channel.id")][c.param("message.id")]
	if !ok || m.Deleted || m.Ephemeral {
		return errorResult(errUnknownMessage)
	}
	return okJSON(s.messageJSONLocked(m, false, true))
}

// draft is a message payload decoded for storing.
type draft struct {
	fields map[string]json.RawMessage
}

func parseDraft(body []byte) draft {
	d := draft{fields: map[string]json.RawMessage{}}
	if len(body) > 0 {
		_ = json.Unmarshal(body, &d.fields)
	}
	return d
}

func (d draft) has(k string) bool { _, ok := d.fields[k]; return ok }

func (d draft) isNull(k string) bool {
	r, ok := d.fields[k]
	return !ok || string(r) == "null"
}

func (d draft) str(k string) string {
	var s string
	_ = json.Unmarshal(d.fields[k], &s)
	return s
}

func (d draft) int(k string) int {
	var n int
	_ = json.Unmarshal(d.fields[k], &n)
	return n
}

// list returns the raw array under k, nil when absent, null or empty.
func (d draft) list(k string) json.RawMessage {
	var l []json.RawMessage
	if json.Unmarshal(d.fields[k], &l) != nil || len(l) == 0 {
		return nil
	}
	return slices.Clone(d.fields[k])
}

type attachmentRef struct {
	ID          json.RawMessage `json:"id"`
	Filename    string          `json:"filename"`
	Description string          `json:"description"`
}

func (a attachmentRef) id() string {
	var s string
	if json.Unmarshal(a.ID, &s) == nil {
		return s
	}
	return strings.Trim(string(a.ID), `"`)
}

// storedFlags are the flags a message keeps; others in a payload are
// ignored or, like EPHEMERAL, turned into state.
const storedFlags = FlagSuppressEmbeds | FlagSuppressNotifications | FlagIsComponentsV2 | 1<<13

// attachFilesLocked turns uploaded files into attachments, taking filename
// and description from the payload's attachments entry with the same index
// when there is one.
func (s *Server) attachFilesLocked(m *Message, d draft, files []Attachment) {
	var refs []attachmentRef
	_ = json.Unmarshal(d.fields["attachments"], &refs)
	for _, f := range files {
		for _, r := range refs {
			if r.id() == f.ID {
				if r.Filename != "" {
					f.Filename = r.Filename
				}
				f.Description = r.Description
			}
		}
		f.ID = s.newIDLocked()
		f.URL, f.Expires = s.cdnURLLocked(m.ChannelID, f.ID, f.Filename, time.Time{})
		stored := f.clone()
		s.files[f.ID] = &stored
		m.Attachments = append(m.Attachments, f)
	}
}

// newMessageLocked builds a message from a validated payload.
func (s *Server) newMessageLocked(ch *Channel, author string, d draft, files []Attachment, route string) *Message {
	m := &Message{
		ID:        s.newIDLocked(),
		ChannelID: ch.ID,
		GuildID:   ch.GuildID,
		AuthorID:  author,
		Content:   d.str("content"),
		Embeds:    d.list("embeds"),
		// components may be an empty list; keep nil for none.
		Components: d.list("components"),
		Flags:      d.int("flags") & storedFlags,
		Timestamp:  s.now(),
	}
	m.Mentions, m.MentionRoles = parseMentions(m.Content)
	s.attachFilesLocked(m, d, files)
	m.History = []Revision{m.revision(route, m.Timestamp)}
	return m
}

func (m *Message) revision(route string, at time.Time) Revision {
	r := Revision{Route: route, Content: m.Content, Embeds: cloneRaw(m.Embeds), Components: cloneRaw(m.Components), Flags: m.Flags, At: at}
	for _, a := range m.Attachments {
		r.Attachments = append(r.Attachments, a.ID)
	}
	return r
}

// storeMessageLocked adds m to its channel and dispatches MESSAGE_CREATE
// (unless ephemeral).
func (s *Server) storeMessageLocked(m *Message) {
	if s.messages[m.ChannelID] == nil {
		s.messages[m.ChannelID] = map[string]*Message{}
	}
	if len(m.History) > 0 {
		m.History[0].At = m.Timestamp
	}
	s.messages[m.ChannelID][m.ID] = m
	if ch, ok := s.channels[m.ChannelID]; ok && ch.IsThread() && !m.Ephemeral {
		ch.MessageCount++
	}
	if !m.Ephemeral {
		s.dispatchMessageLocked("MESSAGE_CREATE", m)
	}
	s.notifyLocked()
}

// checkReference validates message_reference: the message replied to must
// exist unless fail_if_not_exists is false. It returns the ID to store.
func (s *Server) checkReferenceLocked(ch *Channel, d draft, prefix []any) (string, *Error) {
	if d.isNull("message_reference") {
		return "", nil
	}
	var ref struct {
		MessageID       string `json:"message_id"`
		ChannelID       string `json:"channel_id"`
		FailIfNotExists *bool  `json:"fail_if_not_exists"`
	}
	_ = json.Unmarshal(d.fields["message_reference"], &ref)
	if ref.MessageID == "" {
		return "", nil
	}
	chID := ch.ID
	if ref.ChannelID != "" {
		chID = ref.ChannelID
	}
	if m, ok := s.messages[chID][ref.MessageID]; ok && !m.Deleted && chID == ch.ID {
		return ref.MessageID, nil
	}
	if ref.FailIfNotExists != nil && !*ref.FailIfNotExists {
		return "", nil
	}
	v := newValidator(prefix)
	v.add([]any{"message_reference"}, "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
	return "", v.err()
}

func (c *call) createMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, sendPermission(ch)); e != nil {
		return errorResult(e)
	}
	if len(c.files) > 0 {
		if e := s.botMayLocked(ch, PermissionAttachFiles); e != nil {
			return errorResult(e)
		}
	}
	if ch.Type == ChannelTypeDM {
		if u, ok := s.users[ch.Recipient]; ok && u.Bot {
			return errorResult(errCannotSendToUser)
		}
	}
	if ch.IsThread() && (ch.Archived && ch.Locked) {
		return errorResult(apiErr(http.StatusBadRequest, 50083, "Thread is archived"))
	}
	if e := validateMessage(bodyOrEmpty(c.body), nil, len(c.files)); e != nil {
		return errorResult(e)
	}
	d := parseDraft(c.body)
	ref, e := s.checkReferenceLocked(ch, d, nil)
	if e != nil {
		return errorResult(e)
	}
	m := s.newMessageLocked(ch, s.cfg.botID, d, c.files, RouteCreateMessage)
	if ref != "" {
		m.ReferenceID, m.Type = ref, MessageTypeReply
	}
	s.storeMessageLocked(m)
	return okJSON(s.messageJSONLocked(m, false, true))
}

func bodyOrEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

func (c *call) editMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, 0); e != nil {
		return errorResult(e)
	}
	m, ok := s.messages[c.param("channel.id")][c.param("message.id")]
	if !ok || m.Deleted || m.Ephemeral {
		return errorResult(errUnknownMessage)
	}
	if m.AuthorID != s.cfg.botID || m.WebhookID != "" {
		return errorResult(errCannotEditOthers)
	}
	if e := s.editLocked(m, c.body, c.files, nil, RouteEditMessage); e != nil {
		return errorResult(e)
	}
	return okJSON(s.messageJSONLocked(m, false, true))
}

// editLocked applies an edit payload to m the way Discord does: fields
// present replace (null clears), absent ones stay; attachments, when
// given, list the existing attachments to keep and new files are added.
// The result is validated as a whole, dispatched as MESSAGE_UPDATE and
// recorded in the message's history.
func (s *Server) editLocked(m *Message, body []byte, files []Attachment, prefix []any, route string) *Error {
	d := parseDraft(body)
	v := newValidator(prefix)
	if d.has("flags") && !d.isNull("flags") && m.Flags&FlagIsComponentsV2 != 0 && d.int("flags")&FlagIsComponentsV2 == 0 {
		v.add([]any{"flags"}, "MESSAGE_CANNOT_REMOVE_COMPONENTS_V2_FLAG", "The IS_COMPONENTS_V2 flag cannot be removed from a message")
		return v.err()
	}
	next := *m
	if d.has("content") {
		next.Content = d.str("content")
	}
	if d.has("embeds") {
		next.Embeds = d.list("embeds")
	}
	if d.has("components") {
		next.Components = d.list("components")
	}
	if d.has("flags") && !d.isNull("flags") {
		next.Flags = d.int("flags")&storedFlags | m.Flags&^storedFlags
	}
	if d.has("attachments") {
		var refs []attachmentRef
		_ = json.Unmarshal(d.fields["attachments"], &refs)
		next.Attachments = nil
		for _, a := range m.Attachments {
			for _, r := range refs {
				if r.id() == a.ID {
					next.Attachments = append(next.Attachments, a)
				}
			}
		}
	} else {
		next.Attachments = slices.Clone(m.Attachments)
	}
	// Validate the message as it would be after the edit.
	merged := map[string]any{
		"content": next.Content, "embeds": rawOrEmpty(next.Embeds), "components": rawOrEmpty(next.Components), "flags": next.Flags,
	}
	var atts []any
	for _, a := range next.Attachments {
		atts = append(atts, map[string]any{"id": a.ID, "filename": a.Filename})
	}
	for _, f := range files {
		atts = append(atts, map[string]any{"id": f.ID})
	}
	merged["attachments"] = orEmpty(atts)
	raw, _ := json.Marshal(merged)
	if e := validateMessage(raw, prefix, 0); e != nil {
		return e
	}
	s.attachFilesLocked(&next, d, files)
	wasLoading := m.Flags&FlagLoading != 0
	*m = next
	m.Flags &^= FlagLoading
	m.Mentions, m.MentionRoles = parseMentions(m.Content)
	now := s.now()
	m.EditedAt = now
	if wasLoading {
		// Filling in a deferred response is not an edit to users.
		m.EditedAt = next.EditedAt
	}
	m.History = append(slices.Clone(m.History), m.revision(route, now))
	if !m.Ephemeral {
		s.dispatchMessageLocked("MESSAGE_UPDATE", m)
	}
	s.notifyLocked()
	return nil
}

func (c *call) deleteMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, 0); e != nil {
		return errorResult(e)
	}
	m, ok := s.messages[c.param("channel.id")][c.param("message.id")]
	if !ok || m.Deleted || m.Ephemeral {
		return errorResult(errUnknownMessage)
	}
	s.deleteLocked(m)
	return noContent()
}

func (s *Server) deleteLocked(m *Message) {
	m.Deleted = true
	if !m.Ephemeral {
		d := map[string]any{"id": m.ID, "channel_id": m.ChannelID}
		if m.GuildID != "" {
			d["guild_id"] = m.GuildID
		}
		s.dispatchLocked("MESSAGE_DELETE", m.GuildID, messageIntent(m.GuildID), func(*session) (any, bool) { return d, true })
	}
	s.notifyLocked()
}

func (c *call) triggerTyping() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, sendPermission(ch)); e != nil {
		return errorResult(e)
	}
	s.typing = append(s.typing, Typing{ChannelID: c.param("channel.id"), At: s.now()})
	s.notifyLocked()
	return noContent()
}

// --- reactions ---

func validEmoji(e string) bool {
	if name, id, ok := strings.Cut(e, ":"); ok {
		_, err := strconv.ParseUint(id, 10, 64)
		return name != "" && err == nil
	}
	for _, r := range e {
		if r > unicode.MaxASCII {
			return true
		}
	}
	return false
}

func (c *call) createReaction() result {
	return c.react(true)
}

func (c *call) deleteOwnReaction() result {
	return c.react(false)
}

func (c *call) react(add bool) result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if e := s.botMayLocked(ch, 0); e != nil {
		return errorResult(e)
	}
	m, ok := s.messages[c.param("channel.id")][c.param("message.id")]
	if !ok || m.Deleted || m.Ephemeral {
		return errorResult(errUnknownMessage)
	}
	emoji := c.param("emoji")
	if !validEmoji(emoji) {
		return errorResult(errUnknownEmoji)
	}
	if m.Reactions == nil {
		m.Reactions = map[string][]string{}
	}
	users := m.Reactions[emoji]
	has := slices.Contains(users, s.cfg.botID)
	switch {
	case add && !has:
		m.Reactions[emoji] = append(users, s.cfg.botID)
	case !add && has:
		m.Reactions[emoji] = slices.DeleteFunc(slices.Clone(users), func(u string) bool { return u == s.cfg.botID })
		if len(m.Reactions[emoji]) == 0 {
			delete(m.Reactions, emoji)
		}
	default:
		return noContent()
	}
	typ, intent := "MESSAGE_REACTION_ADD", int64(intentGuildMessageReactions)
	if !add {
		typ = "MESSAGE_REACTION_REMOVE"
	}
	if m.GuildID == "" {
		intent = intentDirectMessageReactions
	}
	d := map[string]any{"user_id": s.cfg.botID, "channel_id": m.ChannelID, "message_id": m.ID, "emoji": emojiJSON(emoji), "burst": false, "type": 0}
	if m.GuildID != "" {
		d["guild_id"] = m.GuildID
	}
	s.dispatchLocked(typ, m.GuildID, intent, func(*session) (any, bool) { return d, true })
	s.notifyLocked()
	return noContent()
}

// --- threads ---

var archiveDurations = []int{60, 1440, 4320, 10080}

func (s *Server) threadParams(d draft, v *validator) (string, int) {
	name := d.str("name")
	if d.isNull("name") || name == "" {
		v.add([]any{"name"}, "BASE_TYPE_REQUIRED", "This field is required")
	} else if chars(name) > 100 {
		v.add([]any{"name"}, "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
	}
	dur := 1440
	if !d.isNull("auto_archive_duration") {
		dur = d.int("auto_archive_duration")
		if !slices.Contains(archiveDurations, dur) {
			v.add([]any{"auto_archive_duration"}, "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
		}
	}
	return name, dur
}

func (c *call) startThreadFromMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if ch.Type == ChannelTypeDM {
		return errorResult(errDMChannel)
	}
	if ch.IsThread() {
		return errorResult(apiErr(http.StatusBadRequest, 50024, "Cannot execute action on this channel type"))
	}
	if e := s.botMayLocked(ch, PermissionCreatePublicThreads); e != nil {
		return errorResult(e)
	}
	v := newValidator(nil)
	name, dur := s.threadParams(parseDraft(c.body), v)
	if e := v.err(); e != nil {
		return errorResult(e)
	}
	m, ok := s.messages[ch.ID][c.param("message.id")]
	if !ok || m.Deleted || m.Ephemeral {
		return errorResult(errUnknownMessage)
	}
	if m.ThreadID != "" {
		return errorResult(errThreadExists)
	}
	typ := ChannelTypePublicThread
	if ch.Type == ChannelTypeAnnouncement {
		typ = 10
	}
	// A thread started from a message has the message's ID.
	th := Channel{ID: m.ID, Type: typ, GuildID: ch.GuildID, Name: name, ParentID: ch.ID, OwnerID: s.cfg.botID,
		AutoArchiveDuration: dur, StarterMessageID: m.ID}
	s.addChannelLocked(th)
	m.ThreadID = th.ID
	m.Flags |= FlagHasThread
	s.dispatchThreadCreateLocked(s.channels[th.ID])
	s.notifyLocked()
	return result{status: http.StatusCreated, body: s.threadJSONLocked(s.channels[th.ID])}
}

func (c *call) startThreadWithoutMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.param("channel.id")]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	if ch.Type == ChannelTypeDM {
		return errorResult(errDMChannel)
	}
	d := parseDraft(c.body)
	v := newValidator(nil)
	name, dur := s.threadParams(d, v)
	typ := d.int("type")
	switch {
	case d.isNull("type") && c.rec.APIVersion == "9":
		typ = ChannelTypePrivateThread // v9's default
	case d.isNull("type"):
		// In API v10 the type is required.
		v.add([]any{"type"}, "BASE_TYPE_REQUIRED", "This field is required")
	case typ != 10 && typ != ChannelTypePublicThread && typ != ChannelTypePrivateThread:
		v.add([]any{"type"}, "BASE_TYPE_CHOICES", "Value must be one of {10, 11, 12}.")
	}
	if e := v.err(); e != nil {
		return errorResult(e)
	}
	need := PermissionCreatePublicThreads
	if typ == ChannelTypePrivateThread {
		need = PermissionCreatePrivateThreads
	}
	if e := s.botMayLocked(ch, need); e != nil {
		return errorResult(e)
	}
	th := Channel{ID: s.newIDLocked(), Type: typ, GuildID: ch.GuildID, Name: name, ParentID: ch.ID, OwnerID: s.cfg.botID, AutoArchiveDuration: dur}
	s.addChannelLocked(th)
	s.dispatchThreadCreateLocked(s.channels[th.ID])
	s.notifyLocked()
	return result{status: http.StatusCreated, body: s.threadJSONLocked(s.channels[th.ID])}
}

// threadJSONLocked renders a thread the way thread creation answers it,
// with the creator's thread member.
func (s *Server) threadJSONLocked(th *Channel) map[string]any {
	j := s.channelJSONLocked(th)
	j["member"] = map[string]any{"id": th.ID, "user_id": s.cfg.botID, "join_timestamp": discordTime(th.CreatedAt), "flags": 0}
	return j
}

func (s *Server) dispatchThreadCreateLocked(th *Channel) {
	s.dispatchLocked("THREAD_CREATE", th.GuildID, intentGuilds, func(*session) (any, bool) {
		j := s.channelJSONLocked(th)
		if th.OwnerID == s.cfg.botID {
			j = s.threadJSONLocked(th)
		}
		j["newly_created"] = true
		return j, true
	})
}

// --- application commands ---

func (c *call) commandScope() (string, *Error) {
	s := c.s
	if c.param("application.id") != s.cfg.appID {
		return "", errMissingAccess
	}
	g := c.param("guild.id")
	if g != "" {
		if _, ok := s.guilds[g]; !ok {
			return "", errMissingAccess
		}
	}
	return g, nil
}

func (c *call) getCommands() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	scope, e := c.commandScope()
	if e != nil {
		return errorResult(e)
	}
	list := s.commands[scope]
	if list == nil {
		return okJSON([]any{})
	}
	return okJSON(list)
}

func (c *call) overwriteCommands() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	scope, e := c.commandScope()
	if e == nil {
		e = validateCommands(bodyOrEmptyList(c.body))
	}
	rec := CommandOverwrite{GuildID: c.param("guild.id"), Commands: cloneRaw(c.body), At: s.now(), Status: http.StatusOK}
	if e != nil {
		rec.Status = e.Status
		s.cmdLog = append(s.cmdLog, rec)
		s.notifyLocked()
		return errorResult(e)
	}
	var in []map[string]any
	_ = json.Unmarshal(c.body, &in)
	out := make([]map[string]any, 0, len(in))
	for _, cmd := range in {
		if cmd["type"] == nil {
			cmd["type"] = 1
		}
		key := fmt.Sprintf("%s/%v/%v", scope, cmd["type"], cmd["name"])
		id, ok := s.cmdIDs[key]
		if !ok {
			id = s.newIDLocked()
			s.cmdIDs[key] = id
		}
		cmd["id"] = id
		cmd["application_id"] = s.cfg.appID
		cmd["version"] = s.newIDLocked()
		if scope != "" {
			cmd["guild_id"] = scope
		}
		if cmd["default_member_permissions"] == nil {
			cmd["default_member_permissions"] = nil
		}
		if cmd["nsfw"] == nil {
			cmd["nsfw"] = false
		}
		out = append(out, cmd)
	}
	s.commands[scope] = out
	s.cmdLog = append(s.cmdLog, rec)
	s.notifyLocked()
	return okJSON(out)
}

func bodyOrEmptyList(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("[]")
	}
	return b
}

// Commands returns the application commands currently registered in scope
// ("" for global, else a guild ID), as the API lists them.
func (s *Server) Commands(guildID string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(s.commands[guildID])
	return b
}

// --- CDN ---

// Download is one request to the CDN for an attachment.
type Download struct {
	AttachmentID string
	Status       int  // 200, or 404 for an attachment gone, expired or unsigned
	Unsigned     bool // the URL's signature was missing or did not match
}

// Downloads returns the requests for attachments, in arrival order.
func (s *Server) Downloads() []Download {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.downloads)
}

// cdnAttachmentTTL is how long an attachment's signed URL works.
const cdnAttachmentTTL = 24 * time.Hour

// cdnURLLocked is the signed CDN URL of an attachment, expiring at
// expires (zero: cdnAttachmentTTL from now), and that expiry.
func (s *Server) cdnURLLocked(channelID, id, filename string, expires time.Time) (string, time.Time) {
	issued := s.now()
	if expires.IsZero() {
		expires = issued.Add(cdnAttachmentTTL)
	}
	path := "/attachments/" + channelID + "/" + id + "/" + url.PathEscape(filename)
	ex, is := strconv.FormatInt(expires.Unix(), 16), strconv.FormatInt(issued.Unix(), 16)
	return s.http.URL + path + "?ex=" + ex + "&is=" + is + "&hm=" + s.cdnSign(path, ex, is) + "&", expires
}

// cdnSign is the signature (hm) of an attachment's path, expiry and issue.
func (s *Server) cdnSign(path, ex, is string) string {
	mac := hmac.New(sha256.New, s.cdnKey)
	mac.Write([]byte(path + "?" + ex + "&" + is))
	return hex.EncodeToString(mac.Sum(nil))
}

// handleCDN serves attachment contents at the URLs attachments carry,
// signed and not expired; anything else is answered as Discord does.
func (s *Server) handleCDN(w http.ResponseWriter, r *http.Request) {
	gone := func() {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "This content is no longer available.")
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/attachments/"), "/")
	if len(parts) < 2 {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	ex, is, hm := q.Get("ex"), q.Get("is"), q.Get("hm")
	expires, err := strconv.ParseInt(ex, 16, 64)
	if err != nil || is == "" || !hmac.Equal([]byte(hm), []byte(s.cdnSign(r.URL.EscapedPath(), ex, is))) {
		s.mu.Lock()
		s.downloads = append(s.downloads, Download{AttachmentID: parts[1], Status: http.StatusNotFound, Unsigned: true})
		s.mu.Unlock()
		gone()
		return
	}
	s.mu.Lock()
	f, ok := s.files[parts[1]]
	var data []byte
	var ct string
	if ok {
		data, ct = slices.Clone(f.Data), f.ContentType
	}
	expired := !s.now().Before(time.Unix(expires, 0))
	status := http.StatusOK
	if expired || !ok {
		status = http.StatusNotFound
	}
	s.downloads = append(s.downloads, Download{AttachmentID: parts[1], Status: status})
	s.mu.Unlock()
	if expired {
		gone()
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}
