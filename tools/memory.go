package tools

// The explicit memory tools: remember and forget. A memory is the person's
// being answered (AuthorOf), kept by the store the gateway gives
// (Memories); it is offered to the model in that person's conversations
// only (sessions), listed by /memory and deleted for good by forget or
// /forget.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
)

// Memories is what the memory tools need of the store.
type Memories interface {
	AddMemory(ctx context.Context, m switchboard.Memory) error
	ForgetMemory(ctx context.Context, owner, id string) error
}

// MaxMemory is the longest memory kept, in characters.
const MaxMemory = 1000

type authorKey struct{}

// WithAuthor tells the tools whom a call answers: the person whose message
// the turn answers.
func WithAuthor(ctx context.Context, a switchboard.Author) context.Context {
	return context.WithValue(ctx, authorKey{}, a)
}

// AuthorOf is the person a call answers, the zero Author outside a turn.
func AuthorOf(ctx context.Context) switchboard.Author {
	a, _ := ctx.Value(authorKey{}).(switchboard.Author)
	return a
}

// MemoryTools are remember and forget, keeping memories in store (nil: a
// registry that only lists them, whose calls say so).
func MemoryTools(store Memories, now func() time.Time) []Tool {
	if store == nil {
		store = noMemories{}
	}
	return []Tool{remember(store, now), forget(store)}
}

type noMemories struct{}

var errNoMemories = errors.New("memories are not kept by this gateway")

func (noMemories) AddMemory(context.Context, switchboard.Memory) error { return errNoMemories }
func (noMemories) ForgetMemory(context.Context, string, string) error  { return errNoMemories }

func remember(store Memories, now func() time.Time) Tool {
	return Tool{
		Name: "remember",
		Description: "Keeps something the person you are answering asked you to remember about them (a preference, a fact about them), " +
			"for all their future conversations. Only for what they asked you to remember; never for what others said.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"What to remember, as one short sentence about the person."}},"required":["text"]}`),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return Result{}, err
			}
			text := strings.TrimSpace(in.Text)
			who := AuthorOf(ctx)
			switch {
			case who.ID == "":
				return Result{}, errors.New("there is no person to remember this for in this turn")
			case text == "":
				return Result{}, errors.New("text is empty: say what to remember")
			case utf8.RuneCountInString(text) > MaxMemory:
				return Result{}, fmt.Errorf("text is %d characters; a memory holds at most %d: keep it to the point", utf8.RuneCountInString(text), MaxMemory)
			}
			var id [6]byte
			_, _ = rand.Read(id[:])
			m := switchboard.Memory{ID: "mem_" + hex.EncodeToString(id[:]), Owner: who.Key(), Text: text,
				SessionID: SessionOf(ctx), Channel: who.Channel, CreatedAt: now().UTC()}
			if err := store.AddMemory(ctx, m); errors.Is(err, switchboard.ErrMemoriesFull) {
				return Result{}, fmt.Errorf("%s keeps %d memories, the most a person may: tell them to remove one they no longer need (/memory lists them, /forget <id> removes one), then remember this", who.DisplayName(), switchboard.MaxMemories)
			} else if err != nil {
				return Result{}, fmt.Errorf("the memory could not be kept: %w", err)
			}
			return Result{Content: fmt.Sprintf("Remembered for %s (id %s). They can list their memories with /memory and remove one with /forget %s.", who.DisplayName(), m.ID, m.ID)}, nil
		},
	}
}

func forget(store Memories) Tool {
	return Tool{
		Name:        "forget",
		Description: "Deletes, for good, one of the memories of the person you are answering, by its id (as /memory lists them).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The memory's id, mem_…"}},"required":["id"]}`),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var in struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return Result{}, err
			}
			who := AuthorOf(ctx)
			if who.ID == "" {
				return Result{}, errors.New("there is no person whose memory this is in this turn")
			}
			if err := store.ForgetMemory(ctx, who.Key(), strings.TrimSpace(in.ID)); err != nil {
				if errors.Is(err, switchboard.ErrNotFound) {
					return Result{}, fmt.Errorf("%s has no memory %q", who.DisplayName(), in.ID)
				}
				return Result{}, fmt.Errorf("the memory could not be deleted: %w", err)
			}
			return Result{Content: "Forgotten for good."}, nil
		},
	}
}
