package discord

// Files people attach to a message in a thread or a DM the bot answers:
// the attachments become the session's incoming files (places'
// SubmitFiles), each downloaded from its signed CDN URL (no token: the
// signature is the permission, and it expires), off the Gateway's
// reading goroutine and off the place's worker (places' Aside): the
// thread's next message waits for them, no other conversation does.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// submitFiles gives b's session a message with attachments, off the
// place's worker (its Run address, place): a refusal is told to the
// writer.
func (l *Listener) submitFiles(place string, b switchboard.Binding, author switchboard.Author, roles []string, text, clientID string, atts []*discordgo.MessageAttachment) {
	in := switchboard.Input{Author: author, Text: text, ClientID: clientID, Grant: string(l.role(author.ID, roles))}
	files := make([]places.Incoming, 0, len(atts))
	for _, a := range atts {
		files = append(files, places.Incoming{Name: a.Filename, Size: int64(a.Size), Open: l.opener(a)})
	}
	l.places.Aside(place, func(ctx context.Context) {
		if err := l.places.SubmitFiles(ctx, b, in, files); err != nil && ctx.Err() == nil {
			l.refused(ctx, b.Address, author.ID, err)
		}
	})
}

// attachmentsTitle names a thread opened by a message of attachments
// alone.
func attachmentsTitle(atts []*discordgo.MessageAttachment) string {
	if len(atts) == 0 {
		return ""
	}
	return atts[0].Filename
}

// opener downloads an attachment from Discord's CDN.
func (l *Listener) opener(a *discordgo.MessageAttachment) func(context.Context) (io.ReadCloser, error) {
	name := a.Filename
	return func(ctx context.Context) (io.ReadCloser, error) {
		if !l.ofDiscord(a.URL) {
			l.log.Warn("discord: an attachment not on Discord's CDN; not downloaded", "file", name, "url_host", hostOf(a.URL))
			return nil, places.NotDownloaded("%s is not kept by Discord, so I did not download it", name)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
		if err != nil {
			return nil, places.NotDownloaded("Discord gave me a download address for %s that does not work", name)
		}
		return l.places.Download(ctx, places.Fetch{Name: name, From: "Discord", Client: l.files, Request: req, Check: isAttachment(name)})
	}
}

// isAttachment says whether the CDN's answer is the file. The CDN answers
// 404 "This content is no longer available." for a URL whose signature
// expired (a day after Discord issued it) or does not match.
func isAttachment(name string) func(*http.Response) error {
	return func(r *http.Response) error {
		switch {
		case r.StatusCode == http.StatusNotFound:
			return places.NotDownloaded("Discord no longer serves %s (its link has expired, or the file was deleted); attach it again", name)
		case r.StatusCode == http.StatusForbidden:
			return places.NotDownloaded("Discord would not give me %s", name)
		case r.StatusCode != http.StatusOK:
			return places.NotDownloaded("Discord would not give me %s (HTTP %d); send it again", name, r.StatusCode)
		}
		return nil
	}
}

// newFilesClient is the client attachments are downloaded with: no time
// limit of its own (places' Download bounds a download) and no token
// (the bot's never goes to the CDN).
func newFilesClient(transport http.RoundTripper) *http.Client {
	return &http.Client{Transport: transport, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("discord: an attachment's download redirected five times")
		}
		return nil
	}}
}

// cdnHosts are where Discord serves attachments.
var cdnHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// ofDiscord reports whether u is Discord's CDN over HTTPS, or the host of
// the configured API (a fake's, in tests).
func (l *Listener) ofDiscord(u string) bool {
	p, err := url.Parse(u)
	api, aerr := url.Parse(l.cfg.APIURL)
	if err != nil || aerr != nil || p.Host == "" {
		return false
	}
	return p.Host == api.Host || p.Scheme == "https" && cdnHosts[p.Hostname()]
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Host
	}
	return ""
}
