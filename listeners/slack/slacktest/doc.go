// Package slacktest is a fake Slack for tests: an httptest server on
// 127.0.0.1 that the real github.com/slack-go/slack client talks to through
// slack.OptionAPIURL(srv.APIURL()).
//
// It models the parts of Slack a chat gateway touches, and answers the way
// Slack documents them, so that a test passing against it says something about
// production:
//
//   - the Web API under /api/<method> (form or JSON bodies, bearer or form
//     token), with a workspace model that stores every message by channel and
//     ts together with its edit history, and with Slack's validation (text and
//     markdown_text lengths, no_text, Block Kit limits via ValidateBlocks,
//     modal limits via ValidateView, trigger_id lifetimes, the thread_ts
//     and recipient chat.startStream requires), and the bot's
//     standing in each conversation (Channel's NotMember, Archived and
//     Restricted): posting where it may not is refused with not_in_channel,
//     channel_not_found, is_archived or restricted_action, while a slash
//     command's response_url still answers there;
//   - Socket Mode: apps.connections.open hands out single-use ws:// URLs, the
//     WebSocket sends hello, pings, envelopes (events_api, interactive,
//     slash_commands) and disconnect requests, and records every ack with its
//     latency; an app may hold up to ten connections at once (several
//     processes of it), each envelope going over one of them in turn
//     (Envelope.Conn, SendEventOn), and an eleventh is told
//     too_many_websockets;
//   - the Events API over HTTP: SignedRequest signs bodies the way Slack does,
//     and the payload builders produce the JSON Slack would send;
//   - people's files (UserMessage.Files): the file objects events carry
//     (subtype file_share; check_file_info, external, hidden and deleted
//     files as Slack sends them), files.info, and url_private_download,
//     which gives the file to the bot token with files:read and sends any
//     other request to the workspace's sign-in page (WithoutFilesRead);
//     a download can stall (UserFile.Stall) or bring more than announced.
//
// Faults are injected per method with FailNext, FailNextStatus and RateLimit,
// and connections are cut with Disconnect and DropConnections.
//
// Everything lives on a Server value; the package has no mutable globals, so
// tests may run in parallel with one Server each.
package slacktest
