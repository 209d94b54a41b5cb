package sessions

// Sharing a session: /share makes an invite code (random, 128 bits, stored
// only as its hash) with a role, a number of uses and an expiry; /unshare
// withdraws the open ones; Join spends a use and makes its bearer a member
// with the code's role. Which place then shows the session is the
// listener's business (Bind).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
)

// Invite defaults and bounds.
const (
	inviteUses    = 10
	inviteTTL     = 24 * time.Hour
	maxInviteUses = 1000
	maxInviteTTL  = 30 * 24 * time.Hour
)

// ErrTooManyJoins: someone tried too many codes in a short time.
var ErrTooManyJoins = errors.New("too many invite codes tried in a short time; wait a minute")

// NoticeInfo is the code of a notice that answers one person and is no
// error: their invite code, which the others in the session must not see.
const NoticeInfo = "info"

// newInviteCode is 128 random bits, in base32 (lower case, no padding):
// 26 characters that survive being read aloud or typed.
func newInviteCode() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

func hashCode(code string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(code))))
	return hex.EncodeToString(sum[:])
}

// parseShare reads "/share [viewer|member|approver] [uses N] [expires D]".
func parseShare(args string) (role collaboration.Role, uses int, ttl time.Duration, err error) {
	role, uses, ttl = collaboration.Member, inviteUses, inviteTTL
	f := strings.Fields(args)
	for i := 0; i < len(f); i++ {
		switch w := strings.ToLower(f[i]); w {
		case "viewer", "member", "approver":
			role = collaboration.Role(w)
		case "uses", "expires":
			if i+1 == len(f) {
				return role, uses, ttl, fmt.Errorf("%s needs a value", w)
			}
			i++
			if w == "uses" {
				n, perr := strconv.Atoi(f[i])
				if perr != nil || n < 1 || n > maxInviteUses {
					return role, uses, ttl, fmt.Errorf("uses: want a number from 1 to %d, not %q", maxInviteUses, f[i])
				}
				uses = n
				continue
			}
			d, perr := time.ParseDuration(f[i])
			if perr != nil || d < time.Minute || d > maxInviteTTL {
				return role, uses, ttl, fmt.Errorf("expires: want a duration from 1m to 720h, such as 24h, not %q", f[i])
			}
			ttl = d
		default:
			return role, uses, ttl, fmt.Errorf("unknown word %q", f[i])
		}
	}
	return role, uses, ttl, nil
}

// share answers /share: the owner may invite with any role, an approver
// viewers and members; the code goes to the one who asked, alone.
func (s *session) share(ctx context.Context, by switchboard.Author, args string) {
	role, uses, ttl, err := parseShare(args)
	if err != nil {
		s.tell(by, switchboard.ErrCodeBadInput, "Usage: /share [viewer|member|approver] [uses N] [expires 24h]: "+err.Error()+".")
		return
	}
	mine := s.role(by)
	if mine != collaboration.Owner && !(mine == collaboration.Approver && (role == collaboration.Viewer || role == collaboration.Member)) {
		s.tell(by, switchboard.ErrCodeForbidden, "Only the session's owner may invite approvers, and only the owner or an approver may invite at all.")
		return
	}
	if err := s.persist(ctx); err != nil {
		s.tell(by, switchboard.ErrCodeInternal, "The session could not be shared; try again.")
		return
	}
	code := newInviteCode()
	now := s.m.cfg.Now().UTC()
	if err := s.m.cfg.Store.CreateInvite(ctx, switchboard.Invite{
		CodeHash: hashCode(code), SessionID: s.id, Role: string(role), UsesLeft: uses,
		ExpiresAt: now.Add(ttl), CreatedBy: by.Key(), CreatedAt: now,
	}); err != nil {
		s.log.Error("invite not stored", "err", err)
		s.tell(by, switchboard.ErrCodeInternal, "The session could not be shared; try again.")
		return
	}
	msg := fmt.Sprintf("Invite code %s: joins as %s, %d use(s), until %s UTC. Others join with /join %s",
		code, role, uses, now.Add(ttl).Format("2006-01-02 15:04"), code)
	link := ""
	if base := strings.TrimRight(s.m.cfg.PublicURL, "/"); base != "" {
		link = base + "/s/" + code
		msg += " or at " + link
	}
	s.tellLink(by, msg+". /unshare withdraws it.", link)
}

// unshare withdraws every open invite of the session.
func (s *session) unshare(ctx context.Context, by switchboard.Author) {
	if !s.role(by).CanApprove() {
		s.tell(by, switchboard.ErrCodeForbidden, "Only the session's owner or an approver may withdraw its invites.")
		return
	}
	n, err := s.m.cfg.Store.RevokeInvites(ctx, s.id, s.m.cfg.Now().UTC())
	if err != nil {
		s.tell(by, switchboard.ErrCodeInternal, "The invites could not be withdrawn; try again.")
		return
	}
	s.tell(by, NoticeInfo, fmt.Sprintf("%d open invite code(s) withdrawn.", n))
}

// Join lets author into the session an invite code names, with the code's
// role (a member who already has a higher role keeps it), and returns the
// session's id, for a listener that attaches the person next (Attach tells
// the others); a place in a chat app joins with JoinPlace.
func (m *Manager) Join(ctx context.Context, code string, author switchboard.Author) (string, collaboration.Role, error) {
	return m.redeem(ctx, code, author, nil)
}

// JoinPlace is Join for a place in a channel (a Slack DM, a Discord
// thread, the terminal): the place then shows the session, first with a
// recap of its last recap messages, and only the session's people act
// there (Binding.ByInvite). Before the code is spent, the place must be
// one a join may point at the session (mayShowIn: never a thread that
// shows another conversation, ErrPlaceTaken), the session must have room
// for one more place (ErrTooManyPlaces), and prove, when set, must show
// that the channel can post there (its error is returned as it is).
func (m *Manager) JoinPlace(ctx context.Context, code string, author switchboard.Author, p Place, recap int, prove func(context.Context) error) (string, collaboration.Role, error) {
	sessionID, role, err := m.redeem(ctx, code, author, func(sessionID string) error {
		if err := m.mayShowIn(ctx, sessionID, p); err != nil {
			return err
		}
		if err := m.roomFor(ctx, sessionID, p.Channel, p.Address); err != nil {
			return err
		}
		if prove != nil {
			return prove(ctx)
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	if _, err := m.bind(ctx, switchboard.Binding{Channel: p.Channel, Address: p.Address, SessionID: sessionID, ByInvite: true}, recap); err != nil {
		return sessionID, role, err
	}
	// A person in a chat app's place never attaches: the others are told
	// of them now.
	if s, err := m.load(ctx, sessionID); err == nil {
		s.mu.Lock()
		s.membersChangedLocked()
		s.mu.Unlock()
	}
	return sessionID, role, nil
}

// redeem spends a use of code for author once check (if any) allows the
// session it names and the session is loaded: a refusal, or a gateway
// too full to load it, leaves the code as it was.
func (m *Manager) redeem(ctx context.Context, code string, author switchboard.Author, check func(sessionID string) error) (string, collaboration.Role, error) {
	if !m.mayJoin(author) {
		m.cfg.Metrics.Refused("joins_per_minute")
		return "", "", ErrTooManyJoins
	}
	if peek, err := m.cfg.Store.Invite(ctx, hashCode(code)); err == nil { // else RedeemInvite says what is wrong
		if check != nil {
			if err := check(peek.SessionID); err != nil {
				return "", "", err
			}
		}
		if _, err := m.load(ctx, peek.SessionID); err != nil {
			return "", "", err
		}
	}
	inv, err := m.cfg.Store.RedeemInvite(ctx, hashCode(code), m.cfg.Now().UTC())
	if err != nil {
		return "", "", fmt.Errorf("sessions: join: %w", err)
	}
	role := collaboration.Role(inv.Role)
	s, err := m.load(ctx, inv.SessionID)
	if err != nil {
		return "", "", err
	}
	if cur := s.role(author); s.isMember(author) && rank(cur) >= rank(role) {
		role = cur
	}
	// Not told to the others here: a listener attaches next (Attach tells
	// them, with the newcomer here) or JoinPlace does.
	if _, err := s.join(ctx, author, role); err != nil {
		return "", "", err
	}
	return inv.SessionID, role, nil
}

// rank orders roles by what they may do.
func rank(r collaboration.Role) int {
	switch r {
	case collaboration.Owner:
		return 3
	case collaboration.Approver:
		return 2
	case collaboration.Member:
		return 1
	}
	return 0
}

// mayJoin spends one of the author's join attempts: 10 a minute.
func (m *Manager) mayJoin(a switchboard.Author) bool {
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	l := m.joiners[a.Key()]
	if l == nil {
		if len(m.joiners) >= 10_000 {
			clear(m.joiners)
		}
		l = rate.NewLimiter(rate.Every(6*time.Second), 10)
		m.joiners[a.Key()] = l
	}
	return l.Allow()
}
