package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// BenchmarkTurnEnd is the write that ends a turn (the answer, its tokens)
// without and with the turn's charge and its running totals, from one
// session: what recording spending adds to a turn.
//
//	go test -run '^$' -bench TurnEnd ./storage/
func BenchmarkTurnEnd(b *testing.B) {
	for _, charged := range []bool{false, true} {
		b.Run(fmt.Sprintf("charge=%v", charged), func(b *testing.B) {
			ctx := context.Background()
			db, _ := openFile(b)
			storetest.NewSession(b, db, "s1", "")
			u := switchboard.Usage{PromptTokens: 1000, CompletionTokens: 100, TotalTokens: 1100}
			reply := []switchboard.Message{{Role: switchboard.RoleAssistant, Content: "Sunny, 21 °C."}}
			for b.Loop() {
				w := switchboard.TurnWrite{Messages: reply, EndTurn: true, Usage: u}
				if charged {
					w.Charge = &switchboard.Charge{Guide: "assistant", Model: "gpt-4o-mini", Person: "web:ann", Channel: "web",
						Usage: u, CostUSD: 0.0002, Priced: true, At: time.Now()}
				}
				if _, err := db.WriteTurn(ctx, "s1", w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
