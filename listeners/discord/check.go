package discord

// Check: what `gateway doctor` asks of Discord before a start, here so
// that the doctor need not know Discord's API (it calls Check, Caddy's
// way). The listener asks the same of the application's flags at start
// (checkIntents).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Problem is what is wrong with the Discord set-up, in words for an
// operator: Reason says what, Fix what to do.
type Problem struct {
	Reason, Fix string
}

func (p *Problem) Error() string { return p.Reason }

// tokenFix is what an operator does when Discord refuses the token.
const tokenFix = "put the bot's token (Developer Portal → your application → Bot → Reset Token) in listeners.discord.token or the variable token_env names"

// Check asks Discord who the token is (GET /users/@me) and whether the
// application may read messages' text (its flags: the Message Content
// intent), through the same client the listener uses. It returns what
// Discord said of the bot, or a *Problem.
func Check(ctx context.Context, cfg Config) (string, error) {
	l, err := newClient(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	me, err := l.dg.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return "", restProblem(err, "users/@me", l.cfg.TokenFrom)
	}
	app, err := application(ctx, l.dg)
	if err != nil {
		return "", restProblem(err, "applications/@me", l.cfg.TokenFrom)
	}
	if app.Flags&messageContent == 0 {
		return "", &Problem{Reason: "the Message Content intent is off, so Discord closes the Gateway with 4014 Disallowed intent(s) and the bot reads no message", Fix: intentFix}
	}
	return fmt.Sprintf("bot @%s (%s), Message Content intent on", me.Username, me.ID), nil
}

// application is GET /applications/@me: the application's flags.
func application(ctx context.Context, dg *discordgo.Session) (*discordgo.Application, error) {
	body, err := dg.RequestWithBucketID(http.MethodGet, discordgo.EndpointApplications+"/@me", nil, discordgo.EndpointApplications, discordgo.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	var app discordgo.Application
	if err := json.Unmarshal(body, &app); err != nil {
		return nil, err
	}
	return &app, nil
}

// restProblem says why a REST call of the check failed.
func restProblem(err error, what, tokenFrom string) *Problem {
	var re *discordgo.RESTError
	switch {
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized:
		return &Problem{Reason: "Discord refused the bot token in " + tokenFrom + " (401 Unauthorized)", Fix: tokenFix}
	case errors.As(err, &re) && re.Response != nil:
		return &Problem{Reason: fmt.Sprintf("Discord answered %s to %s", re.Response.Status, what), Fix: "check listeners.discord.api_url"}
	}
	return &Problem{Reason: "Discord could not be reached: " + err.Error(), Fix: "check this machine's network (outgoing HTTPS to discord.com), or listeners.discord.api_url"}
}
