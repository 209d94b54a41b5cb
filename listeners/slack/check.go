package slack

// Check: what `gateway doctor` asks of Slack before a start, here so that
// the doctor need not know Slack's API (it calls Check, Caddy's way).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
)

// Problem is what is wrong with the Slack set-up, in words for an
// operator: Reason says what, Fix what to do.
type Problem struct {
	Reason, Fix string
}

func (p *Problem) Error() string { return p.Reason }

// Check asks Slack whether cfg's tokens work, as the listener would use
// them: their kinds first (a bot token is xoxb-, an app-level token
// xapp-; swapped ones are told as such), then auth.test with the bot
// token and, in socket mode, apps.connections.open with the app token
// (it opens no connection). It returns what Slack said of the bot, or a
// *Problem.
func Check(ctx context.Context, cfg Config) (string, error) {
	cfg = cfg.withDefaults()
	if p := tokenKinds(cfg); p != nil {
		return "", p
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	api := slackapi.New(cfg.BotToken, slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionAppLevelToken(cfg.AppToken))
	auth, err := api.AuthTestContext(ctx)
	if err != nil {
		reason, fix := refusal(err, "bot token", cfg.BotTokenFrom, botTokenWant)
		return "", &Problem{reason, fix}
	}
	if cfg.Mode == "socket" {
		if _, _, err := api.StartSocketModeContext(ctx); err != nil {
			reason, fix := refusal(err, "app-level token", cfg.AppTokenFrom, appTokenWant)
			return "", &Problem{reason, fix}
		}
	}
	return fmt.Sprintf("bot @%s in workspace %s, %s mode", auth.User, auth.Team, cfg.Mode), nil
}

// What each token should be, and where an admin finds it.
const (
	botTokenWant = "the app's Bot User OAuth Token (OAuth & Permissions, xoxb-…)"
	appTokenWant = "an app-level token with the connections:write scope (Basic Information → App-Level Tokens, xapp-…)"
)

// tokenKinds tells tokens of the wrong kind by their prefixes, before
// Slack is asked: Slack would only answer not_allowed_token_type or
// invalid_auth, which reads like a network or a typo problem.
func tokenKinds(cfg Config) *Problem {
	bot, app := cfg.BotToken, cfg.AppToken
	switch {
	case strings.HasPrefix(bot, "xapp-") && strings.HasPrefix(app, "xoxb-"):
		return &Problem{
			Reason: fmt.Sprintf("the tokens are swapped: %s holds the app-level token (xapp-) and %s the bot token (xoxb-)", cfg.BotTokenFrom, cfg.AppTokenFrom),
			Fix:    "swap them: the bot token (xoxb-) goes in the bot token's place, the app-level token (xapp-) in the app token's",
		}
	case strings.HasPrefix(bot, "xapp-"):
		return &Problem{Reason: fmt.Sprintf("%s holds an app-level token (xapp-), not a bot token", cfg.BotTokenFrom), Fix: "put " + botTokenWant + " there"}
	case strings.HasPrefix(bot, "xoxp-"):
		return &Problem{Reason: fmt.Sprintf("%s holds a user token (xoxp-), not a bot token", cfg.BotTokenFrom), Fix: "put " + botTokenWant + " there"}
	case cfg.Mode == "socket" && strings.HasPrefix(app, "xox"):
		return &Problem{Reason: fmt.Sprintf("%s holds a %s… token, not an app-level token", cfg.AppTokenFrom, app[:min(len(app), 5)]), Fix: "put " + appTokenWant + " there"}
	}
	return nil
}

// refusal says in words why Slack refused a token (or could not be
// reached), and what would mend it: the token's name, where it came from
// and what it should be.
func refusal(err error, which, from, want string) (reason, fix string) {
	var se slackapi.SlackErrorResponse
	if !errors.As(err, &se) {
		return "Slack could not be reached: " + err.Error(), "check this machine's network and proxy settings (outgoing HTTPS to slack.com), or listeners.slack.api_url"
	}
	switch se.Err {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
		return fmt.Sprintf("Slack refused the %s in %s (%s)", which, from, se.Err),
			fmt.Sprintf("put %s there; reinstall the app if it was revoked", want)
	case "missing_scope":
		return fmt.Sprintf("the %s in %s lacks a scope (%s)", which, from, se.Err),
			"add the scopes of listeners/slack/manifest.yaml and reinstall the app"
	}
	return fmt.Sprintf("Slack answered %s to the %s in %s", se.Err, which, from), "see Slack's error in the log"
}
