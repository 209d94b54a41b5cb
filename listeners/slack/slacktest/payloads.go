package slacktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// VerificationToken is the deprecated "token" field Slack still puts in
// payloads; apps should verify signatures instead.
const VerificationToken = "fakeverificationtoken0000"

// UserMessage is a message a person posts in Slack.
type UserMessage struct {
	Channel  string
	User     string
	Text     string
	ThreadTS string // reply in this thread when set
	TS       string // assigned by PostUserMessage when empty
	// Files are shared with the message: its message event has the
	// subtype file_share, and both its events carry the file objects.
	Files []UserFile
}

// Mention is the bot's mention markup, "<@U…>".
func (s *Server) Mention() string { return "<@" + s.cfg.botUserID + ">" }

// PostUserMessage stores a person's message in the workspace (as Slack does
// before it sends the event) and returns it with its ts. A message whose TS
// is already stored is left as it is, so the app_mention and message events
// of one message can both be built from it.
func (s *Server) PostUserMessage(m UserMessage) UserMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, _ := s.channelLocked(m.Channel)
	if ch.ID == "" {
		s.channels[m.Channel] = Channel{ID: m.Channel, Name: strings.ToLower(m.Channel)}
	}
	if m.TS == "" {
		m.TS = s.newTSLocked()
	} else {
		s.noteTSLocked(m.TS)
	}
	if stored, ok := s.messages[m.Channel][m.TS]; ok {
		m.ThreadTS = stored.ThreadTS
		return m
	}
	s.ensureUserLocked(m.User)
	msg := &Message{Channel: m.Channel, TS: m.TS, ThreadTS: m.ThreadTS, User: m.User, Text: m.Text,
		Blocks: richTextBlocks(m.Text), Files: s.addUserFilesLocked(m.User, m.Channel, m.Files)}
	s.storeMessageLocked(msg, "user")
	if msg.IsReply() {
		m.ThreadTS = msg.ThreadTS
	}
	return m
}

// MessageEvent posts m (see PostUserMessage) and returns the Events API
// "message" event for it, with channel_type "im" for D… channels.
func (s *Server) MessageEvent(m UserMessage) map[string]any {
	m = s.PostUserMessage(m)
	ev := s.userEvent("message", m)
	s.mu.Lock()
	ch, _ := s.channelLocked(m.Channel)
	s.mu.Unlock()
	ev["channel_type"] = ch.Type()
	if ev["files"] != nil {
		ev["subtype"], ev["upload"], ev["display_as_bot"] = "file_share", false, false
	}
	return ev
}

// AppMentionEvent posts m (see PostUserMessage), with the bot's mention put
// in front of the text when it is not in it already, and returns the Events
// API "app_mention" event for it.
func (s *Server) AppMentionEvent(m UserMessage) map[string]any {
	if !strings.Contains(m.Text, s.Mention()) {
		m.Text = strings.TrimSpace(s.Mention() + " " + m.Text)
	}
	m = s.PostUserMessage(m)
	return s.userEvent("app_mention", m)
}

func (s *Server) userEvent(typ string, m UserMessage) map[string]any {
	ev := map[string]any{
		"type":          typ,
		"user":          m.User,
		"text":          m.Text,
		"ts":            m.TS,
		"event_ts":      m.TS,
		"channel":       m.Channel,
		"team":          s.cfg.teamID,
		"client_msg_id": newEnvelopeID(),
		"blocks":        richTextBlocks(m.Text),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		ev["thread_ts"] = m.ThreadTS
		if parent, ok := s.messages[m.Channel][m.ThreadTS]; ok {
			ev["parent_user_id"] = parent.User
		}
	}
	if files := s.filesOfLocked(m.Channel, m.TS); len(files) > 0 {
		ev["files"] = files
	}
	return ev
}

var userMention = regexp.MustCompile(`<@([UW][A-Z0-9]+)(?:\|[^>]*)?>`)

// richTextBlocks renders text as the rich_text block Slack attaches to
// messages people type, with user mentions as user elements.
func richTextBlocks(text string) json.RawMessage {
	var elements []any
	last := 0
	for _, loc := range userMention.FindAllStringSubmatchIndex(text, -1) {
		if loc[0] > last {
			elements = append(elements, map[string]any{"type": "text", "text": text[last:loc[0]]})
		}
		elements = append(elements, map[string]any{"type": "user", "user_id": text[loc[2]:loc[3]]})
		last = loc[1]
	}
	if last < len(text) {
		elements = append(elements, map[string]any{"type": "text", "text": text[last:]})
	}
	raw, _ := json.Marshal([]any{map[string]any{
		"type":     "rich_text",
		"block_id": randomHex(2),
		"elements": []any{map[string]any{"type": "rich_text_section", "elements": elements}},
	}})
	return raw
}

// AssistantThreadStartedEvent returns the "assistant_thread_started" event
// Slack sends when user opens the app's assistant container in the DM
// channel, and the thread_ts of the new thread. contextChannel is the
// channel the user was viewing ("" for none).
func (s *Server) AssistantThreadStartedEvent(user, channel, contextChannel string) (map[string]any, string) {
	s.mu.Lock()
	ts := s.newTSLocked()
	s.channelLocked(channel)
	s.ensureUserLocked(user)
	s.mu.Unlock()
	ctx := map[string]any{}
	if contextChannel != "" {
		ctx = map[string]any{"channel_id": contextChannel, "team_id": s.cfg.teamID, "enterprise_id": nil}
	}
	return map[string]any{
		"type": "assistant_thread_started",
		"assistant_thread": map[string]any{
			"user_id":    user,
			"context":    ctx,
			"channel_id": channel,
			"thread_ts":  ts,
		},
		"event_ts": ts,
	}, ts
}

// EventCallback wraps an inner event in the event_callback payload of the
// Events API, with a fresh event_id: the body Slack POSTs to an events URL
// and the payload of an events_api envelope.
func (s *Server) EventCallback(event any) (json.RawMessage, error) {
	inner, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(inner, &head)
	s.mu.Lock()
	now := s.now()
	eventID := "Ev" + strings.ToUpper(randomHex(5))
	s.mu.Unlock()
	return json.Marshal(map[string]any{
		"token":      VerificationToken,
		"team_id":    s.cfg.teamID,
		"api_app_id": s.cfg.appID,
		"event":      json.RawMessage(inner),
		"type":       "event_callback",
		"event_id":   eventID,
		"event_time": now.Unix(),
		"authorizations": []any{map[string]any{
			"enterprise_id": nil, "team_id": s.cfg.teamID, "user_id": s.cfg.botUserID,
			"is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
		"event_context":         "4-" + head.Type + "-" + s.cfg.teamID + "-" + randomHex(4),
	})
}

// URLVerificationBody is the url_verification challenge Slack POSTs when an
// events URL is configured.
func URLVerificationBody(challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"token": VerificationToken, "challenge": challenge, "type": "url_verification"})
	return b
}

// InteractionBody is the form body Slack POSTs to an interactivity URL:
// payload=<the JSON payload>.
func InteractionBody(payload any) ([]byte, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	return []byte(url.Values{"payload": {string(raw)}}.Encode()), nil
}

// SlashCommand is the payload of a slash command: form fields over HTTP,
// a JSON object in a slash_commands envelope.
type SlashCommand struct {
	Token               string `json:"token"`
	TeamID              string `json:"team_id"`
	TeamDomain          string `json:"team_domain"`
	ChannelID           string `json:"channel_id"`
	ChannelName         string `json:"channel_name"`
	UserID              string `json:"user_id"`
	UserName            string `json:"user_name"`
	Command             string `json:"command"`
	Text                string `json:"text"`
	APIAppID            string `json:"api_app_id"`
	IsEnterpriseInstall string `json:"is_enterprise_install"`
	ResponseURL         string `json:"response_url"`
	TriggerID           string `json:"trigger_id"`
}

// Form is the command as the form fields Slack POSTs to a command URL.
func (c SlashCommand) Form() url.Values {
	return url.Values{
		"token": {c.Token}, "team_id": {c.TeamID}, "team_domain": {c.TeamDomain},
		"channel_id": {c.ChannelID}, "channel_name": {c.ChannelName},
		"user_id": {c.UserID}, "user_name": {c.UserName},
		"command": {c.Command}, "text": {c.Text}, "api_app_id": {c.APIAppID},
		"is_enterprise_install": {c.IsEnterpriseInstall},
		"response_url":          {c.ResponseURL}, "trigger_id": {c.TriggerID},
	}
}

// Body is Form encoded, the body of the HTTP request.
func (c SlashCommand) Body() []byte { return []byte(c.Form().Encode()) }

// SlashCommand builds the payload of user typing command (default
// "/switchboard") with text in channel, with a fresh trigger_id and a
// response_url served by the fake (see ResponseURLPosts).
func (s *Server) SlashCommand(user, channel, command, text string) SlashCommand {
	if command == "" {
		command = "/switchboard"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureUserLocked(user)
	ch, _ := s.channelLocked(channel)
	name := ch.Name
	if ch.Type() == "im" {
		name = "directmessage"
	}
	return SlashCommand{
		Token: VerificationToken, TeamID: s.cfg.teamID, TeamDomain: s.cfg.host,
		ChannelID: channel, ChannelName: name, UserID: user, UserName: s.userNameLocked(user),
		Command: command, Text: text, APIAppID: s.cfg.appID, IsEnterpriseInstall: "false",
		ResponseURL: s.newResponseURLLocked(responseTarget{channel: channel, user: user}),
		TriggerID:   s.issueTriggerLocked(),
	}
}

func (s *Server) userNameLocked(id string) string {
	if u, ok := s.users[id]; ok && u.Name != "" {
		return u.Name
	}
	return strings.ToLower(id)
}

func (s *Server) userRefLocked(id string) map[string]any {
	return map[string]any{"id": id, "username": s.userNameLocked(id), "name": s.userNameLocked(id), "team_id": s.cfg.teamID}
}

func (s *Server) teamRef() map[string]any {
	return map[string]any{"id": s.cfg.teamID, "domain": s.cfg.host}
}

// Action is one action of a block_actions interaction. Fields left empty
// are taken from the element with ActionID in the message or view, the way
// Slack fills them.
type Action struct {
	ActionID      string
	BlockID       string // narrows the search when several blocks reuse ActionID
	Value         string // overrides the button's value
	SelectedValue string // static_select, overflow, radio_buttons: the chosen option's value
}

// BlockActionsSpec describes a user clicking or choosing in a message (or
// in a modal, with ViewID).
type BlockActionsSpec struct {
	User      string
	Channel   string // with MessageTS: the message the actions are on
	MessageTS string
	ViewID    string // instead of Channel/MessageTS: the modal the actions are in
	Actions   []Action
}

// BlockActions builds the block_actions payload Slack sends when the user
// acts on elements of a message the bot posted (or of a modal), with a
// fresh trigger_id and, for messages, a response_url bound to the message.
// Each action must exist in the stored message or view, and a selected
// option among the element's options, as Slack can only send what was
// shown; otherwise it returns an error.
func (s *Server) BlockActions(spec BlockActionsSpec) (map[string]any, error) {
	if len(spec.Actions) == 0 {
		return nil, errors.New("slacktest: BlockActions needs at least one action")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureUserLocked(spec.User)
	var blocks []any
	payload := map[string]any{
		"type": "block_actions", "user": s.userRefLocked(spec.User), "api_app_id": s.cfg.appID,
		"token": VerificationToken, "team": s.teamRef(), "enterprise": nil, "is_enterprise_install": false,
		"state": map[string]any{"values": map[string]any{}},
	}
	if spec.ViewID != "" {
		v, ok := s.views[spec.ViewID]
		if !ok {
			return nil, fmt.Errorf("slacktest: no view %s", spec.ViewID)
		}
		var view struct {
			Blocks []any `json:"blocks"`
		}
		_ = json.Unmarshal(v.Raw, &view)
		blocks = view.Blocks
		payload["container"] = map[string]any{"type": "view", "view_id": v.ID}
		payload["view"] = s.viewJSON(v, nil)
	} else {
		m, ok := s.messages[spec.Channel][spec.MessageTS]
		if !ok || m.Deleted {
			return nil, fmt.Errorf("slacktest: no message %s in %s", spec.MessageTS, spec.Channel)
		}
		_ = json.Unmarshal(m.Blocks, &blocks)
		container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": false}
		if m.ThreadTS != "" {
			container["thread_ts"] = m.ThreadTS
		}
		ch, _ := s.channelLocked(m.Channel)
		payload["container"] = container
		payload["channel"] = map[string]any{"id": ch.ID, "name": ch.Name}
		payload["message"] = s.messageJSON(m)
		payload["response_url"] = s.newResponseURLLocked(responseTarget{channel: m.Channel, user: spec.User, messageTS: m.TS})
	}
	actionTS := s.newTSLocked()
	var actions []any
	for _, a := range spec.Actions {
		blockID, el, ok := findElement(blocks, a.ActionID, a.BlockID)
		if !ok {
			return nil, fmt.Errorf("slacktest: no element with action_id %q (block_id %q) to act on", a.ActionID, a.BlockID)
		}
		typ, _ := el["type"].(string)
		act := map[string]any{"action_id": a.ActionID, "block_id": blockID, "type": typ, "action_ts": actionTS}
		switch typ {
		case "button", "workflow_button":
			act["text"] = el["text"]
			act["value"] = el["value"]
			if a.Value != "" {
				act["value"] = a.Value
			}
			if st, ok := el["style"]; ok {
				act["style"] = st
			}
		case "static_select", "overflow", "radio_buttons", "multi_static_select", "checkboxes":
			opt, ok := findOption(el, a.SelectedValue)
			if !ok {
				return nil, fmt.Errorf("slacktest: element %q has no option with value %q", a.ActionID, a.SelectedValue)
			}
			if strings.HasPrefix(typ, "multi_") || typ == "checkboxes" {
				act["selected_options"] = []any{opt}
			} else {
				act["selected_option"] = opt
			}
			if ph, ok := el["placeholder"]; ok {
				act["placeholder"] = ph
			}
		default:
			if a.Value != "" {
				act["value"] = a.Value
			}
		}
		actions = append(actions, act)
	}
	payload["actions"] = actions
	payload["trigger_id"] = s.issueTriggerLocked()
	return payload, nil
}

// findElement finds the interactive element with actionID (in the block
// with blockID, when given) among blocks' accessories, elements and input
// elements.
func findElement(blocks []any, actionID, blockID string) (string, map[string]any, bool) {
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		id, _ := bm["block_id"].(string)
		if blockID != "" && id != blockID {
			continue
		}
		var candidates []any
		if acc, ok := bm["accessory"]; ok {
			candidates = append(candidates, acc)
		}
		if el, ok := bm["element"]; ok {
			candidates = append(candidates, el)
		}
		if els, ok := bm["elements"].([]any); ok {
			candidates = append(candidates, els...)
		}
		for _, c := range candidates {
			if cm, ok := c.(map[string]any); ok && cm["action_id"] == actionID {
				return id, cm, true
			}
		}
	}
	return "", nil, false
}

// findOption finds the option with value among an element's options and
// option groups, returned as Slack echoes it ({text, value}).
func findOption(el map[string]any, value string) (map[string]any, bool) {
	var opts []any
	if o, ok := el["options"].([]any); ok {
		opts = append(opts, o...)
	}
	if groups, ok := el["option_groups"].([]any); ok {
		for _, g := range groups {
			if gm, ok := g.(map[string]any); ok {
				if o, ok := gm["options"].([]any); ok {
					opts = append(opts, o...)
				}
			}
		}
	}
	for _, o := range opts {
		if om, ok := o.(map[string]any); ok && om["value"] == value {
			return map[string]any{"text": om["text"], "value": om["value"]}, true
		}
	}
	return nil, false
}

// ViewSubmissionSpec describes a user submitting a modal opened with
// views.open. Values maps block_id → action_id → what the user entered: the
// text of text inputs, the option value of selects and radio buttons, the
// date of date pickers, the ID of user/channel/conversation selects.
type ViewSubmissionSpec struct {
	User   string
	ViewID string
	Values map[string]map[string]string
}

// ViewSubmission builds the view_submission payload for a stored view,
// with state.values holding every input block (null for inputs left empty,
// as Slack sends them) and a fresh trigger_id. Values must name input
// elements of the view, and selections options that exist.
func (s *Server) ViewSubmission(spec ViewSubmissionSpec) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureUserLocked(spec.User)
	v, ok := s.views[spec.ViewID]
	if !ok {
		return nil, fmt.Errorf("slacktest: no view %s", spec.ViewID)
	}
	var view struct {
		Blocks []map[string]any `json:"blocks"`
	}
	_ = json.Unmarshal(v.Raw, &view)
	values := map[string]map[string]any{}
	used := 0
	for i, b := range view.Blocks {
		if b["type"] != "input" {
			continue
		}
		el, _ := b["element"].(map[string]any)
		blockID, _ := b["block_id"].(string)
		if blockID == "" {
			blockID = "block" + strconv.Itoa(i)
		}
		actionID, _ := el["action_id"].(string)
		typ, _ := el["type"].(string)
		input, given := spec.Values[blockID][actionID]
		if given {
			used++
		}
		state := map[string]any{"type": typ}
		switch typ {
		case "static_select", "radio_buttons", "external_select":
			state["selected_option"] = nil
			if given {
				opt, ok := findOption(el, input)
				if !ok {
					return nil, fmt.Errorf("slacktest: %s/%s has no option %q", blockID, actionID, input)
				}
				state["selected_option"] = opt
			}
		case "multi_static_select", "checkboxes":
			state["selected_options"] = []any{}
			if given {
				opt, ok := findOption(el, input)
				if !ok {
					return nil, fmt.Errorf("slacktest: %s/%s has no option %q", blockID, actionID, input)
				}
				state["selected_options"] = []any{opt}
			}
		case "datepicker":
			state["selected_date"] = nullable(input, given)
		case "timepicker":
			state["selected_time"] = nullable(input, given)
		case "users_select":
			state["selected_user"] = nullable(input, given)
		case "conversations_select":
			state["selected_conversation"] = nullable(input, given)
		case "channels_select":
			state["selected_channel"] = nullable(input, given)
		default:
			state["value"] = nullable(input, given)
		}
		if values[blockID] == nil {
			values[blockID] = map[string]any{}
		}
		values[blockID][actionID] = state
	}
	want := 0
	for _, m := range spec.Values {
		want += len(m)
	}
	if used != want {
		return nil, fmt.Errorf("slacktest: Values name %d inputs the view does not have", want-used)
	}
	return map[string]any{
		"type": "view_submission", "team": s.teamRef(), "user": s.userRefLocked(spec.User),
		"api_app_id": s.cfg.appID, "token": VerificationToken, "trigger_id": s.issueTriggerLocked(),
		"view": s.viewJSON(v, values), "response_urls": []any{},
		"is_enterprise_install": false, "enterprise": nil,
	}, nil
}

func nullable(v string, given bool) any {
	if !given {
		return nil
	}
	return v
}
