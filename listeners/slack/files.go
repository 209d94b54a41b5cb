package slack

// Files people share with a message, in a thread or a DM: their file
// objects become the session's incoming files (places' SubmitFiles), each
// downloaded from url_private_download with the bot token, which needs
// the files:read scope. The download runs after the event is
// acknowledged, off the event handler and off the place's worker
// (places' Aside): the thread's next message waits for it, no other
// conversation does.

import (
	"cmp"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// filesFix is what an operator does when Slack will not give the bot
// people's files.
const filesFix = "add the files:read scope (listeners/slack/manifest.yaml) under OAuth & Permissions and reinstall the app to the workspace"

// submitFiles gives b's session a message with files, off the place's
// worker (its Run address, addr): a refusal is told to the writer alone.
func (l *Listener) submitFiles(addr string, b switchboard.Binding, at place, author switchboard.Author, text, clientID string, files []slackapi.File) {
	l.places.Aside(addr, func(ctx context.Context) {
		in := switchboard.Input{Author: author, Text: text, ClientID: clientID}
		if err := l.places.SubmitFiles(ctx, b, in, l.incoming(ctx, files)); err != nil && ctx.Err() == nil {
			l.refused(ctx, at, author.ID, err)
		}
	})
}

// incoming are a message's files as the session takes them. A file object
// Slack sends with only its id (file_access check_file_info) is completed
// with files.info first.
func (l *Listener) incoming(ctx context.Context, files []slackapi.File) []places.Incoming {
	out := make([]places.Incoming, 0, len(files))
	for _, f := range files {
		if f.FileAccess == "check_file_info" {
			var info *slackapi.File
			err := l.retry(ctx, func() (err error) {
				info, _, _, err = l.api.GetFileInfoContext(ctx, f.ID, 0, 0)
				return err
			})
			if err != nil {
				out = append(out, places.Incoming{Name: cmp.Or(f.Name, "a file"), Size: -1, Open: l.notReadable(f, err)})
				continue
			}
			f = *info
		}
		size := int64(f.Size)
		if f.IsExternal || f.Mode == "hidden_by_limit" || f.Mode == "tombstone" || f.Name == "" && size == 0 {
			size = -1 // not said, or not the file's
		}
		out = append(out, places.Incoming{Name: fileName(f), Size: size, Open: l.opener(f)})
	}
	return out
}

func fileName(f slackapi.File) string { return cmp.Or(f.Name, f.Title, "a file") }

// notReadable is the download of a file files.info would not describe.
func (l *Listener) notReadable(f slackapi.File, err error) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) {
		var se slackapi.SlackErrorResponse
		if errors.As(err, &se) && se.Err == "missing_scope" {
			l.log.Warn("slack: a person's file cannot be read: the bot token lacks files:read", "file", f.ID, "fix", filesFix)
			return nil, places.NotDownloaded("Slack would not let me read your file: I lack the permission to read files (files:read); ask the person who runs me to add it")
		}
		l.log.Warn("slack: files.info for a person's file", "file", f.ID, "err", err)
		return nil, places.NotDownloaded("Slack would not tell me about your file (%s); send it again", cmp.Or(se.Err, "Slack could not be reached"))
	}
}

// opener downloads a file from url_private_download with the bot token,
// or says why it cannot: a file kept outside Slack, hidden by the
// workspace's plan, deleted, or at a URL that is not Slack's.
func (l *Listener) opener(f slackapi.File) func(context.Context) (io.ReadCloser, error) {
	name := fileName(f)
	return func(ctx context.Context) (io.ReadCloser, error) {
		switch {
		case f.Mode == "tombstone":
			return nil, places.NotDownloaded("%s was deleted from Slack", name)
		case f.Mode == "hidden_by_limit":
			return nil, places.NotDownloaded("%s is hidden by this workspace's Slack plan (it is older than the history the plan keeps), so I cannot download it", name)
		case f.IsExternal:
			return nil, places.NotDownloaded("%s is a link to a file kept outside Slack (%s), which I cannot download; attach the file itself", name, cmp.Or(f.ExternalType, "another service"))
		}
		u := cmp.Or(f.URLPrivateDownload, f.URLPrivate)
		if u == "" {
			return nil, places.NotDownloaded("Slack gave me no way to download %s", name)
		}
		if !l.ofSlack(u) {
			l.log.Warn("slack: a person's file is not at a Slack URL; not downloaded", "file", f.ID, "host", hostOf(u))
			return nil, places.NotDownloaded("%s is not kept by Slack, so I did not download it", name)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, places.NotDownloaded("Slack gave me a download address for %s that does not work", name)
		}
		req.Header.Set("Authorization", "Bearer "+l.cfg.BotToken)
		return l.places.Download(ctx, places.Fetch{Name: name, From: "Slack", Client: l.files, Request: req, Check: l.isFile(name, f.Mimetype)})
	}
}

// isFile says whether Slack's answer is the file. Slack answers a request
// for a file it does not give the bot (no token, or one without
// files:read) with its sign-in page, an HTML page after a redirect.
func (l *Listener) isFile(name, mimetype string) func(*http.Response) error {
	return func(r *http.Response) error {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch {
		case r.StatusCode == http.StatusNotFound || r.StatusCode == http.StatusGone:
			return places.NotDownloaded("%s is no longer in Slack", name)
		case r.StatusCode == http.StatusOK && ct == "text/html" && !strings.HasPrefix(mimetype, "text/html"),
			r.StatusCode == http.StatusUnauthorized, r.StatusCode == http.StatusForbidden:
			l.log.Warn("slack: Slack would not give the bot a person's file (its sign-in page instead): the bot token lacks files:read",
				"file", name, "status", r.StatusCode, "fix", filesFix)
			return places.NotDownloaded("Slack would not let me download %s: I lack the permission to read files (files:read); ask the person who runs me to add it", name)
		case r.StatusCode != http.StatusOK:
			return places.NotDownloaded("Slack would not give me %s (HTTP %d); send it again", name, r.StatusCode)
		}
		return nil
	}
}

// newFilesClient is the client people's files are downloaded with: no
// time limit of its own (places' Download bounds a download), and the
// bot token only ever sent to Slack's hosts (ofSlack) as redirects are
// followed; a redirect elsewhere (a presigned address on a CDN) goes
// without it.
func (l *Listener) newFilesClient(transport http.RoundTripper) *http.Client {
	return &http.Client{Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("slack: a file's download redirected five times")
		}
		if l.ofSlack(req.URL.String()) {
			req.Header.Set("Authorization", "Bearer "+l.cfg.BotToken)
		} else {
			req.Header.Del("Authorization")
		}
		return nil
	}}
}

// ofSlack reports whether u is Slack's, so that the bot token may go
// there: the Web API's own host, or over HTTPS one under its domain
// (files.slack.com for https://slack.com/api/).
func (l *Listener) ofSlack(u string) bool {
	p, err := url.Parse(u)
	api, aerr := url.Parse(l.cfg.APIURL)
	if err != nil || aerr != nil || p.Host == "" {
		return false
	}
	return p.Host == api.Host || p.Scheme == "https" && strings.HasSuffix(p.Hostname(), "."+api.Hostname())
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Host
	}
	return ""
}
