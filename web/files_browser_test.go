package web_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools/sandbox"
	"github.com/switchboard-gw/switchboard/web"
)

// newUploadGateway is a gateway that keeps people's files in workspaces
// under the folder it returns, as the gateway does (the sandbox's store).
func newUploadGateway(t *testing.T) (*gateway, string) {
	t.Helper()
	dir := t.TempDir()
	g := newGatewayTuned(t, "../guides", websocket.Config{}, web.Options{}, func(c *sessions.Config) {
		sb, err := sandbox.New(sandbox.Config{Dir: dir, QuotaBytes: 1 << 20}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Uploads = sb.Uploads()
	})
	return g, dir
}

// pngFile is a small picture, red so its thumbnail can be told apart.
func pngFile(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 20))
	for x := range 40 {
		for y := range 20 {
			img.Set(x, y, color.RGBA{R: 220, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// jsFile is JavaScript for a File of b named name, of type typ.
func jsFile(b []byte, name, typ string) string {
	return fmt.Sprintf(`new File([Uint8Array.from(atob(%q), (c) => c.charCodeAt(0))], %q, { type: %q })`, base64.StdEncoding.EncodeToString(b), name, typ)
}

// paste pastes files into the message box, as a person pasting a
// screenshot does.
func (p *page) paste(files ...string) {
	p.t.Helper()
	p.do(chromedp.Evaluate[chromedp.Void](`(() => { const dt = new DataTransfer(); for (const f of [` + strings.Join(files, ", ") + `]) dt.items.add(f);
		` + root + `.querySelector('textarea').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true })); })()`))
}

// drop drops files on the panel, as a person dragging them from their
// desktop does.
func (p *page) drop(files ...string) {
	p.t.Helper()
	p.do(chromedp.Evaluate[chromedp.Void](`(() => { const dt = new DataTransfer(); for (const f of [` + strings.Join(files, ", ") + `]) dt.items.add(f);
		const panel = ` + root + `.querySelector('.panel');
		panel.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
		panel.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true })); })()`))
}

// attach chooses a file of this machine with the attach button's file
// picker.
func (p *page) attach(path string) {
	p.t.Helper()
	p.do(chromedp.SetUploadFiles(chromedp.JSPath(root+`.querySelector('input[type=file]')`), []string{path}))
}

// tray is what the chips before sending show: name|size|thumbnail shown.
func (p *page) tray() []string {
	p.t.Helper()
	return eval[[]string](p, `[...`+root+`.querySelectorAll('.tray:not([hidden]) .file')].map((li) =>
		li.querySelector('.name').textContent + '|' + li.querySelector('.size').textContent + '|' + !li.querySelector('img').hidden)`)
}

func TestFilesInBrowser(t *testing.T) {
	browser := startBrowser(t)

	t.Run("a CSV chosen and a picture pasted land in the workspace, and the other person sees them", func(t *testing.T) {
		g, ws := newUploadGateway(t)
		ann := sharedPage(t, browser, g)
		bob := openPerson(t, browser, ann.shareLink())
		session := eval[string](ann, `document.querySelector('switchboard-chat').dataset.session`)

		csv := []byte("city,rain\nLyon,12\nBrest,31\n")
		local := filepath.Join(t.TempDir(), "rain.csv")
		if err := os.WriteFile(local, csv, 0o644); err != nil {
			t.Fatal(err)
		}
		pic := pngFile(t)
		if !eval[bool](ann, root+`.querySelector('button.attach').getAttribute('aria-label') === 'Attach files'`) {
			t.Fatal("the attach button has no label")
		}
		ann.attach(local)
		ann.waitFor(root + `.querySelector('.tray:not([hidden]) .file .name')?.textContent === 'rain.csv'`)
		ann.paste(jsFile(pic, "image.png", "image/png"))
		ann.waitFor(`[...` + root + `.querySelectorAll('.tray .file img')].some((i) => !i.hidden && i.src.startsWith('data:image/png'))`)
		if got := ann.tray(); strings.Join(got, ",") != "rain.csv|27 B|false,image.png|"+fmt.Sprintf("%d B", len(pic))+"|true" {
			t.Fatalf("the tray shows %q, want the CSV and the picture with its thumbnail", got)
		}
		if got := eval[[]string](ann, `[...`+root+`.querySelectorAll('.tray .file button.remove')].map((b) => b.getAttribute('aria-label'))`); strings.Join(got, ",") != "Remove rain.csv,Remove image.png" {
			t.Fatalf("remove buttons: %q", got)
		}
		ann.readable("files attached")

		// A file dropped on the panel joins them; its remove button takes
		// it back out.
		ann.drop(jsFile([]byte("dropped\n"), "notes.txt", "text/plain"))
		ann.waitFor(root + `.querySelectorAll('.tray .file').length === 3`)
		ann.click(root + `.querySelectorAll('.tray .file button.remove')[2]`)
		ann.waitFor(root + `.querySelectorAll('.tray .file').length === 2`)

		g.llm.Push(openaitest.Reply{Text: []string{"Brest is wetter."}})
		ann.say("Which city is wetter?")
		ann.waitFor(root + `.querySelector('.tray').hidden`)
		// Sent: her bubble keeps the chips, the picture's thumbnail with it.
		ann.waitFor(`(() => { const m = [...` + root + `.querySelectorAll('.msg[data-role=user][data-mine=true]')].pop();
			return !m.dataset.pending && m.querySelectorAll('.files .file').length === 2 && !m.querySelector('progress') &&
				!m.querySelectorAll('.files .file img')[1].hidden; })()`)
		ann.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some((m) => m.textContent.includes('Brest is wetter.'))`)
		ann.readable("a message with files")

		for name, want := range map[string][]byte{"rain.csv": csv, "image.png": pic} {
			if got, err := os.ReadFile(filepath.Join(ws, session, "uploads", name)); err != nil || !bytes.Equal(got, want) {
				t.Errorf("the workspace's %s holds %d bytes (%v), want %d", name, len(got), err, len(want))
			}
		}
		reqs := g.llm.Requests()
		last := reqs[len(reqs)-1].Messages
		if text := openaitest.Text(last[len(last)-1].Content); !strings.Contains(text, "rain.csv (text/csv, 27 B) at /workspace/uploads/rain.csv") || !strings.Contains(text, "image.png (image/png") {
			t.Errorf("the model was told %q", text)
		}

		// Bob's page shows the share: whose, and a chip per file, with no
		// picture (his browser never had the bytes).
		bob.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=user][data-mine=false]')].some((m) => m.querySelectorAll('.files .file').length === 2)`)
		type shared struct {
			Author string   `json:"author"`
			Body   string   `json:"body"`
			Chips  []string `json:"chips"`
			Images int      `json:"images"`
			Label  string   `json:"label"`
		}
		got := eval[shared](bob, `(() => { const m = [...`+root+`.querySelectorAll('.msg[data-role=user][data-mine=false]')].pop(); return {
			author: m.querySelector('.author').textContent, body: m.querySelector('.body').textContent,
			chips: [...m.querySelectorAll('.files .file')].map((li) => li.querySelector('.name').textContent + '|' + li.querySelector('.size').textContent),
			images: [...m.querySelectorAll('.files img')].filter((i) => !i.hidden).length,
			label: m.querySelector('.files').getAttribute('aria-label') }; })()`)
		if !strings.HasPrefix(got.Author, "Guest ") || got.Body != "Which city is wetter?" || got.Images != 0 || got.Label != "Files" ||
			strings.Join(got.Chips, ",") != "rain.csv|27 B,image.png|"+fmt.Sprintf("%d B", len(pic)) {
			t.Fatalf("bob sees %+v", got)
		}
		bob.readable("another's files")
	})

	t.Run("a file the gateway refuses is said to the sender, and the message is not sent", func(t *testing.T) {
		g, ws := newUploadGateway(t)
		p := openPage(t, browser, g.url+"/")
		elf := append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 200)...)
		p.paste(jsFile(elf, "report.pdf", "application/pdf"))
		p.waitFor(root + `.querySelector('.tray:not([hidden]) .file') !== null`)
		p.say("read this")
		p.waitFor(`[...` + root + `.querySelectorAll('.notice')].some((n) => n.textContent.includes('report.pdf is a binary file of no known type'))`)
		p.waitFor(`(() => { const m = [...` + root + `.querySelectorAll('.msg[data-role=user]')].pop();
			return m.dataset.pending === 'failed' && m.querySelector('.sending').textContent === 'not sent' &&
				m.querySelector('.file').dataset.state === 'failed' && m.querySelector('.file .failed').textContent === 'not saved'; })()`)
		session := eval[string](p, `document.querySelector('switchboard-chat').dataset.session`)
		if ents, _ := os.ReadDir(filepath.Join(ws, session, "uploads")); len(ents) != 0 {
			t.Fatalf("a refused file left %d entries in the workspace", len(ents))
		}
		if n := len(g.llm.Requests()); n != 0 {
			t.Fatalf("the model was asked %d times for a message that was not sent", n)
		}
		// The widget goes on: a picture alone is a message.
		g.llm.Push(openaitest.Reply{Text: []string{"Nice picture."}})
		p.paste(jsFile(pngFile(t), "image.png", "image/png"))
		p.waitFor(root + `.querySelector('.tray:not([hidden]) .file') !== null`)
		p.do(chromedp.SendKeys(chromedp.JSPath(root+`.querySelector('textarea')`), "\r"))
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some((m) => m.textContent.includes('Nice picture.'))`)
	})
}
