package providers

import (
	"errors"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// ErrContextTooLong marks a request the provider refused because it holds
// more tokens than the model's context window (OpenAI's
// context_length_exceeded, Anthropic's "prompt is too long", Gemini's
// "exceeds the maximum number of tokens", an OpenAI-compatible server's
// "maximum context length"). Adapters wrap the vendor's error in it; a
// session then builds a shorter request and tries once more.
var ErrContextTooLong = errors.New("the request is longer than the model's context window")

// ContextTooLong reports whether a vendor's refusal (its status and the
// message or body it sent) says the request did not fit the model's
// context. Adapters call it where the vendor gives no code of its own.
func ContextTooLong(status int, message string) bool {
	if status == 413 {
		return true // request_too_large: shorter fits
	}
	if status != 400 {
		return false
	}
	m := strings.ToLower(message)
	for _, s := range []string{"context_length_exceeded", "maximum context length", "prompt is too long",
		"exceeds the maximum number of tokens", "context window", "too many tokens"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// contextWindows are the context windows, in tokens, of the model families
// the gateway knows, by the start of the model's name; the longest match
// wins. A model not listed has none known: set the provider's
// context_window (docs/operating.md, "Long conversations").
var contextWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-5", 400_000},
	{"gpt-4.1", 1_047_576},
	{"gpt-4o", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-4", 8_192},
	{"gpt-3.5-turbo", 16_385},
	{"o1", 200_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"claude-", 200_000},
	{"gemini-1.5-pro", 2_097_152},
	{"gemini-1.5-flash", 1_048_576},
	{"gemini-2", 1_048_576},
	{"gemini-3", 1_048_576},
}

// ContextWindow is the context window, in tokens, of a known model family
// ("gpt-4o-mini": 128,000; "claude-sonnet-4-5": 200,000), 0 for a model
// the gateway does not know (a local model behind an OpenAI-compatible
// server: its window is the server's setting).
func ContextWindow(model string) int {
	model = strings.ToLower(model)
	if i := strings.LastIndex(model, "/"); i >= 0 {
		model = model[i+1:] // "models/gemini-2.5-pro", "openai/gpt-4o"
	}
	best, tokens := 0, 0
	for _, w := range contextWindows {
		if strings.HasPrefix(model, w.prefix) && len(w.prefix) > best {
			best, tokens = len(w.prefix), w.tokens
		}
	}
	return tokens
}

// Per-message and per-request overheads of the chat formats, in tokens,
// for EstimateTokens: role markers, separators, a tool call's framing.
const (
	messageOverhead = 4
	requestOverhead = 8
)

// EstimateTokens is a cheap estimate of a request's prompt tokens: about
// four bytes of text a token, plus each message's framing. It never calls
// a tokenizer (vendors' differ, and none is at hand for an arbitrary
// model); a session calibrates it with the prompt tokens the provider
// reports (sessions' budget.go).
func EstimateTokens(req Request) int {
	n := requestOverhead + textTokens(req.System)
	for _, t := range req.Tools {
		n += messageOverhead + textTokens(t.Name) + textTokens(t.Description) + textTokens(string(t.Parameters))
	}
	for _, m := range req.Messages {
		n += EstimateMessage(m)
	}
	return n
}

// EstimateMessage is EstimateTokens for one message of a request. A
// picture among its files counts as ImageTokens, shown or not.
func EstimateMessage(m switchboard.Message) int {
	n := messageOverhead + textTokens(m.Content) + textTokens(m.Author)
	for _, c := range m.ToolCalls {
		n += messageOverhead + textTokens(c.Name) + textTokens(string(c.Args))
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Type, "image/") {
			n += ImageTokens
		}
	}
	return n
}

// ImageTokens is about what a picture within images.ModelLimits costs a
// request: Anthropic counts (width × height) / 750, 1,600 tokens at 1568
// px by 768; OpenAI's high detail is at most 1,105; Gemini's 258 a tile.
const ImageTokens = 1600

func textTokens(s string) int { return (len(s) + 3) / 4 }
