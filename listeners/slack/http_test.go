package slack_test

// HTTP mode end to end: the listener's Handler on an httptest server on
// 127.0.0.1, requests signed as Slack signs them, the same fake Slack Web
// API, session manager and scripted model as the Socket Mode tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// httpRig is a rig whose listener runs in http mode behind an httptest
// server; Slack's side is played by signed requests.
type httpRig struct {
	*rig
	l    *slack.Listener
	url  string // the gateway's base URL
	logs *syncBuffer
}

// newHTTPRig starts the listener in http mode and waits until its handler
// serves.
func newHTTPRig(t *testing.T, tune func(*slack.Config)) *httpRig {
	t.Helper()
	r := newHTTPRigStopped(t, tune)
	r.run()
	return r
}

// newHTTPRigStopped builds the listener and serves its handler, without
// calling Run.
func newHTTPRigStopped(t *testing.T, tune func(*slack.Config)) *httpRig {
	t.Helper()
	logs := &syncBuffer{}
	var w io.Writer = logs
	if testing.Verbose() {
		w = io.MultiWriter(logs, testWriter{t})
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fake := slacktest.New(t, slacktest.WithUsers(alice, bob))
	gw := sessionstest.New(t, "../../guides", log)
	cfg := slack.Config{
		Mode: "http", BotToken: fake.BotToken(), SigningSecret: signingSecret,
		APIURL: fake.APIURL(), UpdateInterval: 20 * time.Millisecond,
	}
	if tune != nil {
		tune(&cfg)
	}
	l, err := slack.New(cfg, gw.Manager, log)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/slack/", l.Handler()) // as the gateway mounts it
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &httpRig{rig: &rig{t: t, fake: fake, gw: gw}, l: l, url: srv.URL, logs: logs}
}

// run starts Run and waits until the handler stops answering 503.
func (r *httpRig) run() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.l.Run(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("Run: %v", err)
		}
	})
	r.eventually("the handler serves", func() bool {
		code, _, _ := r.post(slack.EventsPath, slacktest.URLVerificationBody("ready?"), nil)
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			r.t.Fatalf("while starting: %d, want 503 then 200", code)
		}
		return code == http.StatusOK
	})
}

// post sends body to path signed with the signing secret now; edit may
// change the request (forge it, mark it a retry) before it is sent.
func (r *httpRig) post(path string, body []byte, edit func(*http.Request)) (int, http.Header, string) {
	r.t.Helper()
	req, err := slacktest.SignedRequest(r.url+path, signingSecret, body, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	return r.do(req)
}

func (r *httpRig) do(req *http.Request) (int, http.Header, string) {
	r.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// event posts an Events API callback with inner event ev and checks it
// is acknowledged with 200; it returns the body sent.
func (r *httpRig) event(ev map[string]any) []byte {
	r.t.Helper()
	body, err := r.fake.EventCallback(ev)
	if err != nil {
		r.t.Fatal(err)
	}
	if code, _, resp := r.post(slack.EventsPath, body, nil); code != http.StatusOK {
		r.t.Fatalf("event: %d %q, want 200", code, resp)
	}
	return body
}

// clickHTTP posts a block_actions click to the interactivity URL.
func (r *httpRig) clickHTTP(user, channel, ts, actionID string) {
	r.t.Helper()
	payload, err := r.fake.BlockActions(slacktest.BlockActionsSpec{User: user, Channel: channel, MessageTS: ts, Actions: []slacktest.Action{{ActionID: actionID}}})
	if err != nil {
		r.t.Fatal(err)
	}
	form, err := slacktest.InteractionBody(payload)
	if err != nil {
		r.t.Fatal(err)
	}
	if code, _, resp := r.post(slack.InteractivityPath, form, nil); code != http.StatusOK || resp != "" {
		r.t.Fatalf("click: %d %q, want an empty 200", code, resp)
	}
}

// syncBuffer is a log sink tests read while the listener writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A signed mention is acknowledged and answered in a thread under it, by
// the same flow as over Socket Mode.
func TestHTTPMentionIsAnsweredInAThread(t *testing.T) {
	r := newHTTPRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"It is ", "**noon** ", "in Tokyo."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "what time is it in Tokyo?"})
	r.event(ev)
	root := ev["ts"].(string)

	r.eventually("the answer in the thread", func() bool {
		return strings.Contains(allText(r.botReplies("C1", root)), "It is **noon** in Tokyo.") // streamed natively
	})
	if top := r.botReplies("C1", ""); len(top) != 1 || top[0].ThreadTS != root {
		t.Fatalf("the answer is not in the thread: %+v", top)
	}
	req := r.gw.LLM.Requests()
	if len(req) != 1 {
		t.Fatalf("%d model calls", len(req))
	}
	if got := openaitest.Text(req[0].Messages[len(req[0].Messages)-1].Content); got != "what time is it in Tokyo?" {
		t.Fatalf("the model was asked %q", got)
	}
}

// A request whose signature does not hold, or that is older than five
// minutes, is refused with 401 and nothing of it is acted on; the log says
// why, and nothing of the body or the secret.
func TestHTTPUnsignedRequestsAreRefused(t *testing.T) {
	r := newHTTPRig(t, nil)
	forged := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "forged-marker do something"})
	root := forged["ts"].(string)
	body, err := r.fake.EventCallback(forged)
	if err != nil {
		t.Fatal(err)
	}
	resign := func(secret string, at time.Time) func(*http.Request) {
		return func(req *http.Request) {
			sig, ts := slacktest.Sign(secret, at, body)
			req.Header.Set("X-Slack-Signature", sig)
			req.Header.Set("X-Slack-Request-Timestamp", ts)
		}
	}
	cases := []struct {
		name, reason string
		edit         func(*http.Request)
	}{
		{"wrong secret", "signature does not match", resign("not-the-secret", time.Now())},
		{"six minutes old", "timestamp more than five minutes from now", resign(signingSecret, time.Now().Add(-6*time.Minute))},
		{"from the future", "timestamp more than five minutes from now", resign(signingSecret, time.Now().Add(6*time.Minute))},
		{"no signature", "no signature or timestamp", func(req *http.Request) { req.Header.Del("X-Slack-Signature") }},
		{"malformed signature", "signature does not match", func(req *http.Request) { req.Header.Set("X-Slack-Signature", "v0=zz") }},
		{"malformed timestamp", "malformed timestamp", func(req *http.Request) { req.Header.Set("X-Slack-Request-Timestamp", "yesterday") }},
		{"tampered body", "signature does not match", func(req *http.Request) {
			b := bytes.Replace(body, []byte("do something"), []byte("do something else"), 1)
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}},
	}
	for _, path := range []string{slack.EventsPath, slack.InteractivityPath, slack.CommandsPath} {
		for _, c := range cases {
			code, _, resp := r.post(path, body, c.edit)
			if code != http.StatusUnauthorized || resp != "" {
				t.Errorf("%s %s: %d %q, want 401 with no body", path, c.name, code, resp)
			}
			if logs := r.logs.String(); !strings.Contains(logs, `reason="`+c.reason+`"`) {
				t.Errorf("%s %s: the log does not say %q:\n%s", path, c.name, c.reason, logs)
			}
		}
	}

	// A genuine message in the same thread: it is queued on the same
	// worker as the forged one would have been, after it, and is the only
	// one the model sees.
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Genuine."}})
	r.event(r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "a genuine question"}))
	r.eventually("the genuine answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Genuine.") })
	req := r.gw.LLM.Requests()
	if len(req) != 1 {
		t.Fatalf("%d model calls, want 1", len(req))
	}
	for _, m := range req[0].Messages {
		if strings.Contains(openaitest.Text(m.Content), "forged-marker") {
			t.Fatalf("the forged message reached the model: %+v", req[0].Messages)
		}
	}
	if logs := r.logs.String(); strings.Contains(logs, "forged-marker") || strings.Contains(logs, signingSecret) {
		t.Fatalf("the log holds a refused body or the secret:\n%s", logs)
	}
}

// Slack checks the events URL with a challenge, and gets it back.
func TestHTTPURLVerification(t *testing.T) {
	r := newHTTPRig(t, nil)
	code, h, resp := r.post(slack.EventsPath, slacktest.URLVerificationBody("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"), nil)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("url_verification: %d %s %q", code, h.Get("Content-Type"), resp)
	}
	var got struct{ Challenge string }
	if err := json.Unmarshal([]byte(resp), &got); err != nil || got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("url_verification answered %q (%v)", resp, err)
	}
}

// Slack redelivers an event it thinks was lost (X-Slack-Retry-Num): the
// redelivery is acknowledged, and the message answered once.
func TestHTTPRetryIsAnsweredOnce(t *testing.T) {
	r := newHTTPRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Once."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hello"})
	body := r.event(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Once.") })

	for attempt := 1; attempt <= 2; attempt++ {
		code, _, resp := r.post(slack.EventsPath, body, func(req *http.Request) { slacktest.MarkRetry(req, attempt, "http_timeout") })
		if code != http.StatusOK {
			t.Fatalf("retry %d: %d %q, want 200", attempt, code, resp)
		}
	}
	if !strings.Contains(r.logs.String(), "event redelivered") {
		t.Errorf("the retry is not logged:\n%s", r.logs.String())
	}

	// A later message in the thread: queued after the retries (each was
	// queued before its 200), on the same worker, so they were handled by
	// the time it is answered.
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Next."}})
	r.event(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "and now?"}))
	r.eventually("the next answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Next.") })
	if n := len(r.gw.LLM.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2 (hello once, then the next message)", n)
	}
	if text := allText(r.botReplies("C1", root)); strings.Count(text, "Once.") != 1 {
		t.Fatalf("answered twice:\n%s", text)
	}
}

// Approval buttons work over the interactivity URL: a click from someone
// who may not approve is refused privately, the owner's approves, and the
// card says so without buttons.
func TestHTTPApprovalByButton(t *testing.T) {
	r := newHTTPRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`}}},
		openaitest.Reply{Text: []string{"It is late in Tokyo."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time in Tokyo?"})
	r.event(ev)
	root := ev["ts"].(string)
	var card slacktest.Message
	r.eventually("the approval card", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })

	r.clickHTTP(bob.ID, "C1", card.TS, "sb_approve")
	r.eventually("Bob is told he may not approve", func() bool {
		for _, e := range r.fake.Ephemerals("C1") {
			if e.User == bob.ID {
				return true
			}
		}
		return false
	})
	if m, _ := r.fake.Message("C1", card.TS); !strings.Contains(string(m.Blocks), `"sb_approve"`) {
		t.Fatalf("the card lost its buttons after a refused click: %s", m.Blocks)
	}

	r.clickHTTP(alice.ID, "C1", card.TS, "sb_approve")
	r.eventually("the answer after approval", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "It is late in Tokyo.") })
	m, _ := r.fake.Message("C1", card.TS)
	if strings.Contains(string(m.Blocks), `"actions"`) || !strings.Contains(string(m.Blocks)+m.Text, "Approved by") || !strings.Contains(string(m.Blocks)+m.Text, "Alice") {
		t.Fatalf("the card after approval: %s / %q, want no buttons and who approved", m.Blocks, m.Text)
	}
}

// /switchboard over the commands URL is answered in the response, as JSON,
// to the caller alone.
func TestHTTPSlashCommand(t *testing.T) {
	r := newHTTPRig(t, nil)
	code, h, resp := r.post(slack.CommandsPath, r.fake.SlashCommand(alice.ID, "C1", "", "help").Body(), nil)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("command: %d %s %q", code, h.Get("Content-Type"), resp)
	}
	var msg struct {
		ResponseType string `json:"response_type"`
		Text         string `json:"text"`
	}
	if err := json.Unmarshal([]byte(resp), &msg); err != nil || msg.ResponseType != "ephemeral" || msg.Text == "" {
		t.Fatalf("command answered %q (%v)", resp, err)
	}
}

// A body over 1 MiB is refused with 413, signed or not, and not acted on.
func TestHTTPOversizedBody(t *testing.T) {
	r := newHTTPRig(t, nil)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hi " + strings.Repeat("x", 1<<20)})
	body, err := r.fake.EventCallback(ev)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, resp := r.post(slack.EventsPath, body, nil); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized event: %d %q, want 413", code, resp)
	}
	if code, _, _ := r.post(slack.InteractivityPath, append([]byte("payload="), bytes.Repeat([]byte("x"), 1<<20)...), nil); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized interaction: %d, want 413", code)
	}
	// A small message in the same thread is answered, and is all the model
	// saw.
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Small."}})
	root := ev["ts"].(string)
	r.event(r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "small"}))
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Small.") })
	if n := len(r.gw.LLM.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

// Paths and methods: only POST to the three URLs is served.
func TestHTTPRoutes(t *testing.T) {
	r := newHTTPRig(t, nil)
	for _, path := range []string{"/slack/", "/slack/event", "/slack/events/x", "/slack/oauth"} {
		if code, _, _ := r.post(path, slacktest.URLVerificationBody("c"), nil); code != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", path, code)
		}
	}
	for _, path := range []string{slack.EventsPath, slack.InteractivityPath, slack.CommandsPath} {
		req, _ := http.NewRequest(http.MethodGet, r.url+path, nil)
		if code, h, _ := r.do(req); code != http.StatusMethodNotAllowed || h.Get("Allow") != http.MethodPost {
			t.Errorf("GET %s: %d Allow=%q, want 405 and Allow: POST", path, code, h.Get("Allow"))
		}
	}
}

// Before Run has connected, signed requests get 503 with Retry-After: 1
// (Slack sends them again) and nothing is acted on; unsigned ones are
// still 401. Once Run is up, the same delivery is answered.
func TestHTTPNotReadyBeforeRun(t *testing.T) {
	r := newHTTPRigStopped(t, nil)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "early"})
	body, err := r.fake.EventCallback(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		body []byte
	}{
		{slack.EventsPath, body},
		{slack.EventsPath, slacktest.URLVerificationBody("c")},
		{slack.CommandsPath, r.fake.SlashCommand(alice.ID, "C1", "", "").Body()},
	} {
		code, h, _ := r.post(c.path, c.body, nil)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
			t.Errorf("%s before Run: %d Retry-After=%q, want 503 and 1", c.path, code, h.Get("Retry-After"))
		}
	}
	forged := func(req *http.Request) { req.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("0", 64)) }
	if code, _, _ := r.post(slack.EventsPath, body, forged); code != http.StatusUnauthorized {
		t.Errorf("forged before Run: %d, want 401", code)
	}

	r.run()
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Now."}})
	if code, _, resp := r.post(slack.EventsPath, body, func(req *http.Request) { slacktest.MarkRetry(req, 1, "http_error") }); code != http.StatusOK {
		t.Fatalf("the redelivery after Run: %d %q", code, resp)
	}
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Now.") })
	if n := len(r.gw.LLM.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

// A signed click sent again within Slack's five minutes, byte for byte (a
// replay by whoever saw the request), is acknowledged and taken once.
func TestHTTPReplayedClickIsTakenOnce(t *testing.T) {
	r := newHTTPRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: `{"title":"Pay","buttons":[{"label":"Pay 100","value":"pay"}]}`}}},
		openaitest.Reply{Text: []string{"Shown."}},
		openaitest.Reply{Text: []string{"Paid."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "bill"})
	r.event(ev)
	root := ev["ts"].(string)
	var card slacktest.Message
	r.eventually("the card", func() (ok bool) { card, ok = r.cardMessage("C1", root, "sb_btn_0"); return ok })
	r.eventually("shown", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Shown.") })
	payload, err := r.fake.BlockActions(slacktest.BlockActionsSpec{User: alice.ID, Channel: "C1", MessageTS: card.TS, Actions: []slacktest.Action{{ActionID: "sb_btn_0"}}})
	if err != nil {
		t.Fatal(err)
	}
	form, err := slacktest.InteractionBody(payload)
	if err != nil {
		t.Fatal(err)
	}
	req, err := slacktest.SignedRequest(r.url+slack.InteractivityPath, signingSecret, form, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	replay := req.Clone(context.Background())
	replay.Body = io.NopCloser(bytes.NewReader(form))
	if code, _, _ := r.do(req); code != http.StatusOK {
		t.Fatalf("the click: %d", code)
	}
	r.eventually("paid", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Paid.") })
	asked := len(r.gw.LLM.Requests())
	if code, _, _ := r.do(replay); code != http.StatusOK {
		t.Fatalf("the replay: %d, want it acknowledged", code)
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Thanks."}}, openaitest.Reply{Text: []string{"Extra."}})
	r.event(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "done"}))
	r.eventually("the model asked about the message", func() bool { return r.lastUserText() == "done" })
	if n := len(r.gw.LLM.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times after the replay, want once (the message)", n-asked)
	}
}
