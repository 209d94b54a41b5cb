package sessions

// The people of a shared session: who they are (/who), what they may do
// (/role), leaving (/leave), and the record of approvals (/approvals).
// Presence comes from attachments: a member with a place open on the
// session now (a browser tab, the terminal) is here; the others show when
// they last wrote or left. Last seen is kept in memory and stored when the
// session unloads: it is a courtesy, not part of the conversation, and not
// worth a write per message.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
)

// sawLocked notes that a person was active now.
func (s *session) sawLocked(key string) {
	now := s.m.cfg.Now().UTC()
	s.seen[key] = now
	s.unsaved[key] = now
}

// saveSeen stores last-seen times, best effort.
func (s *session) saveSeen(seen map[string]time.Time) {
	if len(seen) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.m.cfg.Store.SeenMembers(ctx, s.id, seen); err != nil {
		s.log.Warn("last seen of members not stored", "err", err)
	}
}

// membersLocked lists the session's people: by role, owner first, then
// by name.
func (s *session) membersLocked() []switchboard.MemberData {
	here := map[string]bool{}
	for sub := range s.listeners {
		if sub.follow == "" && sub.author != "" {
			here[sub.author] = true
		}
	}
	out := make([]switchboard.MemberData, 0, len(s.roles))
	for key, role := range s.roles {
		ch, id, _ := strings.Cut(key, ":")
		d := switchboard.MemberData{ID: id, Name: cmp.Or(s.names[key], id), Channel: ch, Role: string(role), Here: here[key]}
		if t, ok := s.seen[key]; ok {
			d.LastSeen = &t
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b switchboard.MemberData) int {
		if r := rank(collaboration.Role(b.Role)) - rank(collaboration.Role(a.Role)); r != 0 {
			return r
		}
		return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	return out
}

// membersChangedLocked tells the attached people who is in the session
// now: an EventMembers, like a notice without seq. A session of one
// person has nobody to tell, so nothing is sent there.
func (s *session) membersChangedLocked() { s.membersChangedExceptLocked(nil) }

// membersChangedExceptLocked is membersChangedLocked for all but one
// listener: one that is told the list in its ReadyData.
func (s *session) membersChangedExceptLocked(except *Subscription) {
	if len(s.roles) < 2 {
		return
	}
	s.sendMembersLocked(except)
}

// sendMembersLocked sends the roster to every listener but except.
func (s *session) sendMembersLocked(except *Subscription) {
	raw, _ := json.Marshal(switchboard.MembersData{Members: s.membersLocked()})
	ev := switchboard.Event{
		Time: s.m.cfg.Now().UTC().Truncate(time.Millisecond), Session: s.id,
		Agent: s.shownGuide.Name, Type: switchboard.EventMembers, Data: raw,
	}
	for sub := range s.listeners {
		if sub.follow != "" || sub == except {
			continue // a channel's renderer has no roster to show
		}
		select {
		case sub.notices <- &ev:
			sub.wakeLocked()
		default: // far behind: the next change brings the whole list again
		}
	}
}

// readyMembers is ReadyData.Members: the roster of a shared session.
func (s *session) readyMembers() []switchboard.MemberData {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.roles) < 2 {
		return nil
	}
	return s.membersLocked()
}

// who answers /who to the one who asked.
func (s *session) who(by switchboard.Author) {
	s.mu.Lock()
	ms := s.membersLocked()
	s.mu.Unlock()
	now := s.m.cfg.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s in this conversation:", len(ms), plural(len(ms), "person", "people"))
	for _, m := range ms {
		where := "here now"
		switch {
		case m.Here:
		case m.LastSeen != nil:
			where = "last seen " + ago(now.Sub(*m.LastSeen)) + " ago"
		default:
			where = "not seen yet"
		}
		fmt.Fprintf(&b, "\n  %s · %s · %s · %s", m.Name, switchboard.ChannelName(m.Channel), m.Role, where)
	}
	b.WriteString("\nThe owner changes roles with /role <name> <viewer|member|approver>.")
	s.tell(by, NoticeInfo, b.String())
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ago is a duration as people say it: "3m", "2h", "4d".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "moments"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// setRole answers "/role <person> <role>": the owner changes what someone
// may do. The person is named as /who shows them, or by their id.
func (s *session) setRole(ctx context.Context, by switchboard.Author, args string) {
	const usage = "Usage: /role <name> <viewer|member|approver>; /who shows the names."
	if s.role(by) != collaboration.Owner {
		s.tell(by, switchboard.ErrCodeForbidden, "Only the session's owner may change roles.")
		return
	}
	f := strings.Fields(args)
	if len(f) < 2 {
		s.tell(by, switchboard.ErrCodeBadInput, usage)
		return
	}
	role := collaboration.Role(strings.ToLower(f[len(f)-1]))
	if role != collaboration.Viewer && role != collaboration.Member && role != collaboration.Approver {
		s.tell(by, switchboard.ErrCodeBadInput, fmt.Sprintf("%s is not a role one can be given. %s", quoteID(string(role)), usage))
		return
	}
	key, name, err := s.findMember(strings.Join(f[:len(f)-1], " "))
	if err != nil {
		s.tell(by, switchboard.ErrCodeNotFound, err.Error())
		return
	}
	s.mu.Lock()
	target := s.roles[key]
	s.mu.Unlock()
	if target == collaboration.Owner {
		s.tell(by, switchboard.ErrCodeBadInput, "The owner's role cannot be changed.")
		return
	}
	// Pinned: a configured approver list, a token's role or an invite
	// code no longer changes it; only the owner's next /role does.
	if err := s.m.cfg.Store.SetMember(ctx, s.id, switchboard.Member{Key: key, Name: name, Role: string(role), Pinned: true}); err != nil {
		s.log.Error("role not stored", "member", key, "err", err)
		s.tell(by, switchboard.ErrCodeInternal, "The role could not be changed; try again.")
		return
	}
	s.mu.Lock()
	s.roles[key] = role
	s.pinned[key] = true
	s.membersChangedLocked()
	s.mu.Unlock()
	s.systemMessage(ctx, fmt.Sprintf("%s made %s %s.", by.DisplayName(), name, article(role)))
}

func article(r collaboration.Role) string {
	if r == collaboration.Approver {
		return "an approver"
	}
	return "a " + string(r)
}

// findMember finds a member by name (case-insensitive, as /who shows it),
// by id, or by "channel:id".
func (s *session) findMember(who string) (key, name string, err error) {
	who = strings.TrimPrefix(strings.TrimSpace(who), "@")
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []string
	for k := range s.roles {
		_, id, _ := strings.Cut(k, ":")
		if k == who || id == who || strings.EqualFold(s.names[k], who) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return "", "", fmt.Errorf("nobody called %s is in this conversation; /who lists the people", quoteID(who))
	case 1:
		return found[0], cmp.Or(s.names[found[0]], who), nil
	}
	slices.Sort(found)
	return "", "", fmt.Errorf("%d people are called %s here: name one by channel and id (%s)", len(found), quoteID(who), strings.Join(found, ", "))
}

// leave answers /leave: a place bound to the session (a Slack or Discord
// thread, the terminal after /join) stops showing it; in a place that is
// no binding (a browser tab) the person leaves the session. Its owner
// cannot leave it: there would be nobody to run it. It reports whether a
// place was unbound.
func (s *session) leave(ctx context.Context, in switchboard.Input) bool {
	if ch, addr, ok := strings.Cut(in.Place, ":"); ok {
		if b, err := s.m.cfg.Store.Binding(ctx, ch, addr); err == nil && b.SessionID == s.id {
			if err := s.m.Unbind(ctx, ch, addr); err != nil {
				s.tell(in.Author, switchboard.ErrCodeInternal, "This place could not leave the conversation; try again.")
				return false
			}
			s.systemMessage(ctx, fmt.Sprintf("%s took this conversation out of a %s place; it goes on everywhere else.", in.Author.DisplayName(), switchboard.ChannelName(ch)))
			return true
		}
	}
	if s.role(in.Author) == collaboration.Owner {
		s.tell(in.Author, switchboard.ErrCodeBadInput, "You own this conversation, so you cannot leave it; /unshare withdraws its invite codes.")
		return false
	}
	if err := s.m.cfg.Store.RemoveMember(ctx, s.id, in.Author.Key()); err != nil {
		s.tell(in.Author, switchboard.ErrCodeInternal, "You could not leave the conversation; try again.")
		return false
	}
	s.mu.Lock()
	delete(s.roles, in.Author.Key())
	delete(s.pinned, in.Author.Key())
	s.sendMembersLocked(nil) // also to one left alone: the others are gone
	s.mu.Unlock()
	s.systemMessage(ctx, fmt.Sprintf("%s left the conversation.", in.Author.DisplayName()))
	return false
}

// approvals answers /approvals to the one who asked: the last decisions,
// who made them, from where and when.
func (s *session) approvals(ctx context.Context, by switchboard.Author) {
	ds, err := s.m.cfg.Store.Decisions(ctx, s.id, 20)
	if err != nil {
		s.tell(by, switchboard.ErrCodeInternal, "The approvals could not be read; try again.")
		return
	}
	if len(ds) == 0 {
		s.tell(by, NoticeInfo, "No tool call has been approved or denied in this conversation.")
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The last %d %s:", len(ds), plural(len(ds), "decision", "decisions"))
	for _, d := range ds {
		verdict := "denied"
		if d.Resolved.Approved {
			verdict = "approved"
		}
		tool := cmp.Or(d.Request.ToolName, "a tool")
		who := "by " + d.Resolved.By
		switch d.Resolved.Why() { // never by By: a person may be called "Expired"
		case switchboard.ReasonExpired:
			who = "(nobody answered in time)"
		case switchboard.ReasonCancelled:
			who = "(the turn was stopped)"
			if d.Resolved.Reason != "" && d.Resolved.By != "" { // By is who stopped it
				who = "(the turn was stopped by " + d.Resolved.By + ")"
			}
		}
		if d.Resolved.Channel != "" {
			who += " · " + switchboard.ChannelName(d.Resolved.Channel)
		}
		always := ""
		if d.Resolved.Scope == switchboard.ScopeSession {
			always = " for the rest of the session"
		}
		fmt.Fprintf(&b, "\n  %s UTC  %s %s%s %s", d.Time.UTC().Format("2006-01-02 15:04"), tool, verdict, always, who)
	}
	s.tell(by, NoticeInfo, b.String())
}

// SessionsOf lists the sessions author is a member of, the most recently
// active first, at most limit: the conversations a person may go back
// to (a stateless request's session is none of them).
func (m *Manager) SessionsOf(ctx context.Context, author switchboard.Author, limit int) ([]switchboard.MemberSession, error) {
	list, err := m.cfg.Store.SessionsOf(ctx, author.Key(), limit)
	if err != nil {
		return nil, fmt.Errorf("sessions: sessions of %s: %w", author.Key(), err)
	}
	return list, nil
}
