package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/switchboard-gw/switchboard/config"
)

// A provider's context window is its context_window, else the known
// window of its model's family, else none.
func TestProvidersKnowTheirContextWindow(t *testing.T) {
	cfg := config.Config{Providers: []config.Provider{
		{Name: "known", Kind: "openai", Model: "gpt-4o-mini", APIKey: "sk-x"},
		{Name: "set", Kind: "openai", Model: "gpt-4o-mini", APIKey: "sk-x", ContextWindow: 32_000},
		{Name: "local", Kind: "ollama", Model: "llama3.1:8b"},
	}}
	provs, _, err := buildProviders(cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"known": 128_000, "set": 32_000, "local": 0} {
		if got := provs[name].ContextWindow; got != want {
			t.Errorf("%s: context window %d, want %d", name, got, want)
		}
	}
}
