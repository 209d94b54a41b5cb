package sessionstest

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Person is someone attached to a session straight through the manager,
// as a web page is: what they say, and the events they are shown. The
// listeners' tests use one as the other side of a shared conversation.
type Person struct {
	g      *Gateway
	Author switchboard.Author
	Sub    *sessions.Subscription
	// ID is the session's.
	ID string
}

// Open attaches author to a session (a new one unless opts says which),
// live events only unless opts.AfterSeq says otherwise; it is closed when
// the test ends.
func (g *Gateway) Open(author switchboard.Author, opts sessions.AttachOptions) *Person {
	g.t.Helper()
	if opts.AfterSeq == 0 && opts.SessionID == "" {
		opts.AfterSeq = -1
	}
	opts.Author = author
	sub, err := g.Manager.Attach(context.Background(), opts)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(sub.Close)
	return &Person{g: g, Author: author, Sub: sub, ID: sub.Ready.Session}
}

// Say sends text as the person and waits until the session is done with it
// (or waits for an approval).
func (p *Person) Say(text string) {
	p.g.t.Helper()
	p.SayWithFile(text, "", nil)
}

// SayWithFile is Say with a file of the person's, uploaded first (the
// gateway's Uploads must be set); no file when name is empty.
func (p *Person) SayWithFile(text, name string, data []byte) {
	p.g.t.Helper()
	in := switchboard.Input{Kind: switchboard.InputText, Author: p.Author, Text: text}
	if name != "" {
		files, err := p.g.Manager.Upload(context.Background(), p.ID, in, []sessions.Incoming{{Name: name, Size: int64(len(data)),
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}})
		if err != nil {
			p.g.t.Fatalf("%s sends %s: %v", p.Author.Name, name, err)
		}
		in.Files = files
	}
	rec, err := p.g.Manager.Submit(context.Background(), p.ID, in)
	if err != nil {
		p.g.t.Fatalf("%s says %q: %v", p.Author.Name, text, err)
	}
	if _, err := rec.Wait(context.Background()); err != nil {
		p.g.t.Fatalf("%s says %q: %v", p.Author.Name, text, err)
	}
}

// Await reads the person's events until one satisfies cond, failing the
// test after 15 s with what was awaited.
func (p *Person) Await(what string, cond func(switchboard.Event) bool) switchboard.Event {
	p.g.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev := <-p.Sub.Events():
			if cond(ev) {
				return ev
			}
		case <-deadline:
			p.g.t.Fatalf("%s never saw %s", p.Author.Name, what)
		}
	}
}

// InviteCode finds the code in a /share answer.
var InviteCode = regexp.MustCompile(`Invite code ([a-z2-7]{26})`)

// Share runs /share args as the person and returns the code.
func (p *Person) Share(args string) string {
	p.g.t.Helper()
	p.Say("/share " + args)
	ev := p.Await("an invite code", func(ev switchboard.Event) bool { return InviteCode.Match(ev.Data) })
	return InviteCode.FindStringSubmatch(string(ev.Data))[1]
}
