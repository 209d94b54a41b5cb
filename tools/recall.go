package tools

// memory_search: the messages of a person's other conversations (and of
// this one, beyond what the model is given) that match a query, among the
// conversations the person being answered is a member of.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
)

// Recall finds messages by their words among the conversations reader (an
// author key) is a member of, best first (storage.DB.Search).
type Recall interface {
	Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error)
}

// Recall's bounds.
const (
	MaxRecallQuery = 500 // characters
	MaxRecallLimit = 20
	recallSnippet  = 300 // characters of each message shown
)

// RecallTool is memory_search over r (nil: a registry that only lists
// it, whose calls say so).
func RecallTool(r Recall) Tool {
	if r == nil {
		r = noRecall{}
	}
	return Tool{
		Name: "memory_search",
		Description: "Searches the earlier conversations of the person you are answering (those they are in) for messages matching a query, " +
			"best first, each with its date. Use it when they refer to something said before that is not in this conversation.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"query":{"type":"string","description":"Words to look for, e.g. locker code"},
			"limit":{"type":"integer","minimum":1,"maximum":20,"description":"How many messages at most (5)"}},
			"required":["query"]}`),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var in struct {
				Query string `json:"query"`
				Limit int    `json:"limit"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return Result{}, err
			}
			who := AuthorOf(ctx)
			q := strings.TrimSpace(in.Query)
			switch {
			case who.ID == "":
				return Result{}, errors.New("there is no person whose conversations to search in this turn")
			case q == "":
				return Result{}, errors.New("query is empty: say what to look for")
			case utf8.RuneCountInString(q) > MaxRecallQuery:
				return Result{}, fmt.Errorf("query is %d characters; at most %d", utf8.RuneCountInString(q), MaxRecallQuery)
			}
			limit := min(max(in.Limit, 0), MaxRecallLimit)
			if limit == 0 {
				limit = 5
			}
			found, err := r.Search(ctx, who.Key(), q, limit)
			if err != nil {
				return Result{}, fmt.Errorf("the search failed: %w", err)
			}
			if len(found) == 0 {
				return Result{Content: "Nothing found."}, nil
			}
			return Result{Content: FormatFound(found)}, nil
		},
	}
}

type noRecall struct{}

func (noRecall) Search(context.Context, string, string, int) ([]switchboard.Found, error) {
	return nil, errors.New("conversations are not searchable on this gateway")
}

// FormatFound is found messages as lines for the model: when, where, who,
// and the start of the text.
func FormatFound(found []switchboard.Found) string {
	var b strings.Builder
	for _, f := range found {
		when := "date unknown"
		if !f.At.IsZero() {
			when = f.At.Format("2006-01-02 15:04 UTC")
		}
		who := "the assistant"
		if f.Message.Role == switchboard.RoleUser {
			who = f.Message.Author
			if who == "" {
				who = "the person"
			}
		}
		text := strings.Join(strings.Fields(f.Message.Content), " ")
		if utf8.RuneCountInString(text) > recallSnippet {
			text = string([]rune(text)[:recallSnippet]) + "…"
		}
		fmt.Fprintf(&b, "- %s, conversation %s, %s: %s\n", when, f.SessionID, who, text)
	}
	return b.String()
}
