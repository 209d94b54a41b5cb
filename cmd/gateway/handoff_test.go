package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A guide handing off to a guide the folder does not have stops start-up,
// and the doctor says which file and line, with the likely slip.
func TestDoctorHandoffErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"assistant.md": "---\nname: assistant\nhandoffs: [biling]\n---\nHi.\n",
		"billing.md":   "---\ndescription: Invoices\n---\nYou are billing.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	out, err := s.doctor(t, nil, "--set", "guides.dir="+dir)
	if err == nil {
		t.Fatalf("doctor passed a guide handing off to a missing guide:\n%s", out)
	}
	wantRow(t, out, "guides", "PROBLEM", "assistant.md:3: handoffs:", `no guide "biling"`, `did you mean "billing"?`)
}
