package main

// The audit of a crash test's stored history (see crash_test.go), read
// through the store's own methods, so that it audits the SQLite store and
// the PostgreSQL one alike.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// ---------------------------------------------------------------------------
// The audit of the stored history.

type evRow struct {
	Seq  int64
	Type string
	Data json.RawMessage
}

type sessionStats struct {
	events, interrupted, alreadyResolved, gaveUp, compactions int
}

func (s *sessionStats) add(o sessionStats) {
	s.events += o.events
	s.interrupted += o.interrupted
	s.alreadyResolved += o.alreadyResolved
	s.gaveUp += o.gaveUp
	s.compactions += o.compactions
}

// openAuditDB opens an SQLite store's file read-only, for a look with
// SQL (the terminal tests).
func openAuditDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return db
}

// storedHistory is what the audit reads of a store: both the SQLite store
// (storage) and the PostgreSQL one (storage/postgres) have it.
type storedHistory interface {
	EventsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]switchboard.Event, error)
	MessageCount(ctx context.Context, sessionID string) (int64, error)
	Window(ctx context.Context, sessionID string, n int) ([]switchboard.Message, error)
	Context(ctx context.Context, sessionID string, n int) (summary string, msgs []switchboard.Message, err error)
	LoadPending(ctx context.Context, sessionID string) ([]byte, error)
	Unfinished(ctx context.Context) ([]string, error)
	Close() error
}

// openStoredHistory opens the store a gateway used (storage.dsn: an SQLite
// file, or a PostgreSQL URL, opened as no replica: it takes no lease and
// fences nothing) to audit it. An SQLite file must not be in use by a
// gateway: the store takes its lock.
func openStoredHistory(dsn string) (storedHistory, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if strings.HasPrefix(dsn, "postgres://") {
		return postgres.Open(ctx, dsn)
	}
	return storage.Open(ctx, dsn)
}

// openAudit is openStoredHistory for a test, closed when it ends.
func openAudit(t *testing.T, dsn string) storedHistory {
	t.Helper()
	st, err := openStoredHistory(dsn)
	if err != nil {
		t.Fatalf("open the store to audit it: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// loadContext is every message of the session's context, oldest first.
func loadContext(st storedHistory, session string) ([]switchboard.Message, error) {
	n, err := st.MessageCount(context.Background(), session)
	if err != nil {
		return nil, err
	}
	return st.Window(context.Background(), session, int(n))
}

func loadEvents(st storedHistory, session string) ([]evRow, error) {
	evs, err := st.EventsAfter(context.Background(), session, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make([]evRow, len(evs))
	for i, ev := range evs {
		out[i] = evRow{Seq: ev.Seq, Type: string(ev.Type), Data: ev.Data}
	}
	return out, nil
}

// openTurn is the session's stored open turn; ok is false if it has none.
func openTurn(st storedHistory, session string) (data []byte, ok bool, err error) {
	data, err = st.LoadPending(context.Background(), session)
	if errors.Is(err, switchboard.ErrNotFound) {
		return nil, false, nil
	}
	return data, err == nil, err
}

func loadMessages(db *sql.DB, session string) ([]switchboard.Message, error) {
	rows, err := db.Query(`SELECT data FROM messages WHERE session_id = ? ORDER BY id`, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []switchboard.Message
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var m switchboard.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return nil, fmt.Errorf("message %s: %w", data, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

// auditStore checks what must be empty once every turn is answered: no
// session has an open turn or an input waiting in its inbox.
func auditStore(st storedHistory) []string {
	ids, err := st.Unfinished(context.Background())
	if err != nil {
		return []string{"unfinished sessions: " + err.Error()}
	}
	var fails []string
	for _, id := range ids {
		fails = append(fails, fmt.Sprintf("session %s still has an open turn or inputs in its inbox after every input was answered", id))
	}
	return fails
}

func describeEvents(evs []evRow, from, to int) string {
	from, to = max(from, 0), min(to, len(evs))
	var b strings.Builder
	for _, ev := range evs[from:to] {
		fmt.Fprintf(&b, "    %d %s %s\n", ev.Seq, ev.Type, short(ev.Data, 140))
	}
	return strings.TrimRight(b.String(), "\n")
}

// auditSession checks one session's stored history against what its client
// sent (inputs, in order) and saw (seen, by seq).
func auditSession(db storedHistory, session string, inputs []string, seen map[int64]seenEvent) (sessionStats, []string) {
	var st sessionStats
	var fails []string
	failf := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	if session == "" {
		return st, []string{"the client never got a session"}
	}
	evs, err := loadEvents(db, session)
	if err != nil {
		return st, []string{"events: " + err.Error()}
	}
	msgs, err := loadContext(db, session)
	if err != nil {
		return st, []string{"messages: " + err.Error()}
	}
	st.events = len(evs)

	// 1. Seqs are 1..N.
	bySeq := map[int64]evRow{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) && len(fails) == 0 {
			failf("stored seqs are not 1..%d: position %d holds seq %d", len(evs), i+1, ev.Seq)
		}
		bySeq[ev.Seq] = ev
	}

	// 2. What a client was sent is what is stored, under the same seq.
	seqs := make([]int64, 0, len(seen))
	for seq := range seen {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		got, ok := bySeq[seq]
		switch {
		case !ok:
			failf("seq %d (%s %s) was sent to the client but is not stored", seq, seen[seq].Type, short(seen[seq].Data, 140))
		case got.Type != seen[seq].Type || !sameData(got.Data, seen[seq].Data):
			failf("seq %d: the client got %s %s, the store has %s %s", seq, seen[seq].Type, short(seen[seq].Data, 140), got.Type, short(got.Data, 140))
		}
	}

	// 3. Each input is one user message, as an event and in the context.
	userEvents, userMsgs := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		var md switchboard.MessageData
		if ev.Type == "message" && json.Unmarshal(ev.Data, &md) == nil && md.Role == switchboard.RoleUser {
			userEvents[md.Content]++
		}
	}
	for _, m := range msgs {
		if m.Role == switchboard.RoleUser {
			userMsgs[m.Content]++
		}
	}
	for _, text := range inputs {
		if n := userEvents[text]; n != 1 {
			failf("input %q is stored as %d user message events, want 1", text, n)
		}
		if n := userMsgs[text]; n != 1 {
			failf("input %q is stored as %d user messages in the context, want 1", text, n)
		}
	}
	for text := range userEvents {
		if !slices.Contains(inputs, text) {
			failf("a user message event nobody sent: %q", text)
		}
	}

	// 4. Between two user messages: one answer, and no error but the
	// marker of a turn cut short; deltas that never got their message are
	// followed by that marker. The one error a turn may end with is the
	// gateway giving up on a turn cut every time it ran (sessions'
	// maxResumes): an internal error after the turn's interrupted markers.
	type turnSpan struct {
		start, end  int
		text        string
		answers     int
		interrupted int
		gaveUp      bool
		errs        []string
	}
	giveUps := map[int]bool{} // indexes of the give-up errors
	var turns []*turnSpan
	var cur *turnSpan
	closed := map[string]bool{}
	lastDelta := map[string]int{}
	for i, ev := range evs {
		switch ev.Type {
		case "message":
			var md switchboard.MessageData
			_ = json.Unmarshal(ev.Data, &md)
			closed[md.ID] = true
			switch md.Role {
			case switchboard.RoleUser:
				if cur != nil {
					cur.end = i
				}
				cur = &turnSpan{start: i, end: len(evs), text: md.Content}
				turns = append(turns, cur)
			case switchboard.RoleAssistant:
				if cur == nil {
					failf("seq %d: an assistant message before any user message", ev.Seq)
					continue
				}
				cur.answers++
				if qid := questionID(cur.text); !strings.Contains(md.Content, qid) {
					failf("seq %d: the answer %q is not the answer to %q", ev.Seq, md.Content, cur.text)
				}
			}
		case "delta":
			var dd switchboard.DeltaData
			_ = json.Unmarshal(ev.Data, &dd)
			lastDelta[dd.MessageID] = i
		case "error":
			switch code := errorCode(wsFrame{Data: ev.Data}); code {
			case "interrupted":
				st.interrupted++
				if cur != nil {
					cur.interrupted++
				}
			case switchboard.ErrCodeAlreadyResolved:
				st.alreadyResolved++ // a client resent an approval the gateway had already taken
			case switchboard.ErrCodeInternal:
				if cur != nil && cur.interrupted > 0 && cur.answers == 0 && !cur.gaveUp {
					cur.gaveUp = true
					giveUps[i] = true
					st.gaveUp++
					continue
				}
				fallthrough
			default:
				if cur != nil {
					cur.errs = append(cur.errs, code)
				}
				failf("seq %d: error %s: the scripted model never fails, so no turn should end in an error:\n%s", ev.Seq, short(ev.Data, 200), describeEvents(evs, i-8, i+2))
			}
		}
	}
	gaveUp := map[string]bool{}
	for _, tr := range turns {
		switch {
		case tr.gaveUp && tr.answers != 0:
			failf("the turn of %q (seq %d to %d) was given up, yet has %d assistant messages:\n%s",
				tr.text, evs[tr.start].Seq, evs[tr.end-1].Seq, tr.answers, describeEvents(evs, tr.start, min(tr.end, tr.start+60)))
		case tr.gaveUp:
			gaveUp[tr.text] = true
		case tr.answers != 1 && len(tr.errs) == 0:
			failf("the turn of %q (seq %d to %d) has %d assistant messages, want 1:\n%s",
				tr.text, evs[tr.start].Seq, evs[tr.end-1].Seq, tr.answers, describeEvents(evs, tr.start, min(tr.end, tr.start+60)))
		}
	}
	var orphans []string
	for id := range lastDelta {
		if !closed[id] {
			orphans = append(orphans, id)
		}
	}
	slices.SortFunc(orphans, func(a, b string) int { return lastDelta[a] - lastDelta[b] })
	for _, id := range orphans {
		j, next := lastDelta[id], -1
		for k := j + 1; k < len(evs) && next < 0; k++ {
			var dd switchboard.DeltaData
			switch evs[k].Type {
			case "error", "message":
				next = k
			case "delta":
				if json.Unmarshal(evs[k].Data, &dd) == nil && dd.MessageID != id {
					next = k
				}
			}
		}
		if next < 0 || evs[next].Type != "error" || errorCode(wsFrame{Data: evs[next].Data}) != "interrupted" && !giveUps[next] {
			failf("the deltas of %s (the last at seq %d) never got their message and are not followed by an interrupted error:\n%s",
				id, evs[j].Seq, describeEvents(evs, j-3, max(next, j)+3))
		}
	}

	// Every approval request is resolved once, after it was asked (all
	// the clients approve; none expires).
	asked, resolved := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		switch ev.Type {
		case "confirmation_request":
			var cr switchboard.ConfirmationRequestData
			_ = json.Unmarshal(ev.Data, &cr)
			asked[cr.ConfirmationID]++
		case "confirmation_resolved":
			var cr switchboard.ConfirmationResolvedData
			_ = json.Unmarshal(ev.Data, &cr)
			if asked[cr.ConfirmationID] == 0 {
				failf("seq %d: approval %s resolved before it was asked", ev.Seq, cr.ConfirmationID)
			}
			if !cr.Approved {
				failf("seq %d: approval %s resolved as denied (by %s), though the client approves everything", ev.Seq, cr.ConfirmationID, cr.By)
			}
			resolved[cr.ConfirmationID]++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		if resolved[id] != 1 {
			failf("approval %s was resolved %d times, want 1", id, resolved[id])
		}
	}

	// 5. In the context: tool calls are followed by all their results at
	// once, and each question has one final answer (none if given up).
	answers := -1 // final answers since the last user message; -1 before any
	question := ""
	endQuestion := func() {
		want := 1
		if gaveUp[question] {
			want = 0
		}
		if answers >= 0 && answers != want {
			failf("context: %q is followed by %d final assistant messages, want %d", question, answers, want)
		}
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case switchboard.RoleUser:
			endQuestion()
			question, answers = m.Content, 0
		case switchboard.RoleAssistant:
			if answers < 0 {
				failf("context: message %d, from the assistant, comes before any user message", i)
			}
			if len(m.ToolCalls) == 0 {
				answers++
				if qid := questionID(question); !strings.Contains(m.Content, qid) {
					failf("context: the answer %q is not the answer to %q", m.Content, question)
				}
				continue
			}
			want := map[string]bool{}
			for _, tc := range m.ToolCalls {
				want[tc.ID] = true
			}
			k := i + 1
			for ; k < len(msgs) && msgs[k].Role == switchboard.RoleTool && want[msgs[k].ToolCallID]; k++ {
				delete(want, msgs[k].ToolCallID)
			}
			if len(want) > 0 {
				failf("context: the tool calls of message %d (after %q) are not followed by all their results at once: missing %v", i, question, slices.Sorted(maps.Keys(want)))
			}
			i = k - 1
		case switchboard.RoleTool:
			failf("context: message %d is a tool result (%s) that does not follow its call (after %q)", i, m.ToolCallID, question)
		}
	}
	endQuestion()

	// 6. A compaction is stored with its summary, in one write: the last
	// compaction event shows the summary the session keeps, and the
	// summary ends at one of the session's messages.
	var lastCompaction *switchboard.CompactionData
	for _, ev := range evs {
		if ev.Type == string(switchboard.EventCompaction) {
			var cd switchboard.CompactionData
			if err := json.Unmarshal(ev.Data, &cd); err != nil {
				failf("seq %d: compaction %s: %v", ev.Seq, short(ev.Data, 140), err)
			}
			lastCompaction = &cd
			st.compactions++
		}
	}
	// The summary covers the messages before those Context returns: at
	// least one, and those after it are the last of the session's.
	summary, after, err := db.Context(context.Background(), session, len(msgs))
	switch {
	case err != nil:
		failf("summary: %v", err)
	case summary == "" && lastCompaction != nil:
		failf("a compaction event is stored (%q) but no summary", lastCompaction.Summary)
	case summary == "":
	case lastCompaction == nil:
		failf("a summary is stored (%q) but no compaction event shows it", summary)
	case lastCompaction.Summary != summary:
		failf("the last compaction event shows %q, the stored summary is %q", lastCompaction.Summary, summary)
	case len(after) >= len(msgs):
		failf("the summary covers none of the session's %d messages: it does not end at one of them", len(msgs))
	default:
		tail := msgs[len(msgs)-len(after):]
		for i := range after {
			if after[i].Role != tail[i].Role || after[i].Content != tail[i].Content {
				failf("the messages after the summary are not the session's last %d: #%d is %s %q, want %s %q",
					len(after), i, after[i].Role, after[i].Content, tail[i].Role, tail[i].Content)
				break
			}
		}
	}
	return st, fails
}
