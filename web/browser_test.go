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
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
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
//
// While it is down it hangs up every new connection at once, as a
// gateway that is not running would refuse them.
type cuttableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

func (l *cuttableListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return c, err
		}
		l.mu.Lock()
		if l.down {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		return c, nil
	}
}

// setDown takes the gateway off the network (cutting every connection)
// or puts it back.
func (l *cuttableListener) setDown(down bool) {
	l.mu.Lock()
	l.down = down
	l.mu.Unlock()
	if down {
		l.cutAll()
	}
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
	mgr *sessions.Manager
	url string
	ln  *cuttableListener
	// wsTries counts the requests to /ws (WebSocket handshakes).
	wsTries *atomic.Int64
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	return newGatewayWith(t, websocket.Config{}, web.Options{})
}

func newGatewayWith(t *testing.T, cfg websocket.Config, opts web.Options) *gateway {
	t.Helper()
	return newGatewayGuides(t, "../guides", cfg, opts)
}

// newGatewayGuides is a gateway with the guides in dir ("assistant" is the
// default).
func newGatewayGuides(t *testing.T, dir string, cfg websocket.Config, opts web.Options) *gateway {
	t.Helper()
	return newGatewayTuned(t, dir, cfg, opts, nil)
}

// newGatewayTuned is newGatewayGuides with the session manager's
// configuration changed by tune (files kept in a workspace).
func newGatewayTuned(t *testing.T, dir string, cfg websocket.Config, opts web.Options, tune func(*sessions.Config)) *gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	url := "http://" + srv.Listener.Addr().String()
	// Invite links point at this gateway, as http.public_url would.
	sg := sessionstest.NewTuned(t, dir, log, func(c *sessions.Config) {
		c.PublicURL = url
		if tune != nil {
			tune(c)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	wsTries := new(atomic.Int64)
	ws := websocket.New(ctx, cfg, sg.Manager, log)
	mux.Handle("GET /ws", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wsTries.Add(1)
		ws.ServeHTTP(w, r)
	}))
	mux.Handle("/", web.HandlerWith(opts))
	ln := &cuttableListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		cancel()
		ln.cutAll()
		srv.Close()
	})
	return &gateway{llm: sg.LLM, db: sg.DB, mgr: sg.Manager, url: url, ln: ln, wsTries: wsTries}
}

// page is one browser tab showing the demo page.
type page struct {
	t   *testing.T
	ctx context.Context
}

const root = `document.querySelector('switchboard-chat').shadowRoot`

func openPage(t *testing.T, browser context.Context, url string) *page {
	t.Helper()
	p := newTab(t, browser)
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

// waitFor polls a JavaScript expression until it is truthy. A page that
// is still loading may drop the script's execution context under the
// poll (Chrome: "Cannot find context with specified id", "Execution
// context was destroyed"): it is polled again in the new one.
func (p *page) waitFor(js string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil {
			return
		}
		if ctx.Err() == nil && (strings.Contains(err.Error(), "Cannot find context with specified id") || strings.Contains(err.Error(), "Execution context was destroyed")) {
			continue
		}
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

// noEmoji is a JavaScript regular expression matching emoji and the
// symbols that are drawn from an emoji font (💬 🔧 ⚠ ✓ …).
const noEmoji = `/[\u{1F300}-\u{1FAFF}\u{2600}-\u{27BF}]/u`

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

// contrastJS finds every control of the widget a person can use (enabled
// buttons, selects, inputs and text areas that are displayed) and measures
// its WCAG 2 contrast ratio: its text colour against its effective
// background, the backgrounds of it and its ancestors (through the shadow
// root to the page, whose canvas is white) composited from the first
// opaque one up, its text faded by any opacity on the way. It needs 4.5:1,
// or 3:1 for large text (24px, or 18.66px bold), as WCAG 1.4.3 does; a
// disabled control is exempt there. Colours are read through a canvas, so
// any CSS colour syntax counts.
const contrastJS = `(() => {
	const root = document.querySelector('switchboard-chat').shadowRoot;
	const cv = document.createElement('canvas'); cv.width = cv.height = 1;
	const cx = cv.getContext('2d', { willReadFrequently: true });
	const rgba = (c) => { cx.clearRect(0, 0, 1, 1); cx.fillStyle = 'rgba(0,0,0,0)'; cx.fillStyle = c; cx.fillRect(0, 0, 1, 1);
		const d = cx.getImageData(0, 0, 1, 1).data; return [d[0], d[1], d[2], d[3] / 255]; };
	const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3]));
	const up = (n) => n.parentElement || (n.getRootNode() instanceof ShadowRoot ? n.getRootNode().host : null);
	const lum = (c) => { const [r, g, b] = c.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
		return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
	const checked = [], failures = [];
	for (const e of root.querySelectorAll('button, select, input, textarea')) {
		const cs = getComputedStyle(e);
		if (e.disabled || !e.getClientRects().length || cs.visibility !== 'visible') continue;
		const layers = []; let opacity = 1, opaque = false;
		for (let n = e; n; n = up(n)) {
			const s = getComputedStyle(n);
			opacity *= Number(s.opacity);
			if (opaque) continue;
			const c = rgba(s.backgroundColor);
			if (c[3] > 0) layers.push(c);
			opaque = c[3] >= 1;
		}
		let bg = [255, 255, 255];
		for (const l of layers.reverse()) bg = over(l, bg);
		const text = rgba(cs.color);
		const fg = over([text[0], text[1], text[2], text[3] * opacity], bg);
		const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
		const ratio = (hi + 0.05) / (lo + 0.05);
		const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
		const need = size >= 24 || (size >= 18.66 && bold) ? 3 : 4.5;
		const name = e.tagName.toLowerCase() + [...e.classList].map((c) => '.' + c).join('') + ' "' +
			(e.getAttribute('aria-label') || e.textContent || e.placeholder || e.value || '').trim().slice(0, 40) + '"';
		checked.push(name);
		if (ratio < need) failures.push(name + ': ' + ratio.toFixed(2) + ':1, want ' + need + ':1 (' + cs.color +
			' on rgb(' + bg.map(Math.round).join(', ') + '))');
	}
	return { checked, failures };
})()`

// readable fails the test for every control of the widget whose text is
// not readable against its background (contrastJS), and returns the
// controls it checked.
func (p *page) readable(state string) []string {
	p.t.Helper()
	type result struct {
		Checked  []string `json:"checked"`
		Failures []string `json:"failures"`
	}
	r := eval[result](p, contrastJS)
	if len(r.Checked) == 0 {
		p.t.Errorf("%s: no control to check", state)
	}
	for _, f := range r.Failures {
		p.t.Errorf("%s: unreadable: %s", state, f)
	}
	return r.Checked
}

// colorScheme makes the page's system prefer a light or a dark colour
// scheme (the prefers-color-scheme media feature).
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// newTab is a tab of the browser that has not loaded anything yet.
func newTab(t *testing.T, browser context.Context) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)
	return &page{t: t, ctx: ctx}
}

// startBrowser starts headless Chromium for the test; its tabs are
// chromedp.NewContext(browser).
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := findChromium(t)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("headless", true))...)
	t.Cleanup(cancel)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return browser
}

func TestWidgetInBrowser(t *testing.T) {
	browser := startBrowser(t)

	t.Run("demo page loads with the widget open and connected", func(t *testing.T) {
		g := newGateway(t)
		p := openPage(t, browser, g.url+"/")
		title := eval[string](p, `document.title`)
		expanded := eval[string](p, root+`.querySelector('.launcher').getAttribute('aria-expanded')`)
		dialog := eval[bool](p, root+`.querySelector('[role=dialog]') !== null && !`+root+`.querySelector('[role=dialog]').hidden`)
		if title != "Switchboard demo" || expanded != "true" || !dialog {
			t.Fatalf("title %q, launcher aria-expanded %q, dialog shown %v", title, expanded, dialog)
		}
		p.waitFor(root + `.querySelector('.suggestions button') !== null`)
		p.readable("the welcome")
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
		p.readable("an approval")
		// A message while the tool waits is refused, not taken: marked so.
		p.say("are you there?")
		p.waitFor(`[...` + root + `.querySelectorAll('.notice')].some(n => n.textContent.includes('waiting for approval'))`)
		p.waitFor(`(() => { const m = [...` + root + `.querySelectorAll('.msg[data-role=user]')].pop();
			return m.querySelector('.body').textContent === 'are you there?' && m.dataset.pending === 'failed' && m.querySelector('.sending').textContent === 'not sent'; })()`)
		p.click(root + `.querySelector('.confirm button[data-approve]')`)
		p.waitFor(root + `.querySelector('.confirm .resolution')?.textContent.startsWith('Approved by ')`)
		if got := eval[string](p, root+`.querySelector('.confirm .resolution').textContent`); !strings.HasSuffix(got, " · Web") {
			t.Errorf("resolution %q, want who approved and from where (· Web)", got)
		}
		if n := eval[int](p, root+`.querySelectorAll('.confirm button').length`); n != 0 {
			t.Fatalf("%d Approve / Deny buttons left after the request was resolved", n)
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

		// /share's private answer is the gateway's own line, not an alert.
		p.say("/share viewer")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=system]')].some(m => /Invite code [a-z2-7]{26}/.test(m.textContent))`)
		if n := eval[int](p, `[...`+root+`.querySelectorAll('.notice')].filter(e => e.textContent.includes('Invite code')).length`); n != 0 {
			t.Fatal("the invite code was shown as an error")
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
		p.readable("a card with buttons")
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
		p.readable("a select and a form")

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
		if link := eval[string](p, `(() => { const a = `+root+`.querySelector('.card a');
			return (a.querySelector('svg[aria-hidden=true]') ? 'svg' : 'no svg') + '|' + a.textContent.trim() + '|' + `+noEmoji+`.test(a.textContent); })()`); link != "svg|the cat|false" {
			t.Errorf("the card's image link shows (icon|text|emoji) %q, want an svg icon and its alt text", link)
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

	t.Run("icons are inline SVG, not emoji", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
			openaitest.Reply{Text: []string{"Done."}},
		)
		p := openPage(t, browser, g.url+"/")
		type launcher struct {
			Label    string  `json:"label"`
			SVGs     int     `json:"svgs"`
			Hidden   string  `json:"hidden"`
			Stroke   string  `json:"stroke"`
			Width    float64 `json:"width"`
			Text     string  `json:"text"`
			HasEmoji bool    `json:"hasEmoji"`
		}
		l := eval[launcher](p, `(() => { const b = `+root+`.querySelector('.launcher'), s = b.querySelector('svg'); return {
			label: b.getAttribute('aria-label'), svgs: b.querySelectorAll('svg').length,
			hidden: s && s.getAttribute('aria-hidden'), stroke: s && s.getAttribute('stroke'),
			width: s ? s.getBoundingClientRect().width : 0,
			text: b.textContent, hasEmoji: `+noEmoji+`.test(b.textContent) }; })()`)
		if l.Label != "Open chat: Switchboard demo" || l.SVGs != 1 || l.Hidden != "true" || l.Stroke != "currentColor" || l.Width < 16 || l.Width > 40 || strings.TrimSpace(l.Text) != "" || l.HasEmoji {
			t.Errorf("launcher: %+v; want its label, one decorative currentColor svg of about 1em, no text", l)
		}

		p.say("time?")
		// While the call waits for approval its line shows the tool icon.
		p.waitFor(root + `.querySelector('.confirm button[data-approve]') !== null`)
		if got := eval[string](p, `(() => { const s = `+root+`.querySelector('.tool[data-call=call_1] summary');
			return s ? s.querySelectorAll('svg[aria-hidden=true]').length + '|' + s.textContent.trim() : 'no tool line'; })()`); got != "1|current_time" {
			t.Errorf("tool line before its result (svgs|text): %q, want 1|current_time", got)
		}
		p.click(root + `.querySelector('.confirm button[data-approve]')`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Done.'))`)
		// Answered: the tool icon, the name, and a check mark read as "done".
		if got := eval[string](p, `(() => { const s = `+root+`.querySelector('.tool[data-call=call_1] summary');
			return s.querySelectorAll('svg[aria-hidden=true]').length + '|' + s.textContent.trim(); })()`); got != "2|current_time done" {
			t.Errorf("answered tool line (svgs|text): %q, want 2|current_time done", got)
		}

		// No built-in tool carries a security warning: hand the widget a
		// request with one, as the gateway would send it.
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('switchboard-chat').handle({type: 'confirmation_request',
			data: {confirmation_id: 'c-warn', tool_call_id: 'call_w', tool_name: 'shell', args: {}, security_warning: 'it runs commands'}})`))
		if got := eval[string](p, `(() => { const w = `+root+`.querySelector('.confirm[data-confirmation=c-warn] .warning');
			return w ? w.querySelectorAll('svg[aria-hidden=true]').length + '|' + w.textContent.trim() : 'no warning'; })()`); got != "1|it runs commands" {
			t.Errorf("security warning (svgs|text): %q, want 1|it runs commands", got)
		}

		// An expiry or a cancellation is told by reason (or, stored before
		// reasons, by by alone without a channel), never by a name: people
		// called "Expired" or "cancelled" answer as people.
		p.do(chromedp.Evaluate[chromedp.Void](`(() => {
			const w = document.querySelector('switchboard-chat');
			const cases = [
				['c-r1', {by: 'Expired', channel: 'slack'}],
				['c-r2', {by: 'cancelled', channel: 'discord', approved: true}],
				['c-r3', {by: 'expired', reason: 'expired'}],
				['c-r4', {by: 'Ann', reason: 'cancelled'}],
				['c-r5', {by: 'expired'}],
			];
			for (const [id, d] of cases) {
				w.handle({type: 'confirmation_request', data: {confirmation_id: id, tool_call_id: 'call_' + id, tool_name: 'shell', args: {}}});
				w.handle({type: 'confirmation_resolved', data: {confirmation_id: id, approved: false, ...d}});
			}
		})()`))
		if got := eval[string](p, `['c-r1', 'c-r2', 'c-r3', 'c-r4', 'c-r5'].map(id => `+root+`.querySelector('.confirm[data-confirmation=' + id + '] .resolution')?.textContent).join('|')`); got != "Denied by Expired · Slack|Approved by cancelled · Discord|Expired: not run|Cancelled by Ann|Expired: not run" {
			t.Errorf("resolutions: %q", got)
		}

		// Nothing the widget shows is drawn from an emoji font.
		type shown struct {
			Text  string `json:"text"`
			Emoji bool   `json:"emoji"`
		}
		all := eval[shown](p, `(() => { const text = [...`+root+`.children].filter(n => n.tagName !== 'STYLE').map(n => n.textContent).join('\n');
			return { text, emoji: `+noEmoji+`.test(text) }; })()`)
		if all.Emoji {
			t.Errorf("the widget shows emoji:\n%s", all.Text)
		}
	})

	t.Run("the guide's greeting and suggestions welcome an empty conversation", func(t *testing.T) {
		dir := t.TempDir()
		const greeting = "Welcome to the <b>test</b> desk!"
		guide := "---\nname: assistant\ngreeting: \"" + greeting + "\"\nsuggestions: [\"What can you do?\", \"Tell me a joke\"]\n---\nYou are a test.\n"
		if err := os.WriteFile(dir+"/assistant.md", []byte(guide), 0o644); err != nil {
			t.Fatal(err)
		}
		g := newGatewayGuides(t, dir, websocket.Config{}, web.Options{})
		g.llm.Push(openaitest.Reply{Text: []string{"Many things."}})
		p := openPage(t, browser, g.url+"/")
		type welcome struct {
			Greeting string   `json:"greeting"`
			Markup   int      `json:"markup"`
			Chips    []string `json:"chips"`
		}
		const readWelcome = `(() => { const log = ` + root + `.querySelector('.log'), w = log.querySelector('.welcome'); return {
			greeting: w?.querySelector('.greeting')?.textContent ?? '',
			markup: w ? w.querySelectorAll('b').length : 0,
			chips: [...log.querySelectorAll('[role=group][aria-label=Suggestions] button[type=button]')].map(b => b.textContent) }; })()`
		p.waitFor(root + `.querySelector('.log .welcome') !== null`)
		w := eval[welcome](p, readWelcome)
		if w.Greeting != greeting || w.Markup != 0 || strings.Join(w.Chips, "|") != "What can you do?|Tell me a joke" {
			t.Fatalf("welcome: %+v; want the greeting as text and a chip per suggestion", w)
		}

		p.click(root + `.querySelector('[aria-label=Suggestions] button')`)
		p.waitFor(root + `.querySelector('.msg[data-role=user][data-mine=true] .body')?.textContent === 'What can you do?'`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('Many things.'))`)
		reqs := g.llm.Requests()
		last := reqs[len(reqs)-1].Messages
		if got := openaitest.Text(last[len(last)-1].Content); got != "What can you do?" {
			t.Errorf("the model was told %q, want the suggestion as typed", got)
		}
		if w := eval[welcome](p, readWelcome); w.Greeting != "" || len(w.Chips) != 0 {
			t.Errorf("after the first message the welcome is still shown: %+v", w)
		}
		if !eval[bool](p, root+`.activeElement === `+root+`.querySelector('textarea')`) {
			t.Error("after a suggestion is clicked the focus is not in the message box")
		}

		// A reload resumes the conversation, which is not empty: no welcome.
		p.do(chromedp.Reload())
		p.waitFor(`document.querySelector('switchboard-chat')?.dataset.connected === 'true'`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Many things.'))`)
		if w := eval[welcome](p, readWelcome); w.Greeting != "" || len(w.Chips) != 0 || eval[bool](p, root+`.querySelector('.log').textContent.includes('Welcome to the')`) {
			t.Errorf("a resumed conversation shows the welcome: %+v\n%s", w, p.transcript())
		}
		// Nor for a moment before the replay: load the widget into a fresh
		// page of the same origin (so it resumes the same session), watching
		// everything added to its shadow root.
		p.do(chromedp.Navigate(g.url + "/nope"))
		p.do(chromedp.Evaluate[chromedp.Void](`(() => {
			window.__welcomed = false;
			const attach = Element.prototype.attachShadow;
			Element.prototype.attachShadow = function (init) {
				const r = attach.call(this, init);
				new MutationObserver((records) => { for (const m of records) for (const n of m.addedNodes)
					if (n.nodeType === 1 && (n.matches('.welcome') || n.querySelector('.welcome'))) window.__welcomed = true; })
					.observe(r, { childList: true, subtree: true });
				return r;
			};
			const s = document.createElement('script');
			s.src = '/widget.js';
			s.dataset.open = '';
			document.head.append(s);
		})()`))
		p.waitFor(`document.querySelector('switchboard-chat')?.dataset.connected === 'true'`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Many things.'))`)
		if eval[bool](p, `window.__welcomed`) {
			t.Error("resuming a conversation showed the welcome before the replay")
		}

		// A typed first message ends the welcome as well.
		g2 := newGatewayGuides(t, dir, websocket.Config{}, web.Options{})
		g2.llm.Push(openaitest.Reply{Text: []string{"Hello."}})
		p2 := openPage(t, browser, g2.url+"/")
		p2.waitFor(root + `.querySelector('.log .welcome .greeting')?.textContent === ` + fmt.Sprintf("%q", greeting))
		p2.say("hi")
		p2.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('Hello.'))`)
		if w := eval[welcome](p2, readWelcome); w.Greeting != "" || len(w.Chips) != 0 {
			t.Errorf("after a typed message the welcome is still shown: %+v", w)
		}
	})

	t.Run("every control is readable, in the light and the dark", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "call_1", Name: "present", Args: `{"title":"Pick","text":"Which?","buttons":[{"label":"Plain","value":"p"},{"label":"Go","value":"g","style":"primary"},{"label":"Stop","value":"s","style":"danger"}],"select":{"placeholder":"Size","options":[{"label":"Small","value":"s"}]}}`},
			{ID: "call_2", Name: "present", Args: `{"title":"Contact","form":{"submit_label":"Send it","inputs":[{"name":"name","label":"Name"},{"name":"note","label":"Note","type":"textarea"}]}}`},
			{ID: "call_3", Name: "current_time", Args: `{"timezone":"UTC"}`},
		}})
		p := openPage(t, browser, g.url+"/")
		p.waitFor(root + `.querySelector('.suggestions button') !== null`)
		both := func(state string) {
			t.Helper()
			p.do(colorScheme("light"))
			p.waitFor(`getComputedStyle(` + root + `.querySelector('.panel')).backgroundColor === 'rgb(255, 255, 255)'`)
			p.readable(state + ", light")
			p.do(colorScheme("dark"))
			// Dark: the panel and its text turn, and so does the message box.
			p.waitFor(`getComputedStyle(` + root + `.querySelector('.panel')).backgroundColor === 'rgb(23, 28, 38)'`)
			if got := eval[string](p, `getComputedStyle(`+root+`.querySelector('textarea')).colorScheme`); got != "dark" {
				t.Errorf("%s, dark: the message box's color-scheme is %q", state, got)
			}
			p.readable(state + ", dark")
		}
		both("the welcome")

		// Cards with buttons of every style, a select, a form, an approval
		// and the invite link, all at once.
		p.stubClipboard(true)
		p.say("show me everything")
		p.waitFor(root + `.querySelector('.confirm button[data-approve]') !== null`)
		p.waitFor(root + `.querySelector('.card form button[type=submit]') !== null && ` + root + `.querySelectorAll('.card .actions button').length === 3`)
		p.shareLink()
		p.waitFor(root + `.querySelector('.share-link .share-status').textContent === 'Link copied'`)
		both("cards, a form, an approval and the invite link")
		// The form's submit is a primary button, as the card's primary one
		// and Approve are, not a plain one.
		if bgs := eval[[]string](p, `[...['.card form button[type=submit]', '.card .actions button.primary', '.confirm button[data-approve]', '.card .actions button:not([class])']]
			.map((s) => getComputedStyle(`+root+`.querySelector(s)).backgroundColor)`); bgs[0] != bgs[1] || bgs[0] != bgs[2] || bgs[0] == bgs[3] {
			t.Errorf("backgrounds of the form's submit, a primary button, Approve and a plain button: %q; want the first three alike", bgs)
		}
		checked := strings.Join(p.readable("dark, again"), "\n")
		for _, want := range []string{`button.primary "Send it"`, `button.primary "Go"`, `button.danger "Stop"`, `button "Plain"`,
			`button "Approve"`, `button "Deny"`, `button "Always allow"`, `button.share "Share"`, `button.hide "Hide the invite link"`,
			`button.send "Send"`, `button.close "Close chat"`, `button.launcher "Open chat: Switchboard demo"`, `select "Size"`, `textarea "Message"`} {
			if !strings.Contains(checked, want) {
				t.Errorf("the check did not see %s; it saw:\n%s", want, checked)
			}
		}

		// theme="light" or "dark" on the element sets the theme whatever
		// the system prefers.
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('switchboard-chat').setAttribute('theme', 'light')`))
		p.waitFor(`getComputedStyle(` + root + `.querySelector('.panel')).backgroundColor === 'rgb(255, 255, 255)'`)
		p.do(colorScheme("light"), chromedp.Evaluate[chromedp.Void](`document.querySelector('switchboard-chat').setAttribute('theme', 'dark')`))
		p.waitFor(`getComputedStyle(` + root + `.querySelector('.panel')).backgroundColor === 'rgb(23, 28, 38)'`)
		p.readable("theme=dark on a light system")
	})

	t.Run("while disconnected the conversation stays, and a message waits, greyed, until it is sent", func(t *testing.T) {
		g := newGateway(t)
		g.llm.Push(openaitest.Reply{Text: []string{"One."}}, openaitest.Reply{Text: []string{"Two."}})
		p := openPage(t, browser, g.url+"/")
		p.say("first")
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('One.'))`)

		g.ln.setDown(true) // the gateway goes away and stays away
		p.waitFor(`document.querySelector('switchboard-chat').dataset.connected === 'false'`)
		p.say("second")
		// At once, after what was said before, greyed and "sending…".
		const last = `[...` + root + `.querySelectorAll('.log .msg')].pop()`
		p.waitFor(last + `.dataset.pending === 'sending' && ` + last + `.querySelector('.body').textContent === 'second' && ` + last + `.querySelector('.sending')?.textContent === 'sending…'`)
		type look struct {
			Color      string `json:"color"`
			Background string `json:"background"`
		}
		lookOf := func(js string) look {
			return eval[look](p, `(() => { const s = getComputedStyle(`+js+`); return { color: s.color, background: s.backgroundColor }; })()`)
		}
		sent, waiting := lookOf(root+`.querySelector('.msg[data-role=user][data-mine=true]:not([data-pending])')`), lookOf(last)
		if sent == waiting {
			t.Errorf("the waiting message looks like a sent one: %+v", sent)
		}
		p.readable("disconnected, a message waiting")

		// However long it stays away, what was said stays on screen and the
		// widget keeps trying: a gateway that is down is not one that
		// refuses this page.
		p.waitFor(`document.querySelector('switchboard-chat').failedOpens > 3`)
		for _, m := range []struct{ sel, text string }{{".msg[data-role=user]", "first"}, {".msg[data-role=assistant]", "One."}, {".msg[data-role=user]", "second"}} {
			if n := p.count(m.sel, m.text); n != 1 {
				t.Errorf("while disconnected %q is shown %d times:\n%s", m.text, n, p.transcript())
			}
		}
		if got := eval[string](p, root+`.querySelector('.state').textContent`); got != "reconnecting…" {
			t.Errorf("state line %q while the gateway is down, want reconnecting…", got)
		}
		if n := eval[int](p, root+`.querySelectorAll('.notice').length`); n != 0 || eval[bool](p, root+`.querySelector('textarea').disabled`) {
			t.Fatalf("a gateway that is down was taken for a refusal:\n%s", p.transcript())
		}

		// Back, and the browser says the network is (rather than wait for
		// the next try, seconds away by now).
		g.ln.setDown(false)
		p.do(chromedp.Evaluate[chromedp.Void](`window.dispatchEvent(new Event('online'))`))
		p.waitFor(`document.querySelector('switchboard-chat').dataset.connected === 'true'`)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('Two.'))`)
		if n := eval[int](p, root+`.querySelectorAll('.msg[data-pending], .msg .sending').length`); n != 0 {
			t.Errorf("%d messages still marked as waiting:\n%s", n, p.transcript())
		}
		if n := p.count(".msg[data-role=user][data-mine=true]", "second"); n != 1 {
			t.Errorf("the waiting message is shown %d times once sent:\n%s", n, p.transcript())
		}
		if got := lookOf(`[...` + root + `.querySelectorAll('.msg[data-role=user]')].pop()`); got != sent {
			t.Errorf("once sent the message looks %+v, want %+v like the others", got, sent)
		}
		if n := eval[int](p, root+`.querySelectorAll('.msg').length`); n != 4 {
			t.Errorf("%d bubbles, want 4:\n%s", n, p.transcript())
		}
		reqs := g.llm.Requests()
		last2 := reqs[len(reqs)-1].Messages
		if got := openaitest.Text(last2[len(last2)-1].Content); got != "second" {
			t.Errorf("the model was told %q, want the message typed while away", got)
		}
	})

	t.Run("a site whose origin the gateway refuses is told so, and the widget stops", func(t *testing.T) {
		// A gateway on a public address allows only its own origin (and
		// listeners.websocket.allowed_origins): the shop's page is refused.
		g := newGatewayWith(t, websocket.Config{Addr: "192.0.2.10:443"}, web.Options{})
		shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>Shop</title><h1>Shop</h1><script src="%s/widget.js" data-open></script>`, g.url)
		}))
		defer shop.Close()
		p := newTab(t, browser)
		p.do(chromedp.Navigate(shop.URL))
		p.waitFor(`[...` + root + `.querySelectorAll('.notice[role=alert]')].some(n => n.textContent === 'This site is not allowed to use this chat')`)
		if n := g.wsTries.Load(); n != 3 {
			t.Errorf("%d handshakes before giving up, want 3", n)
		}
		type state struct {
			Socket      bool   `json:"socket"`
			Disabled    bool   `json:"disabled"`
			Placeholder string `json:"placeholder"`
			Status      string `json:"status"`
		}
		const read = `(() => { const w = document.querySelector('switchboard-chat'), r = w.shadowRoot; return {
			socket: w.ws !== null, disabled: r.querySelector('textarea').disabled,
			placeholder: r.querySelector('textarea').placeholder, status: r.querySelector('.state').textContent }; })()`
		want := state{Placeholder: "This site is not allowed to use this chat", Disabled: true}
		if got := eval[state](p, read); got != want {
			t.Errorf("after the refusal: %+v, want %+v", got, want)
		}
		// Closing and opening the panel, or the network coming back, does
		// not start it again.
		p.click(root + `.querySelector('.launcher')`)
		p.click(root + `.querySelector('.launcher')`)
		p.do(chromedp.Evaluate[chromedp.Void](`window.dispatchEvent(new Event('online'))`))
		if got := eval[state](p, read); got != want {
			t.Errorf("after reopening: %+v, want %+v", got, want)
		}
		if n := eval[int](p, root+`.querySelectorAll('.notice').length`); n != 1 {
			t.Errorf("%d notices, want the one:\n%s", n, p.transcript())
		}

		// The gateway's own page is still served and works.
		own := openPage(t, browser, g.url+"/")
		if n := eval[int](own, root+`.querySelectorAll('.notice').length`); n != 0 {
			t.Errorf("the gateway's own page shows a notice:\n%s", own.transcript())
		}
	})

	t.Run("the page translates the widget's own texts", func(t *testing.T) {
		g := newGateway(t)
		gate := make(chan struct{})
		g.llm.Push(openaitest.Reply{Text: []string{"Hallo ", "Welt."}, Gate: gate})
		p := newTab(t, browser)
		p.do(chromedp.Navigate(g.url + "/nope"))
		// The script tag's data-strings: two of them in German.
		p.do(chromedp.Evaluate[chromedp.Void](`(() => {
			const s = document.createElement('script');
			s.src = '/widget.js';
			s.dataset.open = '';
			s.dataset.strings = JSON.stringify({ send: 'Senden', thinking: 'denkt nach…' });
			document.head.append(s);
		})()`))
		p.waitFor(`document.querySelector('switchboard-chat')?.dataset.connected === 'true'`)
		type chrome struct {
			Send        string `json:"send"`
			Placeholder string `json:"placeholder"`
			Close       string `json:"close"`
		}
		const readChrome = `(() => { const r = document.querySelector('switchboard-chat').shadowRoot; return {
			send: r.querySelector('button.send').textContent, placeholder: r.querySelector('textarea').placeholder,
			close: r.querySelector('button.close').getAttribute('aria-label') }; })()`
		if got, want := eval[chrome](p, readChrome), (chrome{"Senden", "Type a message…", "Close chat"}); got != want {
			t.Errorf("with two strings translated: %+v, want %+v", got, want)
		}
		p.say("hallo")
		p.waitFor(root + `.querySelector('.state').textContent === 'denkt nach…'`)
		close(gate)
		p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('Hallo Welt.'))`)

		// The strings property: set live, it replaces the page's strings.
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('switchboard-chat').strings = { placeholder: 'Votre message…' }`))
		if got, want := eval[chrome](p, readChrome), (chrome{"Send", "Votre message…", "Close chat"}); got != want {
			t.Errorf("after setting the strings property: %+v, want %+v", got, want)
		}
		// Every text of the panel's frame comes from the strings.
		texts := eval[[]string](p, `(() => {
			const w = document.querySelector('switchboard-chat'), r = w.shadowRoot;
			w.strings = Object.fromEntries(Object.keys(customElements.get('switchboard-chat').strings).map((k) => [k, '«' + k + '»']));
			const at = (sel, attr) => { const e = r.querySelector(sel); return attr ? e.getAttribute(attr) : e.textContent; };
			return [at('.launcher', 'aria-label'), at('.panel', 'aria-label'), at('h2'), at('.log', 'aria-label'),
				at('textarea', 'aria-label'), at('textarea', 'placeholder'), at('button.send'), at('button.share'),
				at('button.share', 'title'), at('.close', 'aria-label'), at('ul.people', 'aria-label'), at('.share-link', 'aria-label')];
		})()`)
		for _, s := range texts {
			if !regexp.MustCompile(`^«\w+»`).MatchString(s) {
				t.Errorf("%q is not one of the strings (all: %q)", s, texts)
			}
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

// openPerson opens url in a browser context of its own: another person,
// with their own localStorage (and so their own anonymous id).
func openPerson(t *testing.T, browser context.Context, url string) *page {
	t.Helper()
	return openPage(t, newPerson(t, browser), url)
}

// newPerson is a new browser context, for openPage's tab to inherit.
func newPerson(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // its first run creates the browser context
		t.Fatalf("new browser context: %v", err)
	}
	return ctx
}

// people is the header's list of people, as their accessible labels.
func (p *page) people() []string {
	p.t.Helper()
	return eval[[]string](p, `(() => { const ul = `+root+`.querySelector('ul.people');
		return ul.hidden ? [] : [...ul.querySelectorAll('li')].map(li => li.querySelector('.sr-only').textContent); })()`)
}

// stubClipboard makes navigator.clipboard.writeText succeed (recording
// what it was given in window.__copied) or refuse, as a browser without
// the permission does.
func (p *page) stubClipboard(ok bool) {
	p.t.Helper()
	p.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`Object.defineProperty(navigator, 'clipboard', { configurable: true, value: {
		writeText: (text) => %t ? (window.__copied = text, Promise.resolve()) : Promise.reject(new DOMException('denied', 'NotAllowedError')) } })`, ok)))
}

// shareLink clicks Share and returns the link the panel then shows.
func (p *page) shareLink() string {
	p.t.Helper()
	before := eval[string](p, `(`+root+`.querySelector('.share-link input') || {}).value || ''`)
	p.click(root + `.querySelector('button.share')`)
	p.waitFor(`(() => { const i = ` + root + `.querySelector('.share-link:not([hidden]) input'); return i && i.value !== ` + fmt.Sprintf("%q", before) + `; })()`)
	return eval[string](p, root+`.querySelector('.share-link input').value`)
}

var linkRE = regexp.MustCompile(`^(http://[^/]+)/s/([a-z2-7]{26})$`)

// sharedPage opens the demo page for its owner and says one thing in it.
func sharedPage(t *testing.T, browser context.Context, g *gateway) *page {
	t.Helper()
	g.llm.Push(openaitest.Reply{Text: []string{"First answer."}})
	p := openPerson(t, browser, g.url+"/")
	p.say("first question")
	p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]:not(.streaming)')].some(m => m.textContent.includes('First answer.'))`)
	p.stubClipboard(true)
	return p
}

func TestSharingInBrowser(t *testing.T) {
	browser := startBrowser(t)

	t.Run("the owner's Share button copies a working link and shows it", func(t *testing.T) {
		g := newGateway(t)
		ann := sharedPage(t, browser, g)
		if !eval[bool](ann, `!`+root+`.querySelector('button.share').hidden`) {
			t.Fatal("the owner has no Share button")
		}
		link := ann.shareLink()
		m := linkRE.FindStringSubmatch(link)
		if m == nil || m[1] != g.url {
			t.Fatalf("the link shown is %q, want %s/s/<code>", link, g.url)
		}
		ann.waitFor(root + `.querySelector('.share-link .share-status').textContent === 'Link copied'`)
		ann.readable("the invite link")
		if copied := eval[string](ann, `window.__copied`); copied != link {
			t.Fatalf("copied %q, shown %q", copied, link)
		}
		// The notice's text is still shown as the gateway's own line.
		ann.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=system]')].some(m => m.textContent.includes('Invite code ` + m[2] + `'))`)

		// Without the clipboard the link is there to copy by hand, selected.
		ann.stubClipboard(false)
		second := ann.shareLink()
		ann.waitFor(root + `.querySelector('.share-link .share-status').textContent === 'Copy this link'`)
		if second == link || !linkRE.MatchString(second) {
			t.Fatalf("second link %q (first %q), want a new one", second, link)
		}
		if sel := eval[string](ann, `(() => { const i = `+root+`.querySelector('.share-link input'); return `+root+`.activeElement === i ? i.value.slice(i.selectionStart, i.selectionEnd) : 'not focused'; })()`); sel != second {
			t.Fatalf("selected %q, want the whole link", sel)
		}

		// The link is a page that brings another person into the
		// conversation, as a member: no Share button for them.
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", link, resp.StatusCode)
		}
		bob := openPerson(t, browser, link)
		session := eval[string](ann, `document.querySelector('switchboard-chat').dataset.session`)
		if got := eval[string](bob, `document.querySelector('switchboard-chat').dataset.session`); got != session {
			t.Fatalf("the link opened session %q, want %q", got, session)
		}
		if !eval[bool](bob, root+`.querySelector('button.share').hidden`) {
			t.Fatal("a member has a Share button")
		}
	})

	t.Run("the people are listed when a second person joins, and as they come and go", func(t *testing.T) {
		g := newGateway(t)
		ann := sharedPage(t, browser, g)
		if got := ann.people(); len(got) != 0 {
			t.Fatalf("a conversation of one lists %q", got)
		}
		link := ann.shareLink()
		bob := openPerson(t, browser, link)

		guest := `Guest \d{4}`
		annHere := regexp.MustCompile(`^` + guest + ` \(you\) · Web · owner · here now$`)
		bobHere := regexp.MustCompile(`^` + guest + ` · Web · member · here now$`)
		// Joining and attaching are two lists (Bob in, then Bob here), and
		// Ann's may come after Bob's page is ready: wait for the second.
		ann.waitFor(root + `.querySelectorAll('ul.people:not([hidden]) li[data-here=true]').length === 2`)
		if got := ann.people(); len(got) != 2 || !annHere.MatchString(got[0]) || !bobHere.MatchString(got[1]) {
			t.Fatalf("ann's list: %q, want her (owner) and a guest member, both here", got)
		}
		if got := bob.people(); len(got) != 2 || strings.Contains(got[0], "(you)") || !strings.Contains(got[1], "(you) · Web · member · here now") {
			t.Fatalf("bob's list: %q, want ann and himself", got)
		}
		// Each badge: initials, a dot for here, its label as a tooltip.
		type badge struct {
			Initials string `json:"initials"`
			Dots     int    `json:"dots"`
			Title    string `json:"title"`
		}
		b := eval[badge](ann, `(() => { const li = `+root+`.querySelectorAll('ul.people li')[1];
			return { initials: li.querySelector('.avatar').textContent, dots: li.querySelectorAll('.here').length, title: li.title }; })()`)
		if !regexp.MustCompile(`^G\d$`).MatchString(b.Initials) || b.Dots != 1 || !bobHere.MatchString(b.Title) {
			t.Fatalf("bob's badge: %+v", b)
		}

		// Bob closes his tab: still in the conversation, not here.
		bobName := eval[string](bob, `document.querySelector('switchboard-chat').shadowRoot.querySelectorAll('ul.people li')[1].title.split(' (you)')[0]`)
		p := bob.ctx
		if err := chromedp.Do(p, chromedp.Navigate("about:blank")); err != nil {
			t.Fatal(err)
		}
		ann.waitFor(`[...` + root + `.querySelectorAll('ul.people li')].some(li => li.dataset.here === 'false' && li.title.startsWith(` + fmt.Sprintf("%q", bobName+" · Web · member · last seen") + `))`)

		// He comes back (the link again: the same conversation, no new
		// use of the code) and leaves it: Ann is alone again.
		if err := chromedp.Do(p, chromedp.Navigate(link)); err != nil {
			t.Fatal(err)
		}
		bob.waitFor(`document.querySelector('switchboard-chat')?.dataset.connected === 'true'`)
		ann.waitFor(`[...` + root + `.querySelectorAll('ul.people li')].filter(li => li.dataset.here === 'true').length === 2`)
		bob.say("/leave")
		bob.waitFor(`[...` + root + `.querySelectorAll('.notice')].some(n => n.textContent === 'You left this conversation.')`)
		ann.waitFor(root + `.querySelector('ul.people').hidden`)
		ann.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=system]')].some(m => m.textContent.includes(` + fmt.Sprintf("%q", bobName+" left the conversation.") + `))`)
		if !eval[bool](bob, root+`.querySelector('textarea').disabled`) {
			t.Error("after leaving, bob can still type into the conversation")
		}
	})

	t.Run("the link shows the conversation so far, and a reload spends no other use", func(t *testing.T) {
		g := newGateway(t)
		ann := sharedPage(t, browser, g)
		ann.say("/share uses 1")
		ann.waitFor(root + `.querySelector('.share-link:not([hidden]) input') !== null`)
		link := eval[string](ann, root+`.querySelector('.share-link input').value`)
		if !linkRE.MatchString(link) {
			t.Fatalf("link %q", link)
		}
		bob := openPerson(t, browser, link)
		shown := func(p *page) {
			t.Helper()
			p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('First answer.'))`)
			if n := p.count(".msg[data-role=user][data-mine=false]", "first question"); n != 1 {
				t.Fatalf("ann's question shown %d times to bob:\n%s", n, p.transcript())
			}
			if n := p.count(".msg[data-role=assistant]", "First answer."); n != 1 {
				t.Fatalf("the answer shown %d times to bob:\n%s", n, p.transcript())
			}
			if n := eval[int](p, root+`.querySelectorAll('.notice').length`); n != 0 {
				t.Fatalf("bob sees a notice:\n%s", p.transcript())
			}
		}
		shown(bob)
		bob.do(chromedp.Reload())
		bob.waitFor(`document.querySelector('switchboard-chat')?.dataset.connected === 'true'`)
		shown(bob)
		if got := eval[string](bob, `document.querySelector('switchboard-chat').dataset.session`); got != eval[string](ann, `document.querySelector('switchboard-chat').dataset.session`) {
			t.Fatalf("after a reload bob is in %q", got)
		}
		// The one use went to Bob's first visit: a third person is told.
		ctx, cancel := context.WithTimeout(newPerson(t, browser), 60*time.Second)
		defer cancel()
		carol := &page{t: t, ctx: ctx}
		carol.do(chromedp.Navigate(link))
		carol.waitFor(`[...` + root + `.querySelectorAll('.notice')].some(n => n.textContent.startsWith('This invite link cannot be used: that invite code has been used as many times as it allows'))`)
		if !eval[bool](carol, root+`.querySelector('textarea').disabled`) || eval[string](carol, `document.querySelector('switchboard-chat').dataset.session || ''`) != "" {
			t.Fatalf("a refused link left the widget usable or attached:\n%s", carol.transcript())
		}
	})

	t.Run("others' messages and decisions say who and from where", func(t *testing.T) {
		g := newGateway(t)
		ann := sharedPage(t, browser, g)
		ann.say("/share approver")
		ann.waitFor(root + `.querySelector('.share-link:not([hidden]) input') !== null`)
		code := linkRE.FindStringSubmatch(eval[string](ann, root+`.querySelector('.share-link input').value`))[2]
		session := eval[string](ann, `document.querySelector('switchboard-chat').dataset.session`)

		// Carol joins from Slack, as the Slack listener does it.
		ctx := context.Background()
		carol := switchboard.Author{Channel: "slack", ID: "U0CAROL", Name: "Carol"}
		if _, _, err := g.mgr.JoinPlace(ctx, code, carol, sessions.Place{Channel: "slack", Address: "T1:D0CAROL", Direct: true}, 5, nil); err != nil {
			t.Fatal(err)
		}
		ann.waitFor(`[...` + root + `.querySelectorAll('ul.people li')].some(li => li.title.startsWith('Carol · Slack · approver · '))`)

		g.llm.Push(
			openaitest.Reply{Text: []string{"Hi Carol."}},
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
			openaitest.Reply{Text: []string{"It is noon."}},
		)
		if _, err := g.mgr.Submit(ctx, session, switchboard.Input{Kind: switchboard.InputText, ClientID: "s1", Author: carol, Place: "slack:D0CAROL", Text: "hello from Slack"}); err != nil {
			t.Fatal(err)
		}
		ann.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=user]')].some(m => m.querySelector('.author')?.textContent === 'Carol · Slack' && m.querySelector('.body').textContent === 'hello from Slack')`)
		ann.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Hi Carol.'))`)

		ann.say("time?")
		ann.waitFor(root + `.querySelector('.confirm button[data-approve]') !== null`)
		id := eval[string](ann, root+`.querySelector('.confirm').dataset.confirmation`)
		if _, err := g.mgr.Submit(ctx, session, switchboard.Input{Kind: switchboard.InputConfirm, Author: carol, Place: "slack:D0CAROL", ConfirmationID: id, Approved: true}); err != nil {
			t.Fatal(err)
		}
		ann.waitFor(root + `.querySelector('.confirm .resolution')?.textContent === 'Approved by Carol · Slack'`)
		if n := eval[int](ann, root+`.querySelectorAll('.confirm button').length`); n != 0 {
			t.Fatalf("%d buttons left on a request Carol answered", n)
		}
		ann.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('It is noon.'))`)
	})
}
