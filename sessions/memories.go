package sessions

// Explicit memories: what a person asked the assistant to remember about
// them (the remember tool, tools/memory.go). They are offered to the model
// in turns that answer that person, in any of their conversations; in a
// shared conversation only in their own turns, marked as theirs. /memory
// lists a person's memories to them alone, with where and when they said
// them; /forget <id> deletes one for good.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// maxOffered is how many of a person's memories a request carries, the
// newest first.
const maxOffered = 50

// memoriesNote is what the system prompt says of the memories of who,
// "" when they have none (or the turn answers no one: a resumed turn
// stored before turns knew their author).
func (s *session) memoriesNote(ctx context.Context, who switchboard.Author) string {
	if who.ID == "" {
		return ""
	}
	mems, err := s.m.cfg.Store.Memories(ctx, who.Key(), maxOffered)
	if err != nil {
		s.log.Warn("memories not read: the turn goes on without them", "err", err)
		return ""
	}
	if len(mems) == 0 {
		return ""
	}
	var b strings.Builder
	name := who.DisplayName()
	if s.memberCount() > 1 {
		fmt.Fprintf(&b, "\n\nWhat %s asked you to remember about them. It is private to %s: use it to answer them, and never repeat it to anyone else in this conversation:\n", name, name)
	} else {
		fmt.Fprintf(&b, "\n\nWhat %s asked you to remember about them:\n", name)
	}
	for _, m := range mems {
		fmt.Fprintf(&b, "- %s (%s)\n", m.Text, m.CreatedAt.Format("2006-01-02"))
	}
	return b.String()
}

// turnNotes are the memories of the person the turn answers and what
// memory.recall found for their message, read from the store once a turn
// rather than for each of its model calls.
func (s *session) turnNotes(ctx context.Context, t *turn) string {
	if !t.noted {
		t.notes, t.noted = s.memoriesNote(ctx, t.Author)+s.recallNote(ctx, t), true
	}
	return t.notes
}

// maxRecalled is how many matches memory.recall adds to a turn.
const maxRecalled = 3

// recallNote is, for a guide with memory.recall, the best matches for the
// turn's message from the conversations of the person it answers, marked
// as recalled, with their dates. A match the model is given anyway (in
// this conversation's window) is left out.
func (s *session) recallNote(ctx context.Context, t *turn) string {
	if !s.guide.Memory.Recall || t.Author.ID == "" {
		return ""
	}
	query := ""
	for i := len(s.window) - 1; i >= 0; i-- {
		if s.window[i].Role == switchboard.RoleUser {
			query = s.window[i].Content
			break
		}
	}
	if len(query) > 2000 {
		query = query[:2000] // the words that matter come first; the rest only costs
	}
	found, err := s.m.cfg.Store.Search(ctx, t.Author.Key(), query, maxRecalled+len(s.window))
	if err != nil {
		s.log.Warn("recall failed: the turn goes on without it", "err", err)
		return ""
	}
	inWindow := map[string]bool{}
	for _, m := range s.window {
		inWindow[m.Content] = true
	}
	var keep []switchboard.Found
	for _, f := range found {
		if f.SessionID == s.id && inWindow[f.Message.Content] {
			continue
		}
		if keep = append(keep, f); len(keep) == maxRecalled {
			break
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return "\n\nRecalled from earlier conversations of " + t.Author.DisplayName() +
		" (they may not be relevant; the dates tell how old they are):\n" + tools.FormatFound(keep)
}

// listMemories answers /memory: the asker's memories, to them alone.
func (s *session) listMemories(ctx context.Context, by switchboard.Author) {
	mems, err := s.m.cfg.Store.Memories(ctx, by.Key(), switchboard.MaxMemories)
	if err != nil {
		s.log.Error("memories not read", "err", err)
		s.tell(by, switchboard.ErrCodeInternal, "Your memories could not be read just now; try again.")
		return
	}
	if len(mems) == 0 {
		s.tell(by, NoticeInfo, "I keep no memories about you. Ask me to remember something (\"remember that I prefer metric units\").")
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "What I remember about you (%d):\n", len(mems))
	for _, m := range mems {
		fmt.Fprintf(&b, "- %s: %s (said %s in %s)\n", m.ID, m.Text, m.CreatedAt.Format("2006-01-02 15:04 UTC"), switchboard.ChannelName(m.Channel))
	}
	b.WriteString("/forget <id> deletes one for good.")
	s.tell(by, NoticeInfo, b.String())
}

// forgetMemory answers /forget <id>: one of the asker's memories goes for
// good; someone else's id is not known to them.
func (s *session) forgetMemory(ctx context.Context, by switchboard.Author, args string) {
	id := strings.TrimSpace(args)
	if id == "" || strings.ContainsAny(id, " \t") {
		s.tell(by, switchboard.ErrCodeBadInput, "Usage: /forget <id>, with an id that /memory lists.")
		return
	}
	err := s.m.cfg.Store.ForgetMemory(ctx, by.Key(), id)
	switch {
	case err == nil:
		s.tell(by, NoticeInfo, "Forgotten for good: "+quoteID(id)+".")
	case errors.Is(err, switchboard.ErrNotFound):
		s.tell(by, switchboard.ErrCodeNotFound, "You have no memory "+quoteID(id)+"; /memory lists yours.")
	default:
		s.log.Error("memory not deleted", "err", err)
		s.tell(by, switchboard.ErrCodeInternal, "That memory could not be deleted just now; try again.")
	}
}
