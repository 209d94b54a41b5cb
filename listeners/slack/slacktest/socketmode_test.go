package slacktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

// deadline turns a hang into a failure; no test relies on it passing.
const deadline = 10 * time.Second

// socketClient runs a real slack-go Socket Mode client against srv until
// the test ends.
type socketClient struct {
	*socketmode.Client
	done chan error
}

func runSocketClient(t *testing.T, srv *slacktest.Server, api *slack.Client) *socketClient {
	t.Helper()
	c := &socketClient{Client: socketmode.New(api), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { c.done <- c.RunContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(deadline):
			t.Error("socket mode client did not stop")
		}
	})
	return c
}

// next returns the next client event of type typ, skipping others
// (connecting, connected, hello…), or fails after the deadline.
func (c *socketClient) next(t *testing.T, typ socketmode.EventType) socketmode.Event {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case ev := <-c.Events:
			if ev.Type == typ {
				return ev
			}
		case err := <-c.done:
			t.Fatalf("client stopped waiting for %s: %v", typ, err)
		case <-timer.C:
			t.Fatalf("no %s event within %v", typ, deadline)
		}
	}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

func TestSocketModeHelloEventAndAck(t *testing.T) {
	srv, api := newServer(t)
	c := runSocketClient(t, srv, api)

	hello := c.next(t, socketmode.EventTypeHello)
	if hello.Request.NumConnections != 1 || hello.Request.ConnectionInfo.AppID != srv.AppID() || hello.Request.DebugInfo.Host == "" {
		t.Errorf("hello = %+v", hello.Request)
	}
	if err := srv.WaitForConnections(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}

	ev := srv.AppMentionEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: "hello there"})
	sent, err := srv.SendEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	got := c.next(t, socketmode.EventTypeEventsAPI)
	if got.Request.EnvelopeID != sent.EnvelopeID || got.Request.RetryAttempt != 0 {
		t.Errorf("envelope = %+v, sent %+v", got.Request, sent)
	}
	outer := got.Data.(slackevents.EventsAPIEvent)
	mention, ok := outer.InnerEvent.Data.(*slackevents.AppMentionEvent)
	if !ok || outer.TeamID != srv.TeamID() || outer.APIAppID != srv.AppID() {
		t.Fatalf("event = %+v", outer)
	}
	if mention.User != alice || mention.Channel != channel || mention.Text != srv.Mention()+" hello there" || mention.TimeStamp == "" {
		t.Errorf("app_mention = %+v", mention)
	}
	// The message the event describes is in the workspace model.
	if m, ok := srv.Message(channel, mention.TimeStamp); !ok || m.User != alice {
		t.Errorf("mentioned message not stored: %+v", m)
	}

	if err := c.Ack(*got.Request); err != nil {
		t.Fatal(err)
	}
	ack, err := srv.WaitForAck(waitCtx(t), sent.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Known || ack.Payload != nil || ack.Latency <= 0 || ack.Latency >= 3*time.Second {
		t.Errorf("ack = %+v, want a known ack within Slack's 3 s", ack)
	}
	if n := len(srv.Acks()); n != 1 {
		t.Errorf("acks = %d", n)
	}

	// A DM message event carries channel_type im.
	if _, err := srv.SendEvent(srv.MessageEvent(slacktest.UserMessage{Channel: dm, User: alice, Text: "psst"})); err != nil {
		t.Fatal(err)
	}
	msg := c.next(t, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if msg.ChannelType != "im" || msg.Text != "psst" || msg.User != alice {
		t.Errorf("message event = %+v", msg)
	}
}

func TestSocketModeRedelivery(t *testing.T) {
	srv, api := newServer(t)
	c := runSocketClient(t, srv, api)
	if err := srv.WaitForConnections(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	first, err := srv.SendEvent(srv.MessageEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: "once"}))
	if err != nil {
		t.Fatal(err)
	}
	a := c.next(t, socketmode.EventTypeEventsAPI)
	// Not acked: Slack retries.
	retry, err := srv.Redeliver(first, "")
	if err != nil {
		t.Fatal(err)
	}
	b := c.next(t, socketmode.EventTypeEventsAPI)
	if b.Request.RetryAttempt != 1 || b.Request.RetryReason != "timeout" || b.Request.EnvelopeID == a.Request.EnvelopeID {
		t.Errorf("redelivery = %+v", b.Request)
	}
	idOf := func(ev socketmode.Event) string {
		var cb slackevents.EventsAPICallbackEvent
		if err := json.Unmarshal(ev.Request.Payload, &cb); err != nil {
			t.Fatal(err)
		}
		return cb.EventID
	}
	if idOf(a) == "" || idOf(a) != idOf(b) {
		t.Errorf("event_id %q then %q: a redelivery carries the same event", idOf(a), idOf(b))
	}
	if err := c.Ack(*b.Request); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitForAck(waitCtx(t), retry.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if envs := srv.Envelopes(); len(envs) != 2 || envs[1].RetryAttempt != 1 {
		t.Errorf("envelopes = %+v", envs)
	}
}

func TestSocketModeInteractionsAndCommands(t *testing.T) {
	srv, api := newServer(t)
	c := runSocketClient(t, srv, api)
	if err := srv.WaitForConnections(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	q := srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: alice, Text: "run it"})
	model := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, slack.NewTextBlockObject(slack.PlainTextType, "Model", false, false), "model",
		slack.NewOptionBlockObject("fast", slack.NewTextBlockObject(slack.PlainTextType, "Fast", false, false), nil),
		slack.NewOptionBlockObject("smart", slack.NewTextBlockObject(slack.PlainTextType, "Smart", false, false), nil))
	_, ts, err := api.PostMessage(channel, slack.MsgOptionText("Approve?", false), slack.MsgOptionTS(q.TS),
		slack.MsgOptionBlocks(slack.NewActionBlock("decision", button("approve", "Approve"), model)))
	if err != nil {
		t.Fatal(err)
	}

	// Only what the message shows can be clicked.
	if _, err := srv.BlockActions(slacktest.BlockActionsSpec{User: alice, Channel: channel, MessageTS: ts,
		Actions: []slacktest.Action{{ActionID: "missing"}}}); err == nil {
		t.Error("clicking a button the message lacks succeeded")
	}
	if _, err := srv.BlockActions(slacktest.BlockActionsSpec{User: alice, Channel: channel, MessageTS: ts,
		Actions: []slacktest.Action{{ActionID: "model", SelectedValue: "nope"}}}); err == nil {
		t.Error("choosing a missing option succeeded")
	}

	click, err := srv.BlockActions(slacktest.BlockActionsSpec{User: alice, Channel: channel, MessageTS: ts,
		Actions: []slacktest.Action{{ActionID: "approve"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SendInteraction(click); err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	act := cb.ActionCallback.BlockActions
	if cb.Type != slack.InteractionTypeBlockActions || len(act) != 1 || act[0].ActionID != "approve" || act[0].BlockID != "decision" ||
		act[0].Value != "v-approve" || act[0].Type != "button" || act[0].Text.Text != "Approve" {
		t.Errorf("block_actions = %+v actions %+v", cb, act)
	}
	if cb.User.ID != alice || cb.Channel.ID != channel || cb.Container.MessageTs != ts || cb.Container.ThreadTs != q.TS ||
		cb.Message.Timestamp != ts || cb.TriggerID == "" || !strings.HasPrefix(cb.ResponseURL, srv.URL()) {
		t.Errorf("context = user %+v channel %+v container %+v", cb.User, cb.Channel.ID, cb.Container)
	}
	if err := c.Ack(*ev.Request); err != nil {
		t.Fatal(err)
	}

	pick, err := srv.BlockActions(slacktest.BlockActionsSpec{User: alice, Channel: channel, MessageTS: ts,
		Actions: []slacktest.Action{{ActionID: "model", SelectedValue: "smart"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SendInteraction(pick); err != nil {
		t.Fatal(err)
	}
	sel := c.next(t, socketmode.EventTypeInteractive).Data.(slack.InteractionCallback).ActionCallback.BlockActions[0]
	if sel.Type != "static_select" || sel.SelectedOption.Value != "smart" || sel.SelectedOption.Text.Text != "Smart" {
		t.Errorf("static_select action = %+v", sel)
	}

	// The trigger_id of an interaction opens a modal.
	view := slack.ModalViewRequest{
		Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false),
		Submit: slack.NewTextBlockObject(slack.PlainTextType, "Send", false, false), CallbackID: "reject", PrivateMetadata: ts,
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock("reason", slack.NewTextBlockObject(slack.PlainTextType, "Why?", false, false), nil,
			slack.NewPlainTextInputBlockElement(nil, "text"))}},
	}
	opened, err := api.OpenView(cb.TriggerID, view)
	if err != nil {
		t.Fatal(err)
	}
	if opened.ID == "" || opened.CallbackID != "reject" || opened.PrivateMetadata != ts || opened.Hash == "" {
		t.Errorf("views.open = %+v", opened.View)
	}
	_, err = api.OpenView(cb.TriggerID, view)
	slackErr(t, err, "exchanged_trigger_id")

	sub, err := srv.ViewSubmission(slacktest.ViewSubmissionSpec{User: alice, ViewID: opened.ID,
		Values: map[string]map[string]string{"reason": {"text": "too risky"}}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := srv.SendInteraction(sub)
	if err != nil {
		t.Fatal(err)
	}
	if !env.AcceptsResponsePayload {
		t.Error("view_submission envelopes accept a response payload")
	}
	subEv := c.next(t, socketmode.EventTypeInteractive)
	vs := subEv.Data.(slack.InteractionCallback)
	if vs.Type != slack.InteractionTypeViewSubmission || vs.View.ID != opened.ID || vs.View.PrivateMetadata != ts ||
		vs.View.State.Values["reason"]["text"].Value != "too risky" {
		t.Errorf("view_submission = %+v state %+v", vs.View, vs.View.State)
	}
	// The ack can carry a response_action; the fake records it.
	if err := c.Ack(*subEv.Request, slack.NewErrorsViewSubmissionResponse(map[string]string{"reason": "say more"})); err != nil {
		t.Fatal(err)
	}
	ack, err := srv.WaitForAck(waitCtx(t), env.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	var resp slack.ViewSubmissionResponse
	if err := json.Unmarshal(ack.Payload, &resp); err != nil || resp.ResponseAction != slack.RAErrors || resp.Errors["reason"] != "say more" {
		t.Errorf("ack payload = %s (%v)", ack.Payload, err)
	}

	// Slash commands arrive as slash_commands envelopes.
	cmd := srv.SlashCommand(alice, channel, "/switchboard", "new session")
	cmdEnv, err := srv.SendSlashCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	got := c.next(t, socketmode.EventTypeSlashCommand)
	sc := got.Data.(slack.SlashCommand)
	if sc.Command != "/switchboard" || sc.Text != "new session" || sc.UserID != alice || sc.ChannelID != channel ||
		sc.ResponseURL != cmd.ResponseURL || sc.TriggerID != cmd.TriggerID || sc.TeamID != srv.TeamID() {
		t.Errorf("slash command = %+v", sc)
	}
	if err := c.Ack(*got.Request, map[string]any{"text": "Starting…"}); err != nil {
		t.Fatal(err)
	}
	if ack, err := srv.WaitForAck(waitCtx(t), cmdEnv.EnvelopeID); err != nil || !strings.Contains(string(ack.Payload), "Starting") {
		t.Errorf("command ack = %+v, %v", ack, err)
	}
}

func TestViewsOpenTriggerLifetime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	srv, api := newServer(t, slacktest.WithClock(clock))
	view := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Hi", false, false),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewDividerBlock()}}}

	_, err := api.OpenView("123.456.abcdef", view)
	slackErr(t, err, "invalid_trigger_id")

	old := srv.IssueTrigger()
	srv.AgeTrigger(old, slacktest.TriggerTTL+time.Millisecond)
	_, err = api.OpenView(old, view)
	slackErr(t, err, "expired_trigger_id")

	fresh := srv.IssueTrigger()
	srv.AgeTrigger(fresh, slacktest.TriggerTTL) // exactly 3 s old is still valid
	if _, err := api.OpenView(fresh, view); err != nil {
		t.Fatalf("3 s old trigger: %v", err)
	}

	// Invalid views are refused as invalid_arguments, before the trigger is used.
	long := view
	long.Title = slack.NewTextBlockObject(slack.PlainTextType, strings.Repeat("t", 25), false, false)
	trig := srv.IssueTrigger()
	_, err = api.OpenView(trig, long)
	se := slackErr(t, err, "invalid_arguments")
	if !strings.Contains(strings.Join(se.ResponseMetadata.Messages, " "), "/view/title/text") {
		t.Errorf("messages = %v", se.ResponseMetadata.Messages)
	}
	opened, err := api.OpenView(trig, view)
	if err != nil {
		t.Fatal(err)
	}

	// views.update by view_id, honouring hash.
	view.Title = slack.NewTextBlockObject(slack.PlainTextType, "Updated", false, false)
	_, err = api.UpdateView(view, "", "stale-hash", opened.ID)
	slackErr(t, err, "hash_conflict")
	upd, err := api.UpdateView(view, "", opened.Hash, opened.ID)
	if err != nil || upd.Title.Text != "Updated" || upd.Hash == opened.Hash {
		t.Errorf("views.update = %+v, %v", upd, err)
	}
	if vs := srv.Views(); len(vs) != 2 || vs[1].ID != opened.ID || vs[1].Updates != 1 || !strings.Contains(string(vs[1].Raw), "Updated") {
		t.Errorf("views = %+v", vs)
	}
}

func TestSocketModeReconnects(t *testing.T) {
	srv, api := newServer(t, slacktest.WithDisconnectGrace(time.Hour))
	c := runSocketClient(t, srv, api)
	if err := srv.WaitForConnections(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}

	// Slack asks for a refresh: the client opens a new connection via
	// apps.connections.open.
	srv.Disconnect("refresh_requested")
	if err := srv.WaitForConnections(waitCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("apps.connections.open"); n != 2 {
		t.Errorf("apps.connections.open calls = %d, want 2", n)
	}

	// A dropped socket (no close frame) also makes the client reconnect.
	srv.DropConnections()
	if err := srv.WaitForConnections(waitCtx(t), 3); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("apps.connections.open"); n != 3 {
		t.Errorf("apps.connections.open calls = %d, want 3", n)
	}

	// Events flow on the new connection.
	env, err := srv.SendEvent(srv.MessageEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: "still there?"}))
	if err != nil {
		t.Fatal(err)
	}
	if env.Conn != 3 {
		t.Errorf("sent on connection %d, want 3", env.Conn)
	}
	got := c.next(t, socketmode.EventTypeEventsAPI)
	if err := c.Ack(*got.Request); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitForAck(waitCtx(t), env.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if n := srv.ActiveConnections(); n != 1 {
		t.Errorf("active connections = %d, want 1", n)
	}
}

func TestSocketModeTicketsAndAuth(t *testing.T) {
	srv, api := newServer(t)
	_, wsURL, err := api.StartSocketModeContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wsURL, "ws://127.0.0.1:") {
		t.Errorf("url = %s", wsURL)
	}
	conn, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var hello map[string]any
	if err := conn.ReadJSON(&hello); err != nil || hello["type"] != "hello" {
		t.Fatalf("first message = %v, %v", hello, err)
	}
	// Tickets are single use.
	if _, _, err := websocket.DefaultDialer.Dial(wsURL, nil); err == nil {
		t.Error("reusing a ticket succeeded")
	}

	// No connection, no envelope.
	conn.Close()
	idle := slacktest.New(t)
	if _, err := idle.SendEvent(map[string]any{"type": "message"}); !errors.Is(err, slacktest.ErrNoConnection) {
		t.Errorf("SendEvent without a client = %v", err)
	}

	// A wrong app token is fatal for the slack-go client.
	bad := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken("xapp-wrong"))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	client := socketmode.New(bad)
	go func() {
		for {
			select {
			case <-client.Events:
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := client.RunContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Errorf("run with a wrong app token = %v, want invalid_auth", err)
	}
}

// BenchmarkSocketModeEventAck measures the round trip of an events_api
// envelope through a real slack-go client that acks on receipt, and reports
// the server-measured ack latency.
func BenchmarkSocketModeEventAck(b *testing.B) {
	srv := slacktest.New(b)
	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(srv.AppToken()))
	client := socketmode.New(api)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = client.RunContext(ctx)
	}()
	go func() {
		for {
			select {
			case ev := <-client.Events:
				if ev.Type == socketmode.EventTypeEventsAPI {
					_ = client.Ack(*ev.Request)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	wait, stop := context.WithTimeout(context.Background(), deadline)
	defer stop()
	if err := srv.WaitForConnections(wait, 1); err != nil {
		b.Fatal(err)
	}
	event := map[string]any{"type": "message", "channel": channel, "user": alice, "text": "bench", "ts": "1700000000.000100"}
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		env, err := srv.SendEvent(event)
		if err != nil {
			b.Fatal(err)
		}
		ack, err := srv.WaitForAck(wait, env.EnvelopeID)
		if err != nil {
			b.Fatal(err)
		}
		total += ack.Latency
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/ack")
}

// One app's envelopes go over all its open connections (several processes
// of the app each hold one), each envelope over one connection only, in
// turn; one may be sent over a chosen connection.
func TestSocketModeSpreadsEnvelopesOverConnections(t *testing.T) {
	srv, api := newServer(t)
	a := runSocketClient(t, srv, api)
	if err := srv.WaitForConnections(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	b := runSocketClient(t, srv, api)
	if err := srv.WaitForConnections(waitCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	if hello := b.next(t, socketmode.EventTypeHello); hello.Request.NumConnections != 2 {
		t.Errorf("the second connection's hello counts %d connections, want 2", hello.Request.NumConnections)
	}
	clients := map[int]*socketClient{1: a, 2: b}
	var on []int
	for i := range 4 {
		env, err := srv.SendEvent(srv.MessageEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: fmt.Sprintf("m%d", i)}))
		if err != nil {
			t.Fatal(err)
		}
		got := clients[env.Conn].next(t, socketmode.EventTypeEventsAPI)
		if err := clients[env.Conn].Ack(*got.Request); err != nil {
			t.Fatal(err)
		}
		ack, err := srv.WaitForAck(waitCtx(t), env.EnvelopeID)
		if err != nil || ack.Envelope.Conn != env.Conn {
			t.Fatalf("ack %+v, %v", ack, err)
		}
		on = append(on, env.Conn)
	}
	if fmt.Sprint(on) != "[1 2 1 2]" {
		t.Errorf("envelopes went over connections %v, want each in turn", on)
	}

	env, err := srv.SendEventOn(1, srv.MessageEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: "to a"}))
	if err != nil || env.Conn != 1 {
		t.Fatalf("sent on %d, %v; want connection 1", env.Conn, err)
	}
	a.next(t, socketmode.EventTypeEventsAPI)
	if _, err := srv.SendEventOn(7, srv.MessageEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: "nowhere"})); !errors.Is(err, slacktest.ErrNoConnection) {
		t.Errorf("sent on a connection that is not open: %v", err)
	}
}

// Slack keeps at most ten connections of one app open: the eleventh is
// told too_many_websockets, without a hello, and closed.
func TestSocketModeRefusesAnEleventhConnection(t *testing.T) {
	srv, api := newServer(t)
	dial := func() *websocket.Conn {
		t.Helper()
		_, wsURL, err := api.StartSocketModeContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conn, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	for range slacktest.MaxConnections {
		var hello map[string]any
		if err := dial().ReadJSON(&hello); err != nil || hello["type"] != "hello" {
			t.Fatalf("first message = %v, %v", hello, err)
		}
	}
	extra := dial()
	var msg map[string]any
	if err := extra.ReadJSON(&msg); err != nil || msg["type"] != "disconnect" || msg["reason"] != "too_many_websockets" {
		t.Fatalf("the eleventh connection was sent %v, %v", msg, err)
	}
	if _, _, err := extra.ReadMessage(); err == nil {
		t.Error("the eleventh connection stayed open")
	}
	if n, refused := srv.ActiveConnections(), srv.RefusedConnections(); n != slacktest.MaxConnections || refused != 1 {
		t.Errorf("%d open, %d refused; want %d and 1", n, refused, slacktest.MaxConnections)
	}
}
