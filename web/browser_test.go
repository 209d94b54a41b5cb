package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/web"
)

// These tests load the demo page from a whole gateway on loopback (real
// storage, sessions, /ws, the OpenAI adapter against a scripted server) in
// real headless Chromium, and use the widget as a person would.

// findChromium returns the browser to drive, or why there is none.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SKIP_BROWSER_TESTS") == "1" {
		t.Skip("no chromium; SKIP_BROWSER_TESTS=1")
	}
	t.Fatal("the widget's browser tests need Chromium: apt-get install -y chromium (or set CHROMIUM=/path/to/chrome, or SKIP_BROWSER_TESTS=1 to skip them)")
	return ""
}

// cuttableListener remembers every accepted connection so a test can cut
// them all server-side, as a dying proxy or a network change would.
// (httptest forgets connections once they are hijacked for WebSocket.)
type cuttableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cuttableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cuttableListener) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

type gateway struct {
	llm *openaitest.Server
	db  *storage.DB
	url string
	ln  *cuttableListener
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	return newGatewayWith(t, websocket.Config{}, web.Options{})
}

func newGatewayWith(t *testing.T, cfg websocket.Config, opts web.Options) *gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	sg := sessionstest.New(t, "../guides", log)
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.Handle("GET /ws", websocket.New(ctx, cfg, sg.Manager, log))
	mux.Handle("/", web.HandlerWith(opts))
	srv := httptest.NewUnstartedServer(mux)
	ln := &cuttableListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		cancel()
		ln.cutAll()
		srv.Close()
	})
	return &gateway{llm: sg.LLM, db: sg.DB, url: srv.URL, ln: ln}
}

// page is one browser tab showing the demo page.
type page struct {
	t   *testing.T
	ctx context.Context
}

const root = `document.querySelector('switchboard-chat').shadowRoot`

func openPage(t *testing.T, browser context.Context, url string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)
	p := &page{t: t, ctx: ctx}
	p.do(chromedp.Navigate(url))
	p.waitFor(`document.querySelector('switchboard-chat')?.dataset.connected === 'true'`)
	return p
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// waitFor polls a JavaScript expression until it is truthy.
func (p *page) waitFor(js string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		p.t.Fatalf("waiting for %s: %v\ntranscript:\n%s", js, err, p.transcript())
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// transcript is what the widget shows, for failure messages.
func (p *page) transcript() string {
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => {
		const host = document.querySelector('switchboard-chat');
		if (!host) return 'no <switchboard-chat> in ' + document.body.outerHTML.slice(0, 500);
		return JSON.stringify(host.dataset) + ' state=' + host.shadowRoot.querySelector('.state').textContent +
			'\n' + host.shadowRoot.querySelector('.log').innerText;
	})()`))
	if err != nil {
		return err.Error()
	}
	return s
}

// say types a message and presses Enter, as a person would.
func (p *page) say(text string) {
	p.t.Helper()
	p.do(chromedp.SendKeys(chromedp.JSPath(root+`.querySelector('textarea')`), text+"\r"))
}

func (p *page) click(jsPath string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.JSPath(jsPath)))
}

// count is how many transcript elements matching selector have exactly text.
func (p *page) count(selector, text string) int {
	p.t.Helper()
	return eval[int](p, fmt.Sprintf(`[...%s.querySelectorAll(%q)].filter(e => e.querySelector('.body').textContent.trim() === %q).length`, root, selector, text))
}

func TestWidgetInBrowser(t *testing.T) {
	path := findChromium(t)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("headless", true))...)
	defer cancel()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}

	t.Run("demo page loads with the widget open and connected", func(t *testing.T) {
		g := newGateway(t)
		p := openPage(t, browser, g.url+"/")
		title := eval[string](p, `document.title`)
		expanded := eval[string](p, root+`.querySelector('.launcher').getAttribute('aria-expanded')`)
		dialog := eval[bool](p, root+`.querySelector('[role=dialog]') !== null && !`+root+`.querySelector('[role=dialog]').hidden`)
		if title != "Switchboard demo" || expanded != "true" || !dialog {
			t.Fatalf("title %q, launcher aria-expanded %q, dialog shown %v", title, expanded, dialog)
		}
	})

	t.Run("a typed message gets a streamed Markdown reply", func(t *testing.T) {
		g := newGateway(t)
		gate := make(chan struct{})
		g.llm.Push(openaitest.Reply{Text: []string{"Hel", "lo ", "**world**"}, Gate: gate})
		p := openPage(t, browser, g.url+"/")
		p.say("hi there")
		p.waitFor(root + `.querySelector('.msg[data-role=user][data-mine=true]')?.textContent.includes('hi there')`)
		// The first piece shows while the model is still writing.
		p.waitFor(root + `.querySelector('.msg[data-role=assistant].streaming')?.textContent === 'Hel'`)
		p.waitFor(root + `.querySelector('.state').textContent === 'thinking…'`)
		close(gate)
		p.waitFor(root + `.querySelector('.msg[data-role=assistant]:not(.streaming) .body strong')?.textContent === 'world'`)
		p.waitFor(root + `.querySelector('.state').textContent === ''`)
		if n := p.count(".msg[data-role=assistant]", "Hello world"); n != 1 {
			t.Fatalf("reply shown %d times:\n%s", n, p.transcript())
		}
	})

	t.Run("an answer cut by a full disk is marked, and answered again once there is room", func(t *testing.T) {
		g := newGateway(t)
		gate := make(chan struct{})
		big := strings.Repeat("x", 16<<10) // pages a full disk refuses
		g.llm.Push(
			openaitest.Reply{Text: []string{"Half ", big, big}, Gate: gate},
			openaitest.Reply{Text: []string{"The whole answer."}},
		)
		p := openPage(t, browser, g.url+"/")
		p.say("question")
		p.waitFor(root + `.querySelector('.msg[data-role=assistant].streaming')?.textContent === 'Half '`)
		ctx := context.Background()
		if err := g.db.LimitSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		close(gate)
		p.waitFor(`[...` + root + `.querySelectorAll('.notice')].some(n => n.textContent.includes('disk'))`)
		if err := g.db.LimitSize(ctx, 0); err != nil {
			t.Fatal(err)
		}
		p.waitFor(root + `.querySelector('.msg.interrupted .cut')?.textContent === 'interrupted'`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('The whole answer.'))`)
		if got := eval[string](p, root+`.querySelector('.msg.interrupted .body').textContent`); got != "Half " {
			t.Fatalf("the interrupted bubble shows %q, want what was streamed of it", got)
		}
		if n := p.count(".msg[data-role=assistant]", "The whole answer."); n != 1 {
			t.Fatalf("the new answer is shown %d times:\n%s", n, p.transcript())
		}
		if n := eval[int](p, root+`.querySelectorAll('.msg.streaming').length`); n != 0 {
			t.Fatalf("%d bubbles still streaming:\n%s", n, p.transcript())
		}
	})

	t.Run("a tool approval is clicked and the result appears", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(
			openaitest.Reply{Text: []string{"Let me check."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Europe/Berlin"}`}}},
			openaitest.Reply{Text: []string{"It is teatime in Berlin."}},
		)
		p := openPage(t, browser, g.url+"/")
		p.say("what time is it in Berlin?")
		p.waitFor(root + `.querySelector('.confirm button[data-approve]') !== null`)
		p.waitFor(root + `.querySelector('.state').textContent === 'waiting for approval…'`)
		p.click(root + `.querySelector('.confirm button[data-approve]')`)
		p.waitFor(root + `.querySelector('.confirm .resolution')?.textContent.startsWith('Approved by ')`)
		if !eval[bool](p, `[...`+root+`.querySelectorAll('.confirm button')].every(b => b.disabled)`) {
			t.Fatal("Approve / Deny still enabled after the request was resolved")
		}
		p.waitFor(root + `.querySelector('.tool[data-call=call_1] .result')?.textContent.includes('Europe/Berlin')`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('teatime'))`)
	})

	t.Run("always allow answers for the session and /help keeps its lines", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
			openaitest.Reply{Text: []string{"First answer."}},
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_2", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
			openaitest.Reply{Text: []string{"Second answer."}},
		)
		p := openPage(t, browser, g.url+"/")
		p.say("time?")
		p.waitFor(root + `.querySelector('.confirm button[data-always]') !== null`)
		p.click(root + `.querySelector('.confirm button[data-always]')`)
		p.waitFor(root + `.querySelector('.confirm .resolution')?.textContent.endsWith('· for this session')`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('First answer.'))`)
		p.say("again?")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Second answer.'))`)
		if n := eval[int](p, root+`.querySelectorAll('.confirm').length`); n != 1 {
			t.Fatalf("%d approval prompts; the tool allowed for the session was asked about again", n)
		}
		p.say("/help")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=system]')].some(m => m.textContent.includes('/revoke'))`)
		// Each command starts its own line, at the same indentation: in a
		// run-on paragraph /guide and /tools would start at different x.
		xs := eval[[]float64](p, `(() => {
			const b = [...`+root+`.querySelectorAll('.msg[data-role=system] .body')].pop();
			const t = b.firstChild, at = (s) => { const r = document.createRange(); const i = t.data.indexOf(s);
				r.setStart(t, i); r.setEnd(t, i + 1); return r.getBoundingClientRect(); };
			return ["/help", "/guide", "/tools", "/revoke"].map(s => [at(s).left, at(s).top]).flat(); })()`)
		if len(xs) != 8 || xs[0] != xs[2] || xs[0] != xs[4] || xs[0] != xs[6] || !(xs[1] < xs[3] && xs[3] < xs[5] && xs[5] < xs[7]) {
			t.Fatalf("/help commands are not one per line (left, top of /help /guide /tools /revoke): %v", xs)
		}
	})

	t.Run("a card button click reaches the session", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: `{"title":"Pick a colour","text":"Which **one**?","fields":[{"label":"Stock","value":"plenty"}],"buttons":[{"label":"Red","value":"red"},{"label":"Blue","value":"blue","style":"primary"}]}`}}},
			openaitest.Reply{Text: []string{"Pick one."}},
			openaitest.Reply{Text: []string{"Blue it is."}},
		)
		p := openPage(t, browser, g.url+"/")
		p.say("let me choose")
		p.waitFor(root + `.querySelector('.card h3')?.textContent === 'Pick a colour'`)
		p.waitFor(root + `.querySelector('.card .text strong')?.textContent === 'one'`)
		p.waitFor(root + `.querySelector('.card dd')?.textContent === 'plenty'`)
		p.click(root + `.querySelectorAll('.card .actions button')[1]`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Blue it is.'))`)
		reqs := g.llm.Requests()
		last := reqs[len(reqs)-1].Messages
		if got := openaitest.Text(last[len(last)-1].Content); !strings.Contains(got, `Clicked "Blue"`) {
			t.Fatalf("the model was told %q, want the click on Blue", got)
		}
		if !eval[bool](p, `[...`+root+`.querySelectorAll('.card button')].every(b => b.disabled)`) {
			t.Fatal("the card's buttons are still enabled after the click")
		}
	})

	t.Run("a select and a form send their values", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{
				{ID: "call_1", Name: "present", Args: `{"title":"Size","select":{"placeholder":"Pick a size","options":[{"label":"Small","value":"s"},{"label":"Large","value":"l"}]}}`},
				{ID: "call_2", Name: "present", Args: `{"title":"Contact","form":{"submit_label":"Send","inputs":[{"name":"name","label":"Name","required":true},{"name":"email","label":"Email","type":"email"}]}}`},
			}},
			openaitest.Reply{Text: []string{"Choose and fill in."}},
			openaitest.Reply{Text: []string{"Large, noted."}},
			openaitest.Reply{Text: []string{"Thanks, Ann."}},
		)
		lastUserText := func() string {
			reqs := g.llm.Requests()
			last := reqs[len(reqs)-1].Messages
			return openaitest.Text(last[len(last)-1].Content)
		}
		p := openPage(t, browser, g.url+"/")
		p.say("I want to order")
		p.waitFor(root + `.querySelector('.card form') !== null && ` + root + `.querySelector('.card select') !== null`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Choose and fill in.'))`)

		p.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = ` + root + `.querySelector('.card select'); s.value = 'l'; s.dispatchEvent(new Event('change')); })()`))
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Large, noted.'))`)
		if got := lastUserText(); !strings.Contains(got, `Chose "Large"`) {
			t.Fatalf("the model was told %q, want the choice of Large", got)
		}

		p.do(
			chromedp.SendKeys(chromedp.JSPath(root+`.querySelector('.card form input[name=name]')`), "Ann"),
			chromedp.SendKeys(chromedp.JSPath(root+`.querySelector('.card form input[name=email]')`), "ann@example.com"),
			chromedp.Click(chromedp.JSPath(root+`.querySelector('.card form button[type=submit]')`)),
		)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Thanks, Ann.'))`)
		if got := lastUserText(); !strings.Contains(got, `Submitted "Contact"`) || !strings.Contains(got, `"email":"ann@example.com"`) || !strings.Contains(got, `"name":"Ann"`) {
			t.Fatalf("the model was told %q, want the form's values", got)
		}
	})

	t.Run("after the connection is cut mid-reply every message shows exactly once", func(t *testing.T) {
		g := newGateway(t)
		gate := make(chan struct{})
		g.llm.Push(
			openaitest.Reply{Text: []string{"One."}},
			openaitest.Reply{Text: []string{"Two ", "and ", "done."}, Gate: gate},
			openaitest.Reply{Text: []string{"Three."}},
		)
		p := openPage(t, browser, g.url+"/")
		p.say("first")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].length === 1`)
		p.say("second")
		p.waitFor(root + `.querySelector('.msg[data-role=assistant].streaming')?.textContent === 'Two '`)

		g.ln.cutAll()
		p.waitFor(`document.querySelector('switchboard-chat').dataset.connected === 'false'`)
		close(gate) // the reply finishes while the widget is away
		p.waitFor(`document.querySelector('switchboard-chat').dataset.connected === 'true'`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].length === 2`)

		p.say("third")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].length === 3`)
		for _, m := range []struct{ sel, text string }{
			{".msg[data-role=user]", "first"}, {".msg[data-role=user]", "second"}, {".msg[data-role=user]", "third"},
			{".msg[data-role=assistant]", "One."}, {".msg[data-role=assistant]", "Two and done."}, {".msg[data-role=assistant]", "Three."},
		} {
			if n := p.count(m.sel, m.text); n != 1 {
				t.Errorf("%q shown %d times", m.text, n)
			}
		}
		if bubbles := eval[int](p, root+`.querySelectorAll('.msg').length`); bubbles != 6 {
			t.Errorf("%d message bubbles, want 6:\n%s", bubbles, p.transcript())
		}
	})

	t.Run("markup in the model's output renders inert", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(openaitest.Reply{Text: []string{
			"<script>window.__pwned=1</script>\n\n",
			`<img src=x onerror="window.__pwned=2">` + "\n\n",
			"**bold** and [a link](javascript:window.__pwned=3)",
		}})
		p := openPage(t, browser, g.url+"/")
		p.say("show me some html")
		p.waitFor(root + `.querySelector('.msg[data-role=assistant]:not(.streaming) strong')?.textContent === 'bold'`)
		type report struct {
			Pwned    any  `json:"pwned"`
			Scripts  int  `json:"scripts"`
			Handlers int  `json:"handlers"`
			Images   int  `json:"images"`
			JSLinks  int  `json:"jsLinks"`
			Shown    bool `json:"shown"`
		}
		got := eval[report](p, `(() => { const r = `+root+`, log = r.querySelector('.log'); return {
			pwned: window.__pwned === undefined ? null : window.__pwned,
			scripts: log.querySelectorAll('script').length,
			handlers: log.querySelectorAll('[onerror], [onclick], [onload]').length,
			images: log.querySelectorAll('img').length,
			jsLinks: [...log.querySelectorAll('a')].filter(a => a.href.startsWith('javascript:')).length,
			shown: log.textContent.includes('<script>window.__pwned=1</script>'),
		}; })()`)
		if got.Pwned != nil || got.Scripts+got.Handlers+got.Images+got.JSLinks != 0 {
			t.Fatalf("model output was interpreted: %+v\n%s", got, p.transcript())
		}
		if !got.Shown {
			t.Fatalf("the raw markup should be shown as text:\n%s", p.transcript())
		}
	})

	t.Run("images from elsewhere are links, and nothing is fetched from there", func(t *testing.T) {
		// The "attacker's" image server: another origin on this machine.
		var mu sync.Mutex
		var fetched []string
		imgs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			fetched = append(fetched, r.URL.String())
			mu.Unlock()
			w.Header().Set("Content-Type", "image/gif")
			_, _ = w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
		}))
		defer imgs.Close()
		g := newGateway(t)
		g.llm.Push(
			openaitest.Reply{
				Text:      []string{"Here: ![a cat](" + imgs.URL + "/log?secret=s3cret) and ![inline](data:image/gif;base64,R0lGODlhAQABAAAAACw=)"},
				ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: `{"title":"Cat","image":{"url":"` + imgs.URL + `/card?secret=s3cret","alt":"the cat"}}`}},
			},
			openaitest.Reply{Text: []string{"Done."}},
		)
		p := openPage(t, browser, g.url+"/")
		p.say("show me a cat")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Done.'))`)
		p.waitFor(root + `.querySelector('.card h3')?.textContent === 'Cat'`)
		type report struct {
			External  int      `json:"external"`
			Inline    int      `json:"inline"`
			MsgLinks  []string `json:"msgLinks"`
			CardLinks []string `json:"cardLinks"`
			CardImgs  int      `json:"cardImgs"`
		}
		got := eval[report](p, `(() => { const log = `+root+`.querySelector('.log'); return {
			external: [...log.querySelectorAll('img')].filter(i => !i.src.startsWith('data:')).length,
			inline: [...log.querySelectorAll('.msg img')].filter(i => i.src.startsWith('data:')).length,
			msgLinks: [...log.querySelectorAll('.msg a')].map(a => a.href),
			cardLinks: [...log.querySelectorAll('.card a')].map(a => a.href),
			cardImgs: log.querySelectorAll('.card img').length,
		}; })()`)
		if got.External != 0 || got.CardImgs != 0 {
			t.Errorf("external images shown inline: %+v\n%s", got, p.transcript())
		}
		if got.Inline != 1 {
			t.Errorf("the data: image is not shown inline: %+v", got)
		}
		if len(got.MsgLinks) != 1 || !strings.HasPrefix(got.MsgLinks[0], imgs.URL+"/log") || len(got.CardLinks) != 1 || !strings.HasPrefix(got.CardLinks[0], imgs.URL+"/card") {
			t.Errorf("want each external image as a link to it: %+v", got)
		}
		// A last round trip, so anything the page would load has been asked for.
		p.say("/help")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=system]')].some(m => m.textContent.includes('Commands'))`)
		mu.Lock()
		defer mu.Unlock()
		if len(fetched) != 0 {
			t.Errorf("the page fetched %v from the image server", fetched)
		}
	})

	t.Run("keyboard and phone width", func(t *testing.T) {
		g := newGateway(t)
		p := openPage(t, browser, g.url+"/")
		p.do(chromedp.EmulateViewport(375, 700))
		if !eval[bool](p, `(() => { const r = `+root+`.querySelector('.panel').getBoundingClientRect(); return r.width === innerWidth && r.height === innerHeight; })()`) {
			t.Error("on a phone-width screen the open panel does not fill it")
		}
		p.do(chromedp.SendKeys(chromedp.JSPath(root+`.querySelector('textarea')`), "\x1b")) // Escape
		p.waitFor(root + `.querySelector('.panel').hidden && ` + root + `.querySelector('.launcher').getAttribute('aria-expanded') === 'false'`)
		p.waitFor(root + `.activeElement === ` + root + `.querySelector('.launcher')`)
		p.do(chromedp.KeyEvent("\r"))
		p.waitFor(`!` + root + `.querySelector('.panel').hidden && ` + root + `.activeElement === ` + root + `.querySelector('textarea')`)
	})
}
