package discordtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Interaction types.
const (
	InteractionTypePing               = 1
	InteractionTypeApplicationCommand = 2
	InteractionTypeMessageComponent   = 3
	InteractionTypeAutocomplete       = 4
	InteractionTypeModalSubmit        = 5
)

// Interaction callback types.
const (
	CallbackPong                             = 1
	CallbackChannelMessageWithSource         = 4
	CallbackDeferredChannelMessageWithSource = 5
	CallbackDeferredUpdateMessage            = 6
	CallbackUpdateMessage                    = 7
	CallbackAutocompleteResult               = 8
	CallbackModal                            = 9
)

// DefaultCommandName is the slash command name NewCommandInteraction uses
// when none is given.
const DefaultCommandName = "switchboard"

// Interaction is an interaction the fake built (see NewComponentInteraction,
// NewModalSubmit, NewCommandInteraction, NewPing) and possibly sent.
type Interaction struct {
	ID            string
	Token         string
	ApplicationID string
	Type          int
	ChannelID     string
	GuildID       string // "" in DMs
	UserID        string
	MessageID     string // components, and modals opened from one: the message
	CustomID      string // components and modals
	// Payload is the interaction object as Discord sends it: the d of
	// INTERACTION_CREATE, or the body POSTed to an Interactions Endpoint
	// URL.
	Payload json.RawMessage
	// SentAt is when it was dispatched or POSTed (real time, with a
	// monotonic reading); zero if never sent.
	SentAt time.Time
	// Seqs are the gateway sequence numbers it went out with, one per
	// session.
	Seqs []int64
}

type interactionState struct {
	in         Interaction
	issued     time.Time // server clock at sending; zero until sent
	acked      bool
	ackType    int
	origChan   string // the @original message
	origID     string
	deferred   bool // acked with type 5 and not yet filled in
	overHTTP   bool
	followups  []string
	invalidAck bool // the 3 s window passed without an ack
}

// ComponentInteraction describes a user using a component on a message:
// clicking a button or choosing options in a select menu.
type ComponentInteraction struct {
	ChannelID string
	MessageID string // the message carrying the component; it must be stored
	UserID    string
	CustomID  string
	// Values are the chosen options of a select menu.
	Values []string
}

// ModalField is one field of a submitted modal.
type ModalField struct {
	CustomID string
	Value    string
}

// ModalSubmitInteraction describes a user submitting a modal.
type ModalSubmitInteraction struct {
	ChannelID string
	UserID    string
	CustomID  string
	// MessageID is the message whose component opened the modal, "" when a
	// command opened it.
	MessageID string
	Fields    []ModalField
	// Labels renders the fields as label components (type 18) wrapping
	// text inputs, Discord's newer modal layout, instead of action rows.
	// discordgo v0.29 cannot decode those.
	Labels bool
}

// CommandInteraction describes a user running a slash command.
type CommandInteraction struct {
	ChannelID string
	UserID    string
	Name      string // default DefaultCommandName
	Options   []CommandOption
}

// CommandOption is one option of a slash command invocation.
type CommandOption struct {
	Name    string
	Type    int // 1 subcommand, 2 group, 3 string, 4 integer, 5 boolean, 6 user…
	Value   any
	Options []CommandOption
}

// Subcommand is a subcommand option with its own options.
func Subcommand(name string, options ...CommandOption) CommandOption {
	return CommandOption{Name: name, Type: 1, Options: options}
}

// StringOption is a string option.
func StringOption(name, value string) CommandOption {
	return CommandOption{Name: name, Type: 3, Value: value}
}

// IntegerOption is an integer option.
func IntegerOption(name string, value int) CommandOption {
	return CommandOption{Name: name, Type: 4, Value: value}
}

func (o CommandOption) json() map[string]any {
	out := map[string]any{"name": o.Name, "type": o.Type}
	if o.Value != nil {
		out["value"] = o.Value
	}
	if len(o.Options) > 0 {
		var l []any
		for _, c := range o.Options {
			l = append(l, c.json())
		}
		out["options"] = l
	}
	return out
}

func interactionToken(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("interaction:" + id + ":" + randomHex(48)))
}

// baseInteractionLocked renders the fields every interaction carries for
// a user in a channel.
func (s *Server) baseInteractionLocked(typ int, ch *Channel, userID string) (map[string]any, Interaction) {
	in := Interaction{ID: s.newIDLocked(), ApplicationID: s.cfg.appID, Type: typ, ChannelID: ch.ID, GuildID: ch.GuildID, UserID: userID}
	in.Token = interactionToken(in.ID)
	p := map[string]any{
		"id":                             in.ID,
		"application_id":                 s.cfg.appID,
		"type":                           typ,
		"token":                          in.Token,
		"version":                        1,
		"channel_id":                     ch.ID,
		"channel":                        s.channelJSONLocked(ch),
		"app_permissions":                strconv.FormatInt(s.appPermissionsLocked(ch), 10),
		"locale":                         "en-US",
		"entitlements":                   []any{},
		"authorizing_integration_owners": authorizingOwners(ch.GuildID),
		"attachment_size_limit":          s.cfg.maxAttachmentBytes,
	}
	if ch.GuildID != "" {
		mem, ok := s.members[ch.GuildID][userID]
		if !ok {
			s.addMemberLocked(Member{GuildID: ch.GuildID, UserID: userID})
			mem = s.members[ch.GuildID][userID]
		}
		mj := s.memberJSONLocked(mem, true)
		mj["permissions"] = "2248473465835073"
		p["member"] = mj
		p["guild_id"] = ch.GuildID
		p["guild"] = map[string]any{"id": ch.GuildID, "locale": "en-US", "features": []any{}}
		p["guild_locale"] = "en-US"
		p["context"] = 0
	} else {
		s.ensureUserLocked(userID)
		p["user"] = s.userJSONLocked(userID)
		p["context"] = 1
	}
	return p, in
}

// appPermissionsLocked is what an interaction in ch says the bot may do
// there.
func (s *Server) appPermissionsLocked(ch *Channel) int64 {
	if ch.Type == ChannelTypeDM {
		return appPermissions
	}
	return appPermissions &^ s.botDeniedLocked(ch)
}

func (s *Server) registerLocked(in Interaction, p map[string]any) Interaction {
	in.Payload, _ = json.Marshal(p)
	st := &interactionState{in: in}
	s.interactions[in.ID] = st
	s.byToken[in.Token] = st
	return in
}

func (s *Server) userChannelLocked(channelID, userID string) (*Channel, error) {
	if userID == "" {
		return nil, errors.New("discordtest: interaction without a user")
	}
	ch, ok := s.channels[channelID]
	if !ok {
		return nil, fmt.Errorf("discordtest: unknown channel %s", channelID)
	}
	return ch, nil
}

// findComponent returns the type of the component with customID in a
// message's components (nested ones included), or 0.
func findComponent(raw json.RawMessage, customID string) int {
	var walk func(any) int
	walk = func(v any) int {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				if t := walk(e); t != 0 {
					return t
				}
			}
		case map[string]any:
			if id, _ := v["custom_id"].(string); id == customID {
				if n, ok := v["type"].(json.Number); ok {
					t, _ := n.Int64()
					return int(t)
				}
			}
			for _, k := range []string{"components", "accessory", "component"} {
				if t := walk(v[k]); t != 0 {
					return t
				}
			}
		}
		return 0
	}
	return walk(decode(raw))
}

// NewComponentInteraction builds (without sending) the MESSAGE_COMPONENT
// interaction of a user using the component with c.CustomID on a stored
// message. It fails when the message has no such component, as Discord
// could not send the interaction then.
func (s *Server) NewComponentInteraction(c ComponentInteraction) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, err := s.userChannelLocked(c.ChannelID, c.UserID)
	if err != nil {
		return Interaction{}, err
	}
	m, ok := s.messages[c.ChannelID][c.MessageID]
	if !ok || m.Deleted {
		return Interaction{}, fmt.Errorf("discordtest: unknown message %s in %s", c.MessageID, c.ChannelID)
	}
	ctype := findComponent(m.Components, c.CustomID)
	if ctype == 0 {
		return Interaction{}, fmt.Errorf("discordtest: message %s has no component with custom_id %q", c.MessageID, c.CustomID)
	}
	p, in := s.baseInteractionLocked(InteractionTypeMessageComponent, ch, c.UserID)
	in.MessageID, in.CustomID = c.MessageID, c.CustomID
	data := map[string]any{"custom_id": c.CustomID, "component_type": ctype}
	if isSelect(ctype) {
		data["values"] = append([]string{}, c.Values...)
	}
	p["data"] = data
	p["message"] = s.messageJSONLocked(m, false, true)
	return s.registerLocked(in, p), nil
}

// NewModalSubmit builds (without sending) the MODAL_SUBMIT interaction of
// a user submitting a modal with the given field values.
func (s *Server) NewModalSubmit(ms ModalSubmitInteraction) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, err := s.userChannelLocked(ms.ChannelID, ms.UserID)
	if err != nil {
		return Interaction{}, err
	}
	p, in := s.baseInteractionLocked(InteractionTypeModalSubmit, ch, ms.UserID)
	in.MessageID, in.CustomID = ms.MessageID, ms.CustomID
	var comps []any
	for i, f := range ms.Fields {
		input := map[string]any{"type": componentTextInput, "id": 2*i + 2, "custom_id": f.CustomID, "value": f.Value}
		if ms.Labels {
			comps = append(comps, map[string]any{"type": componentLabel, "id": 2*i + 1, "component": input})
		} else {
			comps = append(comps, map[string]any{"type": componentActionRow, "id": 2*i + 1, "components": []any{input}})
		}
	}
	p["data"] = map[string]any{"custom_id": ms.CustomID, "components": orEmpty(comps)}
	if ms.MessageID != "" {
		m, ok := s.messages[ms.ChannelID][ms.MessageID]
		if !ok {
			return Interaction{}, fmt.Errorf("discordtest: unknown message %s in %s", ms.MessageID, ms.ChannelID)
		}
		p["message"] = s.messageJSONLocked(m, false, true)
	}
	return s.registerLocked(in, p), nil
}

// NewCommandInteraction builds (without sending) the APPLICATION_COMMAND
// interaction of a user running a chat input command. The command's ID is
// the registered one when a bulk overwrite registered it (guild commands
// first, then global), else a fresh snowflake.
func (s *Server) NewCommandInteraction(c CommandInteraction) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, err := s.userChannelLocked(c.ChannelID, c.UserID)
	if err != nil {
		return Interaction{}, err
	}
	if c.Name == "" {
		c.Name = DefaultCommandName
	}
	p, in := s.baseInteractionLocked(InteractionTypeApplicationCommand, ch, c.UserID)
	data := map[string]any{"name": c.Name, "type": 1}
	if id, ok := s.cmdIDs[ch.GuildID+"/1/"+c.Name]; ok && ch.GuildID != "" {
		data["id"], data["guild_id"] = id, ch.GuildID
	} else if id, ok := s.cmdIDs["/1/"+c.Name]; ok {
		data["id"] = id
	} else {
		data["id"] = s.newIDLocked()
	}
	if len(c.Options) > 0 {
		var l []any
		for _, o := range c.Options {
			l = append(l, o.json())
		}
		data["options"] = l
	}
	p["data"] = data
	return s.registerLocked(in, p), nil
}

// NewPing builds the PING interaction Discord POSTs to verify an
// Interactions Endpoint URL; the app must answer {"type":1}.
func (s *Server) NewPing() Interaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := Interaction{ID: s.newIDLocked(), ApplicationID: s.cfg.appID, Type: InteractionTypePing}
	in.Token = interactionToken(in.ID)
	p := map[string]any{"id": in.ID, "application_id": s.cfg.appID, "type": InteractionTypePing, "token": in.Token,
		"version": 1, "user": s.userJSONLocked(DefaultOwnerID), "entitlements": []any{}}
	return s.registerLocked(in, p)
}

// SendInteraction dispatches in as INTERACTION_CREATE to every live
// session (interactions need no intent) and starts its 3 s window. It
// returns the interaction with SentAt and Seqs set, or ErrNoSession when
// no session exists to deliver it to.
func (s *Server) SendInteraction(in Interaction) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.interactions[in.ID]
	if !ok {
		return in, fmt.Errorf("discordtest: unknown interaction %s", in.ID)
	}
	st.issued, st.in.SentAt = s.now(), time.Now()
	ds := s.dispatchLocked("INTERACTION_CREATE", st.in.GuildID, 0, func(*session) (any, bool) { return st.in.Payload, true })
	st.in.Seqs = nil
	for _, d := range ds {
		st.in.Seqs = append(st.in.Seqs, d.Seq)
	}
	if len(ds) == 0 {
		return st.in, ErrNoSession
	}
	return st.in, nil
}

// ClickButton builds and sends the interaction of userID clicking the
// button customID on a message.
func (s *Server) ClickButton(channelID, messageID, userID, customID string) (Interaction, error) {
	in, err := s.NewComponentInteraction(ComponentInteraction{ChannelID: channelID, MessageID: messageID, UserID: userID, CustomID: customID})
	if err != nil {
		return in, err
	}
	return s.SendInteraction(in)
}

// ChooseOptions builds and sends the interaction of userID choosing values
// in the select menu customID on a message.
func (s *Server) ChooseOptions(channelID, messageID, userID, customID string, values ...string) (Interaction, error) {
	in, err := s.NewComponentInteraction(ComponentInteraction{ChannelID: channelID, MessageID: messageID, UserID: userID, CustomID: customID, Values: values})
	if err != nil {
		return in, err
	}
	return s.SendInteraction(in)
}

// SubmitModal builds and sends a MODAL_SUBMIT interaction.
func (s *Server) SubmitModal(ms ModalSubmitInteraction) (Interaction, error) {
	in, err := s.NewModalSubmit(ms)
	if err != nil {
		return in, err
	}
	return s.SendInteraction(in)
}

// RunCommand builds and sends an APPLICATION_COMMAND interaction.
func (s *Server) RunCommand(c CommandInteraction) (Interaction, error) {
	in, err := s.NewCommandInteraction(c)
	if err != nil {
		return in, err
	}
	return s.SendInteraction(in)
}

// AgeInteraction moves a sent interaction's send time back by d on the
// server clock, e.g. past InteractionAckWindow so its callback answers
// 10062, or past InteractionTokenTTL so its token stops working.
func (s *Server) AgeInteraction(id string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.interactions[id]; ok {
		st.issued = st.issued.Add(-d)
	}
}

// Acks returns every accepted initial interaction response, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.acks)
	for i := range out {
		out[i].Data = cloneRaw(out[i].Data)
	}
	return out
}

// WaitForAck blocks until the interaction is acknowledged (returning the
// ack) or ctx ends.
func (s *Server) WaitForAck(ctx context.Context, interactionID string) (Ack, error) {
	var ack Ack
	err := s.WaitFor(ctx, func() bool {
		for _, a := range s.Acks() {
			if a.InteractionID == interactionID {
				ack = a
				return true
			}
		}
		return false
	})
	return ack, err
}

// InteractionResponses returns every interaction callback received,
// accepted or refused, in order.
func (s *Server) InteractionResponses() []InteractionResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.responses)
	for i := range out {
		out[i].Data = cloneRaw(out[i].Data)
	}
	return out
}

// Modals returns the modals opened by callbacks of type 9, in order.
func (s *Server) Modals() []Modal {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.modals)
	for i := range out {
		out[i].Raw = cloneRaw(out[i].Raw)
	}
	return out
}

// --- the callback endpoint ---

func (c *call) interactionCallback() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.interactions[c.param("interaction.id")]
	if !ok || st.in.Token != c.param("interaction.token") || st.issued.IsZero() {
		return errorResult(errUnknownInteraction)
	}
	res, msg := s.respondLocked(st, c.body, c.files)
	if res.status == http.StatusNoContent && c.query.Get("with_response") == "true" {
		cb := map[string]any{"id": st.in.ID, "type": st.in.Type}
		resource := map[string]any{"type": st.ackType}
		if msg != nil {
			cb["response_message_id"] = msg.ID
			cb["response_message_loading"] = msg.Flags&FlagLoading != 0
			cb["response_message_ephemeral"] = msg.Ephemeral
			if st.ackType == CallbackChannelMessageWithSource || st.ackType == CallbackUpdateMessage {
				resource["message"] = s.messageJSONLocked(msg, false, true)
			}
		}
		return okJSON(map[string]any{"interaction": cb, "resource": resource})
	}
	return res
}

// respondLocked applies an initial response to an interaction (from the
// callback endpoint or the inline answer to an HTTP interaction) and
// records it. It answers 204 when accepted.
func (s *Server) respondLocked(st *interactionState, body []byte, files []Attachment) (result, *Message) {
	var cb struct {
		Type int             `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &cb)
	if string(cb.Data) == "null" {
		cb.Data = nil
	}
	resp := InteractionResponse{InteractionID: st.in.ID, Type: cb.Type, Data: cloneRaw(cb.Data), At: s.now(), Latency: time.Since(st.in.SentAt)}
	finish := func(res result, msg *Message) (result, *Message) {
		resp.Status = res.status
		if e, ok := res.body.(map[string]any); ok {
			resp.Code, _ = e["code"].(int)
		}
		if msg != nil {
			resp.MessageID = msg.ID
		}
		s.responses = append(s.responses, resp)
		s.notifyLocked()
		return res, msg
	}
	switch {
	case st.acked:
		return finish(errorResult(errAlreadyAcked), nil)
	case s.now().Sub(st.issued) > InteractionAckWindow:
		st.invalidAck = true
		return finish(errorResult(errUnknownInteraction), nil)
	}
	in := st.in
	component := in.Type == InteractionTypeMessageComponent || (in.Type == InteractionTypeModalSubmit && in.MessageID != "")
	badType := func() (result, *Message) {
		v := newValidator(nil)
		v.add([]any{"type"}, "INTERACTION_RESPONSE_TYPE_INVALID", fmt.Sprintf("Interaction response type %d is not valid for interaction type %d", cb.Type, in.Type))
		return finish(errorResult(v.err()), nil)
	}
	ch := s.channels[in.ChannelID]
	var msg *Message
	switch cb.Type {
	case CallbackPong:
		if in.Type != InteractionTypePing {
			return badType()
		}
	case CallbackChannelMessageWithSource:
		if in.Type == InteractionTypePing {
			return badType()
		}
		if cb.Data == nil {
			v := newValidator(nil)
			v.add([]any{"data"}, "BASE_TYPE_REQUIRED", "This field is required")
			return finish(errorResult(v.err()), nil)
		}
		if e := validateMessage(cb.Data, []any{"data"}, len(files)); e != nil {
			return finish(errorResult(e), nil)
		}
		msg = s.interactionMessageLocked(st, ch, parseDraft(cb.Data), files, RouteCreateInteractionResponse)
		s.storeMessageLocked(msg)
		st.origChan, st.origID = msg.ChannelID, msg.ID
	case CallbackDeferredChannelMessageWithSource:
		if in.Type == InteractionTypePing {
			return badType()
		}
		d := parseDraft(cb.Data)
		if f := d.int("flags"); f&^FlagEphemeral != 0 {
			v := newValidator(nil)
			v.add([]any{"data", "flags"}, "INTERACTION_DEFERRED_FLAGS_INVALID", "Only the EPHEMERAL flag can be set on a deferred response")
			return finish(errorResult(v.err()), nil)
		}
		msg = s.interactionMessageLocked(st, ch, draft{fields: map[string]json.RawMessage{}}, nil, RouteCreateInteractionResponse)
		msg.Content, msg.Embeds, msg.Components = "", nil, nil
		msg.Flags = FlagLoading
		msg.Ephemeral = d.int("flags")&FlagEphemeral != 0
		if msg.Ephemeral {
			msg.Flags |= FlagEphemeral
		}
		msg.History = []Revision{msg.revision(RouteCreateInteractionResponse, msg.Timestamp)}
		s.storeMessageLocked(msg)
		st.origChan, st.origID, st.deferred = msg.ChannelID, msg.ID, true
	case CallbackDeferredUpdateMessage, CallbackUpdateMessage:
		if !component {
			return badType()
		}
		m, ok := s.messages[in.ChannelID][in.MessageID]
		if !ok || m.Deleted {
			return finish(errorResult(errUnknownMessage), nil)
		}
		if cb.Type == CallbackUpdateMessage {
			if e := s.editLocked(m, bodyOrEmpty(cb.Data), files, []any{"data"}, RouteCreateInteractionResponse); e != nil {
				return finish(errorResult(e), nil)
			}
		}
		msg = m
		st.origChan, st.origID = m.ChannelID, m.ID
	case CallbackAutocompleteResult:
		if in.Type != InteractionTypeAutocomplete {
			return badType()
		}
	case CallbackModal:
		if in.Type == InteractionTypePing || in.Type == InteractionTypeModalSubmit {
			return badType()
		}
		v := newValidator([]any{"data"})
		v.modal(nil, decode(bodyOrEmpty(cb.Data)))
		if e := v.err(); e != nil {
			return finish(errorResult(e), nil)
		}
		var md struct {
			CustomID string `json:"custom_id"`
			Title    string `json:"title"`
		}
		_ = json.Unmarshal(cb.Data, &md)
		s.modals = append(s.modals, Modal{InteractionID: in.ID, CustomID: md.CustomID, Title: md.Title, Raw: cloneRaw(cb.Data)})
	default:
		v := newValidator(nil)
		v.add([]any{"type"}, "BASE_TYPE_CHOICES", "Value must be one of {1, 4, 5, 6, 7, 8, 9, 10, 12}.")
		return finish(errorResult(v.err()), nil)
	}
	st.acked, st.ackType = true, cb.Type
	now := time.Now()
	s.acks = append(s.acks, Ack{InteractionID: in.ID, Type: cb.Type, Data: cloneRaw(cb.Data), Interaction: in, AckedAt: now, Latency: now.Sub(in.SentAt)})
	return finish(noContent(), msg)
}

// interactionMessageLocked builds a message sent through the
// application's webhook in answer to an interaction.
func (s *Server) interactionMessageLocked(st *interactionState, ch *Channel, d draft, files []Attachment, route string) *Message {
	m := s.newMessageLocked(ch, s.cfg.botID, d, files, route)
	m.WebhookID, m.InteractionID = s.cfg.appID, st.in.ID
	if st.in.Type == InteractionTypeApplicationCommand {
		m.Type = MessageTypeChatInputCommand
	}
	if d.int("flags")&FlagEphemeral != 0 {
		m.Ephemeral = true
		m.Flags |= FlagEphemeral
		m.History[0].Flags = m.Flags
	}
	return m
}

// --- webhook endpoints (follow-ups and the original response) ---

// webhookState resolves the interaction behind a webhook URL: unknown
// application IDs are Unknown Webhook; unknown, expired or invalidated
// tokens are Invalid Webhook Token; a token whose interaction was not
// acknowledged yet has no webhook.
func (c *call) webhookStateLocked() (*interactionState, *Error) {
	s := c.s
	if c.param("application.id") != s.cfg.appID {
		return nil, errUnknownWebhook
	}
	st, ok := s.byToken[c.param("interaction.token")]
	if !ok || st.issued.IsZero() {
		return nil, errInvalidWebhookToken
	}
	age := s.now().Sub(st.issued)
	if age > InteractionTokenTTL || (!st.acked && age > InteractionAckWindow) {
		return nil, errInvalidWebhookToken
	}
	if !st.acked {
		return nil, errUnknownWebhook
	}
	return st, nil
}

// targetLocked finds the message a webhook message route names: @original
// or a follow-up of the same interaction.
func (c *call) targetLocked(st *interactionState) (*Message, *Error) {
	s := c.s
	id := c.param("message.id")
	if c.route.name == RouteGetOriginalResponse || c.route.name == RouteEditOriginalResponse || c.route.name == RouteDeleteOriginalResponse {
		if st.origID == "" {
			return nil, errUnknownMessage
		}
		m, ok := s.messages[st.origChan][st.origID]
		if !ok || m.Deleted {
			return nil, errUnknownMessage
		}
		return m, nil
	}
	if id != st.origID && !slices.Contains(st.followups, id) {
		return nil, errUnknownMessage
	}
	m, ok := s.messages[st.in.ChannelID][id]
	if !ok || m.Deleted {
		return nil, errUnknownMessage
	}
	return m, nil
}

func (c *call) getWebhookMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st, e := c.webhookStateLocked()
	if e != nil {
		return errorResult(e)
	}
	m, e := c.targetLocked(st)
	if e != nil {
		return errorResult(e)
	}
	return okJSON(s.messageJSONLocked(m, false, true))
}

func (c *call) editWebhookMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st, e := c.webhookStateLocked()
	if e != nil {
		return errorResult(e)
	}
	m, e := c.targetLocked(st)
	if e != nil {
		return errorResult(e)
	}
	if e := s.editLocked(m, bodyOrEmpty(c.body), c.files, nil, c.route.name); e != nil {
		return errorResult(e)
	}
	if m.ID == st.origID {
		st.deferred = false
	}
	return okJSON(s.messageJSONLocked(m, false, true))
}

func (c *call) deleteWebhookMessage() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st, e := c.webhookStateLocked()
	if e != nil {
		return errorResult(e)
	}
	m, e := c.targetLocked(st)
	if e != nil {
		return errorResult(e)
	}
	s.deleteLocked(m)
	return noContent()
}

// createFollowup answers POST /webhooks/{app}/{token}: a new message, or,
// right after a DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE, the deferred
// message filled in (Discord's documented backwards-compatible behaviour;
// its ephemeral state is kept). wait is always true for interactions.
func (c *call) createFollowup() result {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st, e := c.webhookStateLocked()
	if e != nil {
		return errorResult(e)
	}
	if e := validateMessage(bodyOrEmpty(c.body), nil, len(c.files)); e != nil {
		return errorResult(e)
	}
	if st.deferred {
		if m, ok := s.messages[st.origChan][st.origID]; ok && !m.Deleted {
			if e := s.editLocked(m, c.body, c.files, nil, RouteCreateFollowup); e != nil {
				return errorResult(e)
			}
			st.deferred = false
			return okJSON(s.messageJSONLocked(m, false, true))
		}
	}
	ch, ok := s.channels[st.in.ChannelID]
	if !ok {
		return errorResult(errUnknownChannel)
	}
	m := s.interactionMessageLocked(st, ch, parseDraft(c.body), c.files, RouteCreateFollowup)
	s.storeMessageLocked(m)
	st.followups = append(st.followups, m.ID)
	return okJSON(s.messageJSONLocked(m, false, true))
}

// --- HTTP interactions ---

// HTTPDelivery is the outcome of PostInteraction: the app's HTTP answer
// and what Discord made of it.
type HTTPDelivery struct {
	Status  int
	Body    []byte
	Latency time.Duration
	// Accepted is true when the answer counted as the initial response:
	// a valid inline interaction response (200 with a JSON body), or a 202
	// after the app answered through the callback endpoint.
	Accepted bool
	// Error is Discord's view of an inline answer it refused (nil when
	// accepted or when the app answered 202).
	Error *Error
}

// PostInteraction delivers in over HTTP as Discord does for apps with an
// Interactions Endpoint URL: a POST to url signed with the application's
// key (PrivateKey) at the server clock's now, which starts the 3 s window.
// An inline answer (200 with an interaction response body) is validated
// and applied like a callback; a 202 means the app answered through the
// callback endpoint.
func (s *Server) PostInteraction(ctx context.Context, url string, in Interaction) (HTTPDelivery, error) {
	s.mu.Lock()
	st, ok := s.interactions[in.ID]
	if !ok {
		s.mu.Unlock()
		return HTTPDelivery{}, fmt.Errorf("discordtest: unknown interaction %s", in.ID)
	}
	st.issued, st.in.SentAt, st.overHTTP = s.now(), time.Now(), true
	body, sentAt, now := st.in.Payload, st.in.SentAt, s.now()
	s.mu.Unlock()

	req, err := SignedInteraction(url, s.cfg.priv, body, now)
	if err != nil {
		return HTTPDelivery{}, err
	}
	req = req.WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return HTTPDelivery{}, err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	d := HTTPDelivery{Status: resp.StatusCode, Body: rb, Latency: time.Since(sentAt)}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		s.mu.Lock()
		d.Accepted = st.acked
		s.mu.Unlock()
	case resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(rb)) > 0:
		s.mu.Lock()
		res, _ := s.respondLocked(st, rb, nil)
		s.mu.Unlock()
		if res.status == http.StatusNoContent {
			d.Accepted = true
		} else if m, ok := res.body.(map[string]any); ok {
			code, _ := m["code"].(int)
			msg, _ := m["message"].(string)
			d.Error = &Error{Status: res.status, Code: code, Message: msg}
		}
	}
	return d, nil
}
