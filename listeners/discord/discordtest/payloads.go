package discordtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// UserMessage is a message a person posts in Discord.
type UserMessage struct {
	ChannelID string // default DefaultChannelID
	AuthorID  string // required; the user is created if unknown
	Content   string
	// MentionBot puts the bot's mention, <@id>, in front of Content (unless
	// it is already in it), the usual way to address a bot in a guild.
	MentionBot bool
	// ReplyTo is the ID of a message in the same channel this one replies
	// to (message type 19 with a message_reference).
	ReplyTo string
	// Attachments: Filename, ContentType and Data (and Expires, to post
	// one whose link has expired); IDs and signed URLs are assigned.
	Attachments []Attachment
	Embeds      json.RawMessage
}

// PostUserMessage stores a person's message (in a guild channel, a thread
// or a DM) and dispatches MESSAGE_CREATE for it: with guild_id and the
// author's member in guilds, without them in DMs, and with content
// blanked for sessions lacking the MESSAGE_CONTENT intent unless the bot
// is mentioned or it is a DM. An unknown ChannelID becomes a text channel
// of the default guild. The author becomes a member of a guild it posts
// in. It returns the stored message.
func (s *Server) PostUserMessage(um UserMessage) (Message, error) {
	if um.AuthorID == "" {
		return Message{}, fmt.Errorf("discordtest: user message without an author")
	}
	if um.ChannelID == "" {
		um.ChannelID = DefaultChannelID
	}
	if um.MentionBot && !strings.Contains(um.Content, s.Mention()) && !strings.Contains(um.Content, "<@!"+s.cfg.botID+">") {
		um.Content = strings.TrimSpace(s.Mention() + " " + um.Content)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[um.ChannelID]
	if !ok {
		if _, ok := s.guilds[DefaultGuildID]; !ok {
			return Message{}, fmt.Errorf("discordtest: unknown channel %s", um.ChannelID)
		}
		s.addChannelLocked(Channel{ID: um.ChannelID, Type: ChannelTypeGuildText, GuildID: DefaultGuildID, Name: "channel-" + um.ChannelID})
		ch = s.channels[um.ChannelID]
	}
	s.ensureUserLocked(um.AuthorID)
	if ch.GuildID != "" {
		if _, ok := s.members[ch.GuildID][um.AuthorID]; !ok {
			s.addMemberLocked(Member{GuildID: ch.GuildID, UserID: um.AuthorID})
		}
	}
	m := &Message{
		ID:        s.newIDLocked(),
		ChannelID: ch.ID,
		GuildID:   ch.GuildID,
		AuthorID:  um.AuthorID,
		Content:   um.Content,
		Embeds:    cloneRaw(um.Embeds),
		Timestamp: s.now(),
	}
	if um.ReplyTo != "" {
		if _, ok := s.messages[ch.ID][um.ReplyTo]; !ok {
			return Message{}, fmt.Errorf("discordtest: reply to unknown message %s", um.ReplyTo)
		}
		m.ReferenceID, m.Type = um.ReplyTo, MessageTypeReply
	}
	m.Mentions, m.MentionRoles = parseMentions(m.Content)
	for _, a := range um.Attachments {
		if a.ContentType == "" {
			a.ContentType = "application/octet-stream"
		}
		a.ID = s.newIDLocked()
		a.Size = len(a.Data)
		a.URL, a.Expires = s.cdnURLLocked(ch.ID, a.ID, a.Filename, a.Expires)
		stored := a.clone()
		s.files[a.ID] = &stored
		m.Attachments = append(m.Attachments, a.clone())
	}
	m.History = []Revision{m.revision("user", m.Timestamp)}
	s.storeMessageLocked(m)
	return m.clone(), nil
}

// EditUserMessage changes the content of a person's message and dispatches
// MESSAGE_UPDATE, as when someone edits what they wrote.
func (s *Server) EditUserMessage(channelID, messageID, content string) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channelID][messageID]
	if !ok || m.Deleted {
		return Message{}, fmt.Errorf("discordtest: unknown message %s in %s", messageID, channelID)
	}
	m.Content = content
	m.Mentions, m.MentionRoles = parseMentions(content)
	m.EditedAt = s.now()
	m.History = append(slices.Clone(m.History), m.revision("user", m.EditedAt))
	s.dispatchMessageLocked("MESSAGE_UPDATE", m)
	s.notifyLocked()
	return m.clone(), nil
}

// DeleteUserMessage deletes a message and dispatches MESSAGE_DELETE.
func (s *Server) DeleteUserMessage(channelID, messageID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channelID][messageID]
	if !ok || m.Deleted {
		return fmt.Errorf("discordtest: unknown message %s in %s", messageID, channelID)
	}
	s.deleteLocked(m)
	return nil
}

// Redispatch sends MESSAGE_CREATE for a stored message again, with a new
// sequence number, the way a client sees an event twice (say, once live
// and once more in a RESUME replay after it lost track of its sequence
// number), so a test can check the listener handles it only once. It
// fails when no session got it.
func (s *Server) Redispatch(channelID, messageID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channelID][messageID]
	if !ok {
		return fmt.Errorf("discordtest: unknown message %s in %s", messageID, channelID)
	}
	if len(s.dispatchMessageLocked("MESSAGE_CREATE", m)) == 0 {
		return ErrNoSession
	}
	return nil
}

// StartUserThread has a person start a public thread from a message (or,
// with messageID "", without one), dispatching THREAD_CREATE. It returns
// the thread.
func (s *Server) StartUserThread(channelID, messageID, userID, name string) (Channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[channelID]
	if !ok || ch.GuildID == "" || ch.IsThread() {
		return Channel{}, fmt.Errorf("discordtest: cannot start a thread in %s", channelID)
	}
	s.ensureUserLocked(userID)
	th := Channel{Type: ChannelTypePublicThread, GuildID: ch.GuildID, Name: name, ParentID: ch.ID, OwnerID: userID, AutoArchiveDuration: 1440}
	if messageID != "" {
		m, ok := s.messages[channelID][messageID]
		if !ok || m.ThreadID != "" {
			return Channel{}, fmt.Errorf("discordtest: cannot start a thread from %s", messageID)
		}
		th.ID, th.StarterMessageID = m.ID, m.ID
		m.ThreadID = m.ID
		m.Flags |= FlagHasThread
	} else {
		th.ID = s.newIDLocked()
	}
	s.addChannelLocked(th)
	s.dispatchThreadCreateLocked(s.channels[th.ID])
	s.notifyLocked()
	return *s.channels[th.ID], nil
}
