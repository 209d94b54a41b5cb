package slacktest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

// get fetches a file's URL, with token as the bearer when it is set.
func get(t *testing.T, u, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// A person's files come in the message's events as Slack's file objects
// (a message event with subtype file_share); url_private_download gives
// the file to the bot token and sends anyone else to the sign-in page;
// files.info describes a file an event names by its id alone.
func TestUserFiles(t *testing.T) {
	srv, api := newServer(t)
	ev := srv.MessageEvent(slacktest.UserMessage{Channel: dm, User: alice, Text: "here", Files: []slacktest.UserFile{
		{Name: "rain.csv", Mimetype: "text/csv", Data: []byte("a,b\n")},
		{Name: "later.png", CheckFileInfo: true, Data: []byte("png")},
		{Name: "plan", External: true},
	}})
	raw, _ := json.Marshal(ev)
	var me slackevents.MessageEvent
	if err := json.Unmarshal(raw, &me); err != nil {
		t.Fatal(err)
	}
	if me.SubType != "file_share" || me.Message == nil || len(me.Message.Files) != 3 {
		t.Fatalf("the event: %s", raw)
	}
	f, later, ext := me.Message.Files[0], me.Message.Files[1], me.Message.Files[2]
	if f.Name != "rain.csv" || f.Size != 4 || f.Mimetype != "text/csv" || f.Mode != "hosted" || !strings.Contains(f.URLPrivateDownload, "/download/rain.csv") {
		t.Fatalf("file %+v", f)
	}
	if later.FileAccess != "check_file_info" || later.Name != "" || later.URLPrivateDownload != "" {
		t.Fatalf("a file to check %+v", later)
	}
	if !ext.IsExternal || ext.URLPrivateDownload != "" || ext.ExternalType != "gdrive" {
		t.Fatalf("an external file %+v", ext)
	}

	if resp, body := get(t, f.URLPrivateDownload, srv.BotToken()); resp.StatusCode != 200 || body != "a,b\n" || resp.Header.Get("Content-Type") != "text/csv" {
		t.Fatalf("with the token: %d %q", resp.StatusCode, body)
	}
	for _, token := range []string{"", "xoxb-someone-else"} {
		resp, body := get(t, f.URLPrivateDownload, token)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "Sign in") ||
			resp.Request.URL.Path != "/" {
			t.Fatalf("token %q: %d %s %q", token, resp.StatusCode, resp.Request.URL, body)
		}
	}
	if d := srv.Downloads(); len(d) != 3 || d[0].Status != 200 || d[1].Status != 302 || d[1].Token != "" {
		t.Fatalf("downloads %+v", d)
	}

	info, _, _, err := api.GetFileInfo(later.ID, 0, 0)
	if err != nil || info.Name != "later.png" || info.URLPrivateDownload == "" {
		t.Fatalf("files.info: %+v, %v", info, err)
	}
	if _, _, _, err := api.GetFileInfo("F0NOPE", 0, 0); err == nil {
		t.Fatal("files.info of an unknown file")
	}
}

// An app without files:read is refused: files.info answers missing_scope,
// and a download with its token the sign-in page.
func TestUserFilesWithoutTheScope(t *testing.T) {
	srv, api := newServer(t, slacktest.WithoutFilesRead())
	ev := srv.AppMentionEvent(slacktest.UserMessage{Channel: channel, User: alice, Files: []slacktest.UserFile{{Name: "a.txt", Data: []byte("x")}}})
	files := ev["files"].([]any)
	id := files[0].(map[string]any)["id"].(string)
	_, _, _, err := api.GetFileInfo(id, 0, 0)
	slackErr(t, err, "missing_scope")
	u := files[0].(map[string]any)["url_private_download"].(string)
	if resp, body := get(t, u, srv.BotToken()); !strings.Contains(body, "Sign in") || resp.Request.URL.Path != "/" {
		t.Fatalf("without files:read: %d %q", resp.StatusCode, body)
	}
}
