package discord

import (
	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// handoffMessage is the conversation passing to another guide, as one
// subtext line (Discord's small grey text, as the tool lines are):
// "-# Passed to billing: …".
func handoffMessage(d switchboard.HandoffData) *discordgo.MessageSend {
	return &discordgo.MessageSend{Content: "-# " + places.Handoff(d, mdEscape)}
}
