package sessions

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// FuzzCheckClientTools: whatever tools a caller sends, checkClientTools
// either refuses them with a sentence for the caller (ErrBadInput), or
// every tool it takes has a name the providers take, once, none of the
// guide's, and parameters that are a JSON object or none.
func FuzzCheckClientTools(f *testing.F) {
	f.Add([]byte(`[{"name":"lookup_order","parameters":{"type":"object"}}]`))
	f.Add([]byte(`[{"name":"calculator"}]`))
	f.Add([]byte(`[{"name":"a"},{"name":"a"}]`))
	f.Add([]byte(`[{"name":"x","parameters":[1]}]`))
	f.Add([]byte(`[{"name":"x","parameters":null}]`))
	f.Add([]byte(`[{"name":"ü"}]`))
	ours := []string{"calculator", "echo.ping"}
	f.Fuzz(func(t *testing.T, data []byte) {
		var offered []switchboard.ClientTool
		if json.Unmarshal(data, &offered) != nil {
			return
		}
		err := checkClientTools(offered, ours)
		if err != nil {
			if !errors.Is(err, ErrBadInput) || Reason(err, "") == "" {
				t.Fatalf("refused without a reason for the caller: %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, tl := range offered {
			if !clientToolName.MatchString(tl.Name) || seen[tl.Name] || tl.Name == "calculator" || tl.Name == findToolsName {
				t.Fatalf("took the tool %q", tl.Name)
			}
			seen[tl.Name] = true
			var obj map[string]any
			if len(tl.Parameters) > 0 && (json.Unmarshal(tl.Parameters, &obj) != nil || obj == nil) {
				t.Fatalf("took the parameters %s", tl.Parameters)
			}
		}
	})
}
