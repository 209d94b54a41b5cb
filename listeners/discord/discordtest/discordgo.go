package discordtest

import (
	"strings"

	"github.com/bwmarrin/discordgo"
)

// PointDiscordgo points github.com/bwmarrin/discordgo at apiURL (a
// Server's APIURL, "http://127.0.0.1:PORT/api/v10/") and sets
// discordgo.APIVersion to "10".
//
// discordgo keeps its endpoints in package variables computed once, at
// init, from "https://discord.com/api/v9/"; the endpoint functions
// (EndpointChannelMessages and the rest) build on the base variables at
// call time, so reassigning these bases is enough: EndpointDiscord,
// EndpointAPI, EndpointGuilds, EndpointChannels, EndpointUsers,
// EndpointGateway, EndpointGatewayBot, EndpointWebhooks, EndpointStickers,
// EndpointStageInstances, EndpointSKUs, EndpointVoice,
// EndpointVoiceRegions, EndpointNitroStickersPacks, EndpointGuildCreate,
// EndpointApplications, EndpointOAuth2, EndpointOAuth2Applications and
// their deprecated Oauth2 aliases. The gateway URL comes from GET
// /gateway, so it needs no variable.
//
// It mutates process-wide state: call it before creating sessions, and
// never while another goroutine (or a parallel test) uses discordgo.
// Tests that call it must not use t.Parallel.
func PointDiscordgo(apiURL string) {
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	base := apiURL
	if i := strings.Index(apiURL, "/api/"); i >= 0 {
		base = apiURL[:i+1]
	}
	discordgo.APIVersion = "10"
	discordgo.EndpointDiscord = base
	discordgo.EndpointAPI = apiURL
	discordgo.EndpointGuilds = apiURL + "guilds/"
	discordgo.EndpointChannels = apiURL + "channels/"
	discordgo.EndpointUsers = apiURL + "users/"
	discordgo.EndpointGateway = apiURL + "gateway"
	discordgo.EndpointGatewayBot = discordgo.EndpointGateway + "/bot"
	discordgo.EndpointWebhooks = apiURL + "webhooks/"
	discordgo.EndpointStickers = apiURL + "stickers/"
	discordgo.EndpointStageInstances = apiURL + "stage-instances"
	discordgo.EndpointSKUs = apiURL + "skus"
	// discordgo's own definitions put a double slash in these two; kept.
	discordgo.EndpointVoice = apiURL + "/voice/"
	discordgo.EndpointVoiceRegions = discordgo.EndpointVoice + "regions"
	discordgo.EndpointNitroStickersPacks = apiURL + "/sticker-packs"
	discordgo.EndpointGuildCreate = apiURL + "guilds"
	discordgo.EndpointApplications = apiURL + "applications"
	discordgo.EndpointOAuth2 = apiURL + "oauth2/"
	discordgo.EndpointOAuth2Applications = discordgo.EndpointOAuth2 + "applications"
	discordgo.EndpointOauth2 = discordgo.EndpointOAuth2
	discordgo.EndpointOauth2Applications = discordgo.EndpointOAuth2Applications
}
