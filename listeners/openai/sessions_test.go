package openai_test

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	listener "github.com/switchboard-gw/switchboard/listeners/openai"
)

type listed struct {
	Object string
	Data   []struct {
		ID, Object, Model, Role string
		CreatedAt               int64 `json:"created_at"`
		ActiveAt                int64 `json:"active_at"`
	}
}

// GET /v1/sessions lists the stored sessions the key's author may go
// back to, the most recently active first: not the stateless requests'
// sessions, not another key's; limit bounds it.
func TestSessionsAreListed(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	_, first, err := a.ask(allKey, "new", "support", sdk.UserMessage("One."))
	if err != nil {
		t.Fatal(err)
	}
	_, second, err := a.ask(allKey, "new", "assistant", sdk.UserMessage("Two."))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.ask(supportKey, "new", "support", sdk.UserMessage("Another key's.")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Stateless.")},
	}); err != nil {
		t.Fatal(err)
	}
	var got listed
	if err := a.client(allKey).Get(ctx, "sessions", nil, &got); err != nil {
		t.Fatal(err)
	}
	// (Their order is the store's, most recently active first, tested
	// in storetest; here the two may share a millisecond.)
	byID := map[string]int{}
	for i, d := range got.Data {
		byID[d.ID] = i
	}
	if got.Object != "list" || len(got.Data) != 2 || got.Data[0].ActiveAt < got.Data[1].ActiveAt {
		t.Fatalf("listed %+v, want %s and %s, most recently active first", got, second, first)
	}
	i, ok := byID[first]
	if _, ok2 := byID[second]; !ok || !ok2 {
		t.Fatalf("listed %+v, want %s and %s", got, second, first)
	}
	if d := got.Data[i]; d.Model != "support" || d.Role != "owner" || d.Object != "switchboard.session" || d.CreatedAt == 0 || d.ActiveAt < d.CreatedAt {
		t.Errorf("the first session listed as %+v", d)
	}
	// The support key's author sees its own only; and a limit.
	if err := a.client(supportKey).Get(ctx, "sessions", nil, &got); err != nil || len(got.Data) != 1 || got.Data[0].Model != "support" {
		t.Errorf("the support key's list: %+v, %v", got, err)
	}
	if err := a.client(allKey).Get(ctx, "sessions?limit=1", nil, &got); err != nil || len(got.Data) != 1 {
		t.Errorf("limit 1: %+v, %v", got, err)
	}
	err = a.client(allKey).Get(ctx, "sessions?limit=0", nil, &got)
	apiError(t, err, http.StatusBadRequest, "invalid_request")
}
