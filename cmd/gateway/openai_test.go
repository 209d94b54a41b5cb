package main

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
)

// The gateway refuses to serve the API with a key it cannot use: unset,
// too short, or for a guide it lacks; off, nothing is checked.
func TestCheckOpenAI(t *testing.T) {
	catalog, err := guides.LoadDir("../../guides")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{}
	cfg.Listeners.OpenAI = config.OpenAI{Enabled: true, Keys: []config.OpenAIKey{{Name: "ci", KeyEnv: "CI_KEY", Guides: []string{"support"}}}}
	good := "CI_KEY=sk-0123456789abcdef0123"
	if err := checkOpenAI(cfg, []string{good}, catalog); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		environ []string
		guide   string
		want    string
	}{
		{nil, "support", "the environment variable CI_KEY is not set"},
		{[]string{"CI_KEY=short"}, "support", "at least 20 characters"},
		{[]string{good}, "sales", `no guide "sales"`},
	} {
		cfg.Listeners.OpenAI.Keys[0].Guides = []string{c.guide}
		err := checkOpenAI(cfg, c.environ, catalog)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "listeners.openai.keys[0]") {
			t.Errorf("%v / %s: err %v, want one naming the key and saying %q", c.environ, c.guide, err, c.want)
		}
		for _, kv := range c.environ {
			if _, secret, _ := strings.Cut(kv, "="); strings.Contains(errString(err), secret) {
				t.Errorf("the error quotes the key: %v", err)
			}
		}
	}
	cfg.Listeners.OpenAI.Enabled = false
	if err := checkOpenAI(cfg, nil, catalog); err != nil {
		t.Errorf("off: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
