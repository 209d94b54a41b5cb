package openai

import (
	"fmt"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// benchHistory is a conversation as a guide with a 20-message memory
// sends it: a system prompt, then users and assistants taking turns.
func benchHistory(n int) providers.Request {
	req := providers.Request{Model: "gpt-4.1", System: "You are a helpful assistant in a team's chat."}
	for i := range n {
		role := switchboard.RoleUser
		if i%2 == 1 {
			role = switchboard.RoleAssistant
		}
		req.Messages = append(req.Messages, switchboard.Message{Role: role, Author: "Ann", Content: fmt.Sprintf("message %d: the quick brown fox jumps over the lazy dog, twice.", i)})
	}
	return req
}

// BenchmarkRequestBody: building and encoding the request body of a turn.
func BenchmarkRequestBody(b *testing.B) {
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprint(n, " messages"), func(b *testing.B) {
			p := &Provider{model: "gpt-4.1"}
			req := benchHistory(n)
			b.ReportAllocs()
			for b.Loop() {
				params, err := p.params(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := params.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
