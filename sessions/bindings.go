package sessions

// Bindings: a place in a channel (a Slack thread or DM, a Discord thread)
// shows one session, and a session may be shown in many places. The
// channel's listener renders every event of the session into the place,
// whoever caused it: a message from the web widget, an approval answered in
// another channel, a turn resumed after a restart. So that the listener
// need not keep every bound session loaded, the manager tells it (Follower)
// when a bound session is loaded; the listener then attaches with
// AttachOptions.Follow from the place's RenderedSeq, renders, records its
// progress (Rendered), and its subscription ends when the session unloads.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-gw/switchboard"
)

// ErrTooManyPlaces: the session is shown in as many places as it may be
// (Config.MaxBindings).
var ErrTooManyPlaces = errors.New("this conversation is already shown in as many places as it may be; /leave in one of them first")

// Follower renders a channel's bound sessions; a listener registers one for
// its channel with SetFollower.
type Follower interface {
	// Follow is told that b's session is loaded or has events b was not
	// shown. It must return at once: the listener attaches on its own
	// goroutine (AttachOptions.Follow), and ignores a binding it already
	// follows.
	Follow(b switchboard.Binding)
}

// SetFollower registers the follower of a channel's bindings (nil removes
// it). Register before Recover, so turns resumed at start-up reach the
// places they are shown in.
func (m *Manager) SetFollower(channel string, f Follower) {
	m.followMu.Lock()
	defer m.followMu.Unlock()
	if f == nil {
		delete(m.followers, channel)
		return
	}
	m.followers[channel] = f
}

func (m *Manager) follower(channel string) Follower {
	m.followMu.RLock()
	defer m.followMu.RUnlock()
	return m.followers[channel]
}

// Bind shows a session in a place from now on: its listener is told at
// once (the session is loaded for it) and renders from the session's
// current end, so the place is not flooded with history. A place bound to
// another session before now shows this one instead: Bind is for a
// conversation a place starts (a mention, /reset), never for a join
// (JoinPlace decides whether a place may change conversation).
func (m *Manager) Bind(ctx context.Context, channel, address, sessionID string) (switchboard.Binding, error) {
	return m.BindWithRecap(ctx, channel, address, sessionID, 0)
}

// BindWithRecap is Bind for a place that joins a conversation under way:
// it is first shown the session's last recap messages (and what came with
// them), not the whole history.
func (m *Manager) BindWithRecap(ctx context.Context, channel, address, sessionID string, recap int) (switchboard.Binding, error) {
	return m.bind(ctx, switchboard.Binding{Channel: channel, Address: address, SessionID: sessionID}, recap)
}

// bind binds b's place (b.Channel, b.Address, b.SessionID, b.ByInvite)
// after the session's last recap messages, or from its end.
func (m *Manager) bind(ctx context.Context, b switchboard.Binding, recap int) (switchboard.Binding, error) {
	channel, address, sessionID := b.Channel, b.Address, b.SessionID
	if err := m.roomFor(ctx, sessionID, channel, address); err != nil {
		return switchboard.Binding{}, err
	}
	seq, err := m.cfg.Store.LastSeq(ctx, sessionID)
	if err != nil {
		return switchboard.Binding{}, fmt.Errorf("sessions: bind %s: %w", sessionID, err)
	}
	if recap > 0 && seq > 0 {
		msgs, err := m.cfg.Store.RecentMessages(ctx, sessionID, recap, seq)
		if err != nil {
			return switchboard.Binding{}, fmt.Errorf("sessions: bind %s: recap: %w", sessionID, err)
		}
		if len(msgs) > 0 {
			seq = msgs[0].Seq - 1
		}
	}
	b.RenderedSeq, b.CreatedAt = seq, m.cfg.Now().UTC()
	if err := m.cfg.Store.Bind(ctx, b); err != nil {
		return b, fmt.Errorf("sessions: %w", err)
	}
	// Bound again to the same session, it keeps its progress.
	if cur, err := m.cfg.Store.Binding(ctx, channel, address); err == nil {
		b = cur
	}
	if f := m.follower(channel); f != nil {
		f.Follow(b)
	}
	return b, nil
}

// roomFor says whether a session may be shown in one more place (or is
// shown there already): ErrTooManyPlaces when not.
func (m *Manager) roomFor(ctx context.Context, sessionID, channel, address string) error {
	bs, err := m.cfg.Store.SessionBindings(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("sessions: bind %s: %w", sessionID, err)
	}
	if len(bs) >= m.cfg.MaxBindings && !slices.ContainsFunc(bs, func(b switchboard.Binding) bool { return b.Channel == channel && b.Address == address }) {
		m.cfg.Metrics.Refused("bindings_per_session")
		return fmt.Errorf("sessions: bind %s: %w", sessionID, ErrTooManyPlaces)
	}
	return nil
}

// Unbind stops showing anything in a place.
func (m *Manager) Unbind(ctx context.Context, channel, address string) error {
	if err := m.cfg.Store.Unbind(ctx, channel, address); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// Binding returns the session a place shows (switchboard.ErrNotFound when
// none).
func (m *Manager) Binding(ctx context.Context, channel, address string) (switchboard.Binding, error) {
	b, err := m.cfg.Store.Binding(ctx, channel, address)
	if err != nil {
		return b, fmt.Errorf("sessions: %w", err)
	}
	return b, nil
}

// Rendered records that b's place has been shown its session's events
// through seq; it never goes back. A listener calls it at points where a
// restart should resume (a finished message, a card), not for every delta.
func (m *Manager) Rendered(ctx context.Context, b switchboard.Binding, seq int64) error {
	if err := m.cfg.Store.SetRendered(ctx, b.Channel, b.Address, b.SessionID, seq); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// SetState keeps the listener's note about b's place (switchboard.Binding
// State): what it has under way there, for a restart to finish.
func (m *Manager) SetState(ctx context.Context, b switchboard.Binding, state string) error {
	if err := m.cfg.Store.SetBindingState(ctx, b.Channel, b.Address, b.SessionID, state); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// CatchUp tells channel's follower of every binding that has events it was
// not shown: a listener calls it as it starts, for what happened while it
// was away (a reply cut by a crash, a message from another channel).
func (m *Manager) CatchUp(ctx context.Context, channel string) error {
	f := m.follower(channel)
	if f == nil {
		return fmt.Errorf("sessions: catch up %s: no follower registered", channel)
	}
	bs, err := m.cfg.Store.BindingsBehind(ctx, channel)
	if err != nil {
		return fmt.Errorf("sessions: catch up %s: %w", channel, err)
	}
	for _, b := range bs {
		f.Follow(b)
	}
	return nil
}

// announce tells the followers of a session's places that it is loaded.
func (m *Manager) announce(ctx context.Context, sessionID string) {
	m.followMu.RLock()
	none := len(m.followers) == 0
	m.followMu.RUnlock()
	if none {
		return
	}
	bs, err := m.cfg.Store.SessionBindings(ctx, sessionID)
	if err != nil {
		m.cfg.Logger.Error("bindings of a loaded session", "session", sessionID, "err", err)
		return
	}
	for _, b := range bs {
		if f := m.follower(b.Channel); f != nil {
			f.Follow(b)
		}
	}
}

// follow attaches a channel's renderer to a bound session (Attach with
// Follow): no membership, and loading the session does not announce it
// to the follower that asked.
func (m *Manager) follow(ctx context.Context, opts AttachOptions) (*Subscription, error) {
	if opts.SessionID == "" {
		return nil, errors.New("sessions: follow: no session id")
	}
	s, err := m.loadAs(ctx, opts.SessionID, true)
	if err != nil {
		return nil, err
	}
	if s.remote.Load() {
		// Its owner's renderers show it: it is told when it loads there.
		return nil, fmt.Errorf("sessions: follow %s: %w", s.id, ErrElsewhere)
	}
	last := s.publishedSeq()
	after := opts.AfterSeq
	if after < 0 || after > last {
		after = last
	}
	g := s.guideSnapshot()
	sub := s.subscribe(after, opts.Follow+":", opts.Follow, nil, nil, nil)
	s.mu.Lock()
	s.passUnsentLocked(sub)
	s.mu.Unlock()
	sub.Ready = switchboard.ReadyData{
		Session: s.id, Guide: g.Name, LastSeq: last, Pending: s.openRequests(),
		Greeting: g.Greeting, Suggestions: g.Suggestions,
	}
	return sub, nil
}

// FindUI returns a card the session showed, for a listener that renders
// its controls compactly (a Slack select's options by position) and reads
// a click back against it.
func (m *Manager) FindUI(ctx context.Context, sessionID, uiID string) (switchboard.UI, error) {
	ui, err := m.cfg.Store.FindUI(ctx, sessionID, uiID)
	if err != nil {
		return ui, fmt.Errorf("sessions: card %s: %w", uiID, err)
	}
	return ui, nil
}
