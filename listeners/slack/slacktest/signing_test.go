package slacktest_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// verify runs slack-go's verifier on req the way an HTTP handler would.
func verify(req *http.Request) ([]byte, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	sv, err := slack.NewSecretsVerifier(req.Header, secret)
	if err != nil {
		return body, err
	}
	if _, err := sv.Write(body); err != nil {
		return body, err
	}
	return body, sv.Ensure()
}

func TestSignedRequestVerifies(t *testing.T) {
	srv := slacktest.New(t)
	body, err := srv.EventCallback(srv.AppMentionEvent(slacktest.UserMessage{Channel: channel, User: alice, Text: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	req, err := slacktest.SignedRequest("http://gateway.invalid/slack/events", secret, body, now)
	if err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Content-Type") != "application/json" || req.Header.Get("X-Slack-Request-Timestamp") == "" ||
		!strings.HasPrefix(req.Header.Get("X-Slack-Signature"), "v0=") {
		t.Errorf("headers = %v", req.Header)
	}
	if _, err := verify(req); err != nil {
		t.Errorf("genuine request: %v", err)
	}

	forged, _ := slacktest.SignedRequest("http://gateway.invalid/slack/events", "not-the-secret", body, now)
	if _, err := verify(forged); !errors.Is(err, slack.ErrInvalidSignature) {
		t.Errorf("forged signature: %v, want ErrInvalidSignature", err)
	}

	stale, _ := slacktest.SignedRequest("http://gateway.invalid/slack/events", secret, body, now.Add(-6*time.Minute))
	if _, err := verify(stale); !errors.Is(err, slack.ErrExpiredTimestamp) {
		t.Errorf("6-minute-old request: %v, want ErrExpiredTimestamp", err)
	}

	tampered, _ := slacktest.SignedRequest("http://gateway.invalid/slack/events", secret, body, now)
	tampered.Body = io.NopCloser(strings.NewReader(strings.Replace(string(body), "hi", "rm -rf", 1)))
	if _, err := verify(tampered); !errors.Is(err, slack.ErrInvalidSignature) {
		t.Errorf("tampered body: %v, want ErrInvalidSignature", err)
	}

	// The signature is Slack's documented v0 scheme.
	sig, ts := slacktest.Sign(secret, time.Unix(1531420618, 0), []byte("token=xyz"))
	if ts != "1531420618" || len(sig) != len("v0=")+64 {
		t.Errorf("Sign = %s, %s", sig, ts)
	}
}

// The HTTP-mode bodies decode with slack-go's own request parsers, so a
// gateway's /slack/events, /slack/interactivity and /slack/commands handlers
// can be tested with them.
func TestHTTPModeBodiesParse(t *testing.T) {
	srv, api := newServer(t)
	type seen struct {
		event   slackevents.EventsAPIEvent
		action  slack.InteractionCallback
		command slack.SlashCommand
	}
	got := make(chan seen, 1)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var s seen
		switch r.URL.Path {
		case "/slack/events":
			s.event, err = slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
			if err == nil && s.event.Type == slackevents.URLVerification {
				var ch slackevents.ChallengeResponse
				_ = json.Unmarshal(body, &ch)
				_, _ = w.Write([]byte(ch.Challenge))
			}
		case "/slack/interactivity":
			s.action, err = slack.InteractionCallbackParse(r)
		case "/slack/commands":
			s.command, err = slack.SlashCommandParse(r)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- s
	}))
	defer gateway.Close()

	post := func(path string, body []byte, ts time.Time) *http.Response {
		t.Helper()
		req, err := slacktest.SignedRequest(gateway.URL+path, secret, body, ts)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	ev, _ := srv.EventCallback(srv.MessageEvent(slacktest.UserMessage{Channel: dm, User: alice, Text: "hello"}))
	if resp := post("/slack/events", ev, time.Now()); resp.StatusCode != http.StatusOK {
		t.Fatalf("event: %s", resp.Status)
	}
	s := <-got
	if m, ok := s.event.InnerEvent.Data.(*slackevents.MessageEvent); !ok || m.Text != "hello" || m.ChannelType != "im" {
		t.Errorf("event = %+v", s.event.InnerEvent)
	}
	if resp := post("/slack/events", slacktest.URLVerificationBody("c-123"), time.Now()); resp.StatusCode != http.StatusOK {
		t.Fatalf("url_verification: %s", resp.Status)
	}
	<-got

	_, ts, err := api.PostMessage(channel, slack.MsgOptionText("ok?", false), slack.MsgOptionBlocks(slack.NewActionBlock("b", button("yes", "Yes"))))
	if err != nil {
		t.Fatal(err)
	}
	click, err := srv.BlockActions(slacktest.BlockActionsSpec{User: alice, Channel: channel, MessageTS: ts, Actions: []slacktest.Action{{ActionID: "yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	form, err := slacktest.InteractionBody(click)
	if err != nil {
		t.Fatal(err)
	}
	if resp := post("/slack/interactivity", form, time.Now()); resp.StatusCode != http.StatusOK {
		t.Fatalf("interactivity: %s", resp.Status)
	}
	s = <-got
	if s.action.Type != slack.InteractionTypeBlockActions || s.action.ActionCallback.BlockActions[0].ActionID != "yes" {
		t.Errorf("interaction = %+v", s.action)
	}

	cmd := srv.SlashCommand(alice, channel, "", "help")
	if resp := post("/slack/commands", cmd.Body(), time.Now()); resp.StatusCode != http.StatusOK {
		t.Fatalf("command: %s", resp.Status)
	}
	s = <-got
	if s.command.Command != "/switchboard" || s.command.Text != "help" || s.command.ResponseURL != cmd.ResponseURL {
		t.Errorf("command = %+v", s.command)
	}

	// Forged and replayed requests are turned away by the verifier.
	if resp := post("/slack/commands", []byte(strings.Replace(string(cmd.Body()), "help", "delete", 1)+"&x=1"), time.Now().Add(-6*time.Minute)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stale command: %s", resp.Status)
	}
}
