// Package discordtest is a fake Discord for tests: an httptest server on
// 127.0.0.1 that the real github.com/bwmarrin/discordgo client talks to,
// over REST and over the Gateway WebSocket.
//
// discordgo takes its REST base from package variables; a session reaches
// the fake through its Client, which sends every request there, so nothing
// process-wide changes and tests of different fakes cannot cross:
//
//	srv := discordtest.New(t)
//	s, _ := discordgo.New("Bot " + srv.Token())
//	s.Client = srv.Client()
//	s.Identify.Intents = discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
//	err := s.Open() // GET /gateway, then the WebSocket at srv.GatewayURL()
//
// It models the parts of Discord a chat gateway touches, answering the way
// Discord documents them (API v10), so that a test passing against it says
// something about production:
//
//   - REST under /api/v10/ (and /api/v9/): "Authorization: Bot <token>"
//     required except for GET /gateway and the interaction endpoints; the
//     routes are the Route… constants. A workspace model holds guilds,
//     channels (text, threads with a parent, DMs), users with global names,
//     members with nicknames and roles, and messages per channel with their
//     edit history, author, content, embeds, components, flags,
//     attachments (served back from a fake CDN at signed URLs that expire,
//     as Discord's: an unsigned, altered or expired one answers 404 "This
//     content is no longer available.") and reactions. Payloads are
//     validated like Discord does (ValidateMessage, ValidateModal, and the
//     rules of application commands and their options on bulk overwrite):
//     failures answer 400 {"code":50035,"message":"Invalid Form Body",
//     "errors":{…}} with the field path, or 50006 for empty messages.
//   - Permissions: what a channel denies the bot (Channel.BotDenied, a
//     thread inheriting its parent's) is refused as Discord refuses it,
//     50001 Missing Access without View Channel (and no Gateway events
//     from there), 50013 Missing Permissions without the permission a
//     route needs (Send Messages, Send Messages in Threads, Create Public
//     Threads, Attach Files); interactions report the rest in
//     app_permissions.
//   - Rate limits: every routed answer carries X-RateLimit-Limit,
//     -Remaining, -Reset, -Reset-After and -Bucket from a real per-route
//     bucket (WithBucketLimit, SetRouteLimit); RateLimit injects 429s with
//     retry_after and Retry-After as discordgo's ratelimiter expects, and
//     FailNext any other answer.
//   - Interactions: INTERACTION_CREATE dispatches built by
//     NewComponentInteraction, NewModalSubmit and NewCommandInteraction
//     (or ClickButton, ChooseOptions, SubmitModal, RunCommand), the
//     callback endpoint with its rules (first response only, within 3 s,
//     types valid for the interaction), the original response and
//     follow-ups through the application's webhook for 15 minutes, and
//     every ack's latency (Acks). HTTP interactions are signed with
//     Ed25519 (SignedInteraction, PostInteraction).
//   - The Gateway at ws://…/gateway (JSON encoding; payload compression
//     when IDENTIFY asks for it, zlib-stream transport compression when
//     the URL does): HELLO, heartbeats and ACKs, IDENTIFY with intents
//     checked and applied (MESSAGE_CONTENT blanks content as Discord
//     does), READY then GUILD_CREATE, sequence numbers per session, RESUME
//     with replay of missed dispatches then RESUMED, op 7 Reconnect
//     (Reconnect), op 9 Invalid Session (InvalidateSession), dropped
//     connections (DropConnections) and close codes (CloseConnections).
//     The bot's own messages come back as MESSAGE_CREATE, as on Discord.
//
// Everything lives on a Server value; the package has no mutable globals.
package discordtest
