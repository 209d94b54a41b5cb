package discordtest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"
)

// discordTime renders a time the way Discord's API does:
// "2024-05-01T12:00:00.123000+00:00".
func discordTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000") + "+00:00"
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) userJSONLocked(id string) map[string]any {
	u, ok := s.users[id]
	if !ok {
		u = &User{ID: id, Username: "user" + id}
	}
	out := map[string]any{
		"id":                     u.ID,
		"username":               u.Username,
		"global_name":            nullable(u.GlobalName),
		"discriminator":          "0",
		"avatar":                 nil,
		"public_flags":           0,
		"flags":                  0,
		"banner":                 nil,
		"accent_color":           nil,
		"avatar_decoration_data": nil,
	}
	if u.Bot {
		out["bot"] = true
	}
	return out
}

// memberJSONLocked renders a guild member; withUser adds the user object
// (left out where Discord sends a partial member, as in MESSAGE_CREATE).
func (s *Server) memberJSONLocked(m *Member, withUser bool) map[string]any {
	roles := m.Roles
	if roles == nil {
		roles = []string{}
	}
	g := s.guilds[m.GuildID]
	joined := time.Unix(1700000000, 0)
	if g != nil {
		joined = SnowflakeTime(g.ID)
	}
	out := map[string]any{
		"nick":                         nullable(m.Nick),
		"roles":                        slices.Clone(roles),
		"joined_at":                    discordTime(joined),
		"premium_since":                nil,
		"deaf":                         false,
		"mute":                         false,
		"flags":                        0,
		"pending":                      false,
		"avatar":                       nil,
		"banner":                       nil,
		"communication_disabled_until": nil,
	}
	if withUser {
		out["user"] = s.userJSONLocked(m.UserID)
	}
	return out
}

func (s *Server) channelJSONLocked(c *Channel) map[string]any {
	out := map[string]any{
		"id":    c.ID,
		"type":  c.Type,
		"flags": 0,
	}
	if last := s.lastMessageIDLocked(c.ID); last != "" {
		out["last_message_id"] = last
	} else {
		out["last_message_id"] = nil
	}
	switch {
	case c.Type == ChannelTypeDM:
		out["recipients"] = []any{s.userJSONLocked(c.Recipient)}
	case c.IsThread():
		out["guild_id"] = c.GuildID
		out["parent_id"] = c.ParentID
		out["owner_id"] = c.OwnerID
		out["name"] = c.Name
		out["rate_limit_per_user"] = 0
		out["message_count"] = c.MessageCount
		out["total_message_sent"] = c.MessageCount
		out["member_count"] = 1
		out["thread_metadata"] = map[string]any{
			"archived":              c.Archived,
			"auto_archive_duration": c.AutoArchiveDuration,
			"archive_timestamp":     discordTime(c.CreatedAt),
			"locked":                c.Locked,
			"create_timestamp":      discordTime(c.CreatedAt),
		}
	default:
		out["guild_id"] = c.GuildID
		out["name"] = c.Name
		out["position"] = 0
		out["permission_overwrites"] = []any{}
		out["parent_id"] = nullable(c.ParentID)
		out["topic"] = nil
		out["nsfw"] = false
		out["rate_limit_per_user"] = 0
	}
	return out
}

func (s *Server) lastMessageIDLocked(channelID string) string {
	last := ""
	for id, m := range s.messages[channelID] {
		if !m.Deleted && !m.Ephemeral && compareIDs(id, last) > 0 {
			last = id
		}
	}
	return last
}

func (s *Server) roleJSON(guildID string) map[string]any {
	return map[string]any{
		"id": guildID, "name": "@everyone", "color": 0, "hoist": false, "icon": nil, "unicode_emoji": nil,
		"position": 0, "permissions": "2248473465835073", "managed": false, "mentionable": false, "flags": 0,
	}
}

func (s *Server) guildJSONLocked(g *Guild) map[string]any {
	return map[string]any{
		"id":                            g.ID,
		"name":                          g.Name,
		"icon":                          nil,
		"splash":                        nil,
		"owner_id":                      g.OwnerID,
		"afk_channel_id":                nil,
		"afk_timeout":                   300,
		"verification_level":            0,
		"default_message_notifications": 0,
		"explicit_content_filter":       0,
		"roles":                         []any{s.roleJSON(g.ID)},
		"emojis":                        []any{},
		"stickers":                      []any{},
		"features":                      []any{},
		"mfa_level":                     0,
		"system_channel_id":             nil,
		"premium_tier":                  0,
		"preferred_locale":              "en-US",
		"nsfw_level":                    0,
	}
}

// guildCreateJSONLocked renders the GUILD_CREATE dispatch that follows
// READY: the guild with its channels, active threads and the bot's member.
func (s *Server) guildCreateJSONLocked(g *Guild) map[string]any {
	out := s.guildJSONLocked(g)
	var channels, threads []any
	ids := make([]string, 0, len(s.channels))
	for id := range s.channels {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareIDs)
	for _, id := range ids {
		c := s.channels[id]
		if c.GuildID != g.ID {
			continue
		}
		j := s.channelJSONLocked(c)
		delete(j, "guild_id") // GUILD_CREATE channels omit guild_id
		if c.IsThread() {
			if !c.Archived {
				threads = append(threads, j)
			}
		} else {
			channels = append(channels, j)
		}
	}
	var members []any
	if m, ok := s.members[g.ID][s.cfg.botID]; ok {
		members = append(members, s.memberJSONLocked(m, true))
	}
	out["channels"] = orEmpty(channels)
	out["threads"] = orEmpty(threads)
	out["members"] = orEmpty(members)
	out["member_count"] = len(s.members[g.ID])
	out["joined_at"] = discordTime(SnowflakeTime(g.ID))
	out["large"] = false
	out["unavailable"] = false
	out["voice_states"] = []any{}
	out["presences"] = []any{}
	out["stage_instances"] = []any{}
	out["guild_scheduled_events"] = []any{}
	return out
}

func orEmpty(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func (s *Server) attachmentJSON(a Attachment) map[string]any {
	out := map[string]any{
		"id":           a.ID,
		"filename":     a.Filename,
		"size":         a.Size,
		"url":          a.URL,
		"proxy_url":    a.URL,
		"content_type": a.ContentType,
	}
	if a.Description != "" {
		out["description"] = a.Description
	}
	return out
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return json.RawMessage("[]")
	}
	return r
}

// messageJSONLocked renders a message object. gateway adds what dispatches
// carry (guild_id and the author's partial member); visible false blanks
// the fields the MESSAGE_CONTENT intent guards.
func (s *Server) messageJSONLocked(m *Message, gateway, visible bool) map[string]any {
	mentions := []any{}
	for _, id := range m.Mentions {
		u := s.userJSONLocked(id)
		if gateway && m.GuildID != "" {
			if mem, ok := s.members[m.GuildID][id]; ok {
				u["member"] = s.memberJSONLocked(mem, false)
			}
		}
		mentions = append(mentions, u)
	}
	atts := []any{}
	for _, a := range m.Attachments {
		atts = append(atts, s.attachmentJSON(a))
	}
	var edited any
	if !m.EditedAt.IsZero() {
		edited = discordTime(m.EditedAt)
	}
	roles := m.MentionRoles
	if roles == nil {
		roles = []string{}
	}
	out := map[string]any{
		"id":               m.ID,
		"channel_id":       m.ChannelID,
		"type":             m.Type,
		"author":           s.userJSONLocked(m.AuthorID),
		"content":          m.Content,
		"timestamp":        discordTime(m.Timestamp),
		"edited_timestamp": edited,
		"tts":              false,
		"mention_everyone": mentionsEveryone(m.Content),
		"mentions":         mentions,
		"mention_roles":    slices.Clone(roles),
		"attachments":      atts,
		"embeds":           rawOrEmpty(m.Embeds),
		"components":       rawOrEmpty(m.Components),
		"pinned":           false,
		"flags":            m.Flags,
	}
	if !visible {
		out["content"] = ""
		out["embeds"] = []any{}
		out["attachments"] = []any{}
		out["components"] = []any{}
	}
	if len(m.Reactions) > 0 {
		var rs []any
		keys := make([]string, 0, len(m.Reactions))
		for k := range m.Reactions {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			users := m.Reactions[k]
			rs = append(rs, map[string]any{"count": len(users), "me": slices.Contains(users, s.cfg.botID), "emoji": emojiJSON(k)})
		}
		out["reactions"] = rs
	}
	if m.ReferenceID != "" {
		ref := map[string]any{"type": 0, "message_id": m.ReferenceID, "channel_id": m.ChannelID}
		if m.GuildID != "" {
			ref["guild_id"] = m.GuildID
		}
		out["message_reference"] = ref
		if r, ok := s.messages[m.ChannelID][m.ReferenceID]; ok && !r.Deleted {
			out["referenced_message"] = s.messageJSONLocked(r, false, visible)
		} else {
			out["referenced_message"] = nil
		}
	}
	if m.ThreadID != "" {
		if th, ok := s.channels[m.ThreadID]; ok {
			out["thread"] = s.channelJSONLocked(th)
		}
	}
	if m.WebhookID != "" {
		out["webhook_id"] = m.WebhookID
		out["application_id"] = s.cfg.appID
	}
	if st, ok := s.interactions[m.InteractionID]; ok && m.InteractionID != "" {
		meta := map[string]any{
			"id":                             st.in.ID,
			"type":                           st.in.Type,
			"user":                           s.userJSONLocked(st.in.UserID),
			"authorizing_integration_owners": authorizingOwners(st.in.GuildID),
		}
		if st.in.Type == InteractionTypeMessageComponent && st.in.MessageID != "" {
			meta["interacted_message_id"] = st.in.MessageID
		}
		out["interaction_metadata"] = meta
	}
	if gateway && m.GuildID != "" {
		out["guild_id"] = m.GuildID
		if mem, ok := s.members[m.GuildID][m.AuthorID]; ok && m.WebhookID == "" {
			out["member"] = s.memberJSONLocked(mem, false)
		}
	}
	return out
}

func authorizingOwners(guildID string) map[string]any {
	if guildID == "" {
		return map[string]any{"0": "0"}
	}
	return map[string]any{"0": guildID}
}

func emojiJSON(e string) map[string]any {
	if name, id, ok := strings.Cut(e, ":"); ok {
		return map[string]any{"id": id, "name": name}
	}
	return map[string]any{"id": nil, "name": e}
}

var (
	userMention = regexp.MustCompile(`<@!?(\d+)>`)
	roleMention = regexp.MustCompile(`<@&(\d+)>`)
)

func mentionsEveryone(content string) bool {
	return strings.Contains(content, "@everyone") || strings.Contains(content, "@here")
}

// parseMentions returns the user and role IDs mentioned in content,
// without duplicates, in order of appearance.
func parseMentions(content string) (users, roles []string) {
	for _, m := range userMention.FindAllStringSubmatch(content, -1) {
		if !slices.Contains(users, m[1]) {
			users = append(users, m[1])
		}
	}
	for _, m := range roleMention.FindAllStringSubmatch(content, -1) {
		if !slices.Contains(roles, m[1]) {
			roles = append(roles, m[1])
		}
	}
	return users, roles
}
