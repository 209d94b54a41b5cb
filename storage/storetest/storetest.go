// Package storetest is the store test suite: what every implementation of
// the gateway's store (the SQLite one in storage, another on PostgreSQL)
// must do, said through the store's methods alone. A store's own tests run
// it with Run and an opener of fresh stores; what only one implementation
// has (SQLite's writer batches, its file lock, a full disk) stays in that
// implementation's tests.
//
// It imports no store, only the domain package, whose records and
// sentinels (switchboard.ErrNotFound, ErrExists, ErrGap) every store
// speaks.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Store is the store under test: every method of storage.DB but LimitSize,
// which only SQLite has, and Close, which the opener arranges.
type Store interface {
	// Sessions and their members.
	CreateSession(ctx context.Context, s switchboard.Session) error
	Session(ctx context.Context, id string) (switchboard.Session, error)
	SessionByKey(ctx context.Context, key string) (switchboard.Session, error)
	ClearSessionKey(ctx context.Context, id string) error
	SetSessionGuide(ctx context.Context, id, guide string) error
	SetMember(ctx context.Context, sessionID string, m switchboard.Member) error
	RemoveMember(ctx context.Context, sessionID, authorKey string) error
	SeenMembers(ctx context.Context, sessionID string, seen map[string]time.Time) error
	Member(ctx context.Context, sessionID, authorKey string) (string, error)
	Members(ctx context.Context, sessionID string) ([]switchboard.Member, error)
	SessionsOf(ctx context.Context, authorKey string, limit int) ([]switchboard.MemberSession, error)

	// Retention.
	Expired(ctx context.Context, before time.Time, limit int) ([]string, error)
	DeleteSessions(ctx context.Context, ids []string) error

	// The numbered event log.
	AppendEvents(ctx context.Context, published func([]switchboard.Event, error), evs ...switchboard.Event) error
	Flush(ctx context.Context) error
	EventsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]switchboard.Event, error)
	RecentMessages(ctx context.Context, sessionID string, n int, throughSeq int64) ([]switchboard.Event, error)
	Decisions(ctx context.Context, sessionID string, n int) ([]switchboard.Decision, error)
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	FindUI(ctx context.Context, sessionID, uiID string) (switchboard.UI, error)

	// The model's context, turns and inputs.
	AppendMessages(ctx context.Context, sessionID string, msgs []switchboard.Message, clearPending bool) error
	Window(ctx context.Context, sessionID string, n int) ([]switchboard.Message, error)
	MessageCount(ctx context.Context, sessionID string) (int64, error)
	LoadPending(ctx context.Context, sessionID string) ([]byte, error)
	Context(ctx context.Context, sessionID string, n int) (summary string, msgs []switchboard.Message, err error)
	WriteTurn(ctx context.Context, sessionID string, w switchboard.TurnWrite) (dup bool, err error)
	AcceptInput(ctx context.Context, sessionID, key string, in switchboard.Input) (id int64, dup bool, err error)
	Inbox(ctx context.Context, sessionID string) ([]switchboard.QueuedInput, error)
	Unfinished(ctx context.Context) ([]string, error)
	SeenInput(ctx context.Context, sessionID, clientID string) (bool, error)

	// The places in channels that show a session.
	Bind(ctx context.Context, b switchboard.Binding) error
	Unbind(ctx context.Context, channel, address string) error
	Binding(ctx context.Context, channel, address string) (switchboard.Binding, error)
	SessionBindings(ctx context.Context, sessionID string) ([]switchboard.Binding, error)
	BindingsBehind(ctx context.Context, channel string) ([]switchboard.Binding, error)
	SetRendered(ctx context.Context, channel, address, sessionID string, seq int64) error
	SetBindingState(ctx context.Context, channel, address, sessionID, state string) error

	// Invites.
	CreateInvite(ctx context.Context, inv switchboard.Invite) error
	Invite(ctx context.Context, codeHash string) (switchboard.Invite, error)
	RedeemInvite(ctx context.Context, codeHash string, now time.Time) (switchboard.Invite, error)
	RevokeInvites(ctx context.Context, sessionID string, now time.Time) (int, error)

	// People's memories.
	AddMemory(ctx context.Context, m switchboard.Memory) error
	Memories(ctx context.Context, owner string, limit int) ([]switchboard.Memory, error)
	ForgetMemory(ctx context.Context, owner, id string) error

	// Recall: full-text search, and the vectors of semantic recall.
	Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error)
	SearchHits(ctx context.Context, reader, query string, limit int) ([]switchboard.Hit, error)
	Unembedded(ctx context.Context, space string, after int64, limit int) ([]switchboard.Unembedded, error)
	CountUnembedded(ctx context.Context, space string, after int64) (int64, error)
	SaveVectors(ctx context.Context, space string, vs []switchboard.Vector) error
	MemberSessions(ctx context.Context, reader string) ([]string, error)
	SessionVectors(ctx context.Context, space, sessionID string, dims int) (ids []int64, flat []float32, err error)
	Hits(ctx context.Context, reader string, ids []int64) ([]switchboard.Hit, error)

	// What grows with use besides the conversations.
	Footprint(ctx context.Context) (switchboard.Footprint, error)

	// What turns spent: their running totals and reports.
	Tally(ctx context.Context, k switchboard.TallyKey) (switchboard.Tally, error)
	Spending(ctx context.Context, q switchboard.SpendQuery) ([]switchboard.SpendRow, error)
}

// Run runs the suite, a subtest a behaviour, each on a fresh, empty store
// from open. open registers the store's cleanup (its Close) with the t it
// is given, and fails that t if the store cannot be opened.
func Run(t *testing.T, open func(t *testing.T) Store) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, db Store)
	}{
		{"SessionRoundTrip", testSessionRoundTrip},
		{"SessionNotFound", testSessionNotFound},
		{"SessionKeyIsUniqueUntilCleared", testSessionKeyIsUniqueUntilCleared},
		{"Members", testMembers},
		{"SessionsOf", testSessionsOf},
		{"AllowedToolsStoredWithTheTurn", testAllowedToolsStoredWithTheTurn},
		{"GuideStoredWithTheTurn", testGuideStoredWithTheTurn},

		{"EventsFromManySessionsLandInOrder", testEventsFromManySessionsLandInOrder},
		{"EventsAfterPagesAndRoundTrips", testEventsAfterPagesAndRoundTrips},
		{"AppendEventsRejectsUnnumberedEvents", testAppendEventsRejectsUnnumberedEvents},
		{"FindUI", testFindUI},
		{"GapIsRefusedAndOtherSessionsAreStored", testGapIsRefusedAndOtherSessionsAreStored},
		{"RepeatedSeqIsRefused", testRepeatedSeqIsRefused},
		{"PublishedInSeqOrderAfterCommit", testPublishedInSeqOrderAfterCommit},
		{"RecentMessages", testRecentMessages},
		{"DecisionsPairAnswersWithTheirRequests", testDecisionsPairAnswersWithTheirRequests},

		{"WindowNeverStartsWithAToolResult", testWindowNeverStartsWithAToolResult},
		{"AppendMessagesIsAtomic", testAppendMessagesIsAtomic},
		{"PendingTurn", testPendingTurn},
		{"SeenInput", testSeenInput},
		{"SummaryAndContext", testSummaryAndContext},
		{"WriteTurnStoresTheAnswerAndAddsUsage", testWriteTurnStoresTheAnswerAndAddsUsage},
		{"WriteTurnStoresInputAndMarksTogether", testWriteTurnStoresInputAndMarksTogether},
		{"WriteTurnIsAtomic", testWriteTurnIsAtomic},
		{"WriteTurnDuplicateWritesNothing", testWriteTurnDuplicateWritesNothing},
		{"WriteTurnForget", testWriteTurnForget},
		{"WriteTurnOpensUpdatesAndEndsTheTurn", testWriteTurnOpensUpdatesAndEndsTheTurn},
		{"WriteTurnPublishesAfterCommit", testWriteTurnPublishesAfterCommit},
		{"WriteTurnPublishesOnlyWhatItStored", testWriteTurnPublishesOnlyWhatItStored},
		{"WriteTurnWaitsForTheEventsBeforeIt", testWriteTurnWaitsForTheEventsBeforeIt},
		{"AcceptInputInboxAndUnfinished", testAcceptInputInboxAndUnfinished},
		{"ChargesAddToTheirTallies", testChargesAddToTheirTallies},
		{"ChargesWrittenAtOnceAddUp", testChargesWrittenAtOnceAddUp},
		{"ChargeIsStoredWithItsTurnOrNotAtAll", testChargeIsStoredWithItsTurnOrNotAtAll},
		{"SpendingReports", testSpendingReports},
		{"ChargesOutliveTheirSession", testChargesOutliveTheirSession},

		{"Bindings", testBindings},
		{"BindingByInvite", testBindingByInvite},
		{"Invites", testInvites},
		{"InviteIsReadWithoutSpending", testInviteIsReadWithoutSpending},
		{"Memories", testMemories},
		{"MemoriesAreBounded", testMemoriesAreBounded},
		{"MemoriesShowEveryWrite", testMemoriesShowEveryWrite},

		{"Search", testSearch},
		{"Vectors", testVectors},
		{"ExpiredSessionsAreDeletedWithEverythingTheyHold", testExpiredSessionsAreDeletedWithEverythingTheyHold},
		{"Footprint", testFootprint},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t)) })
	}
}
