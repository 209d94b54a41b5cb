package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: any config file loads without a panic; a file that loads
// passed Validate, so what the gateway is started with is checked, and one
// that does not is refused with an error.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"http:\n  addr: 127.0.0.1:8080\nproviders:\n  - {name: main, kind: demo}\n",
		"providers:\n  - name: main\n    kind: openai\n    api_key_env: X\n    fallback: demo\n",
		"listeners:\n  slack: { enabled: true, mode: socket }\n", "tools:\n  mcp:\n    - {name: a, command: [x]}\n",
		"http: [\n", "sessions: { queue_size: -1 }\n", "",
		"providers:\n  - {name: main, kind: openai}\nembeddings: {provider: main, dimensions: 768, min_similarity: 0.5}\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "config.yaml")
	f.Fuzz(func(t *testing.T, yaml string) {
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path, nil, nil)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load took a config Validate refuses: %v\n%s", err, yaml)
		}
	})
}
