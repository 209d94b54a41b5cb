package sessions

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"report.csv":                       "report.csv",
		"../../etc/passwd":                 "passwd",
		`C:\Users\ann\Desktop\a.png`:       "a.png",
		"..":                               "file",
		".bashrc":                          "bashrc",
		"nul\x00byte.txt":                  "nul_byte.txt",
		"line\nbreak.txt":                  "line_break.txt",
		"  spaced  .md ":                   "spaced  .md",
		"what?<>|.txt":                     "what____.txt",
		"":                                 "file",
		"\xff\xfe.txt":                     "__.txt",
		strings.Repeat("a", 300) + ".xlsx": strings.Repeat("a", 95) + ".xlsx",
	} {
		if got := cleanName(in); got != want {
			t.Errorf("cleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "a/b\\c", "\x00", "..", strings.Repeat("é", 200) + ".csv"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := cleanName(in)
		if got == "" || got == "." || got == ".." || strings.HasPrefix(got, ".") || strings.ContainsAny(got, "/\\\x00") ||
			!utf8.ValidString(got) || utf8.RuneCountInString(got) > maxFileName || strings.IndexFunc(got, unicode.IsControl) >= 0 {
			t.Fatalf("cleanName(%q) = %q", in, got)
		}
	})
}

func TestSniffType(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	for _, tc := range []struct{ head, name, want string }{
		{"city,rain\nLyon,12\n", "rain.csv", "text/csv"},
		{`{"a": 1}`, "data.json", "application/json"},
		{"# Title\n", "notes.md", "text/markdown"},
		{"plain words", "notes", "text/plain"},
		{png, "notes.txt", "image/png"},                                     // the bytes decide
		{"\x7fELF\x02\x01\x01\x00", "rain.csv", "application/octet-stream"}, // a name makes no binary text
		{"%PDF-1.7\n", "x.pdf", "application/pdf"},
		{"PK\x03\x04\x14\x00\x06\x00", "sheet.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
		{"PK\x03\x04\x14\x00\x06\x00", "archive.zip", "application/zip"},
	} {
		if got := sniffType([]byte(tc.head), tc.name); got != tc.want {
			t.Errorf("sniffType(%q, %q) = %q, want %q", tc.head, tc.name, got, tc.want)
		}
	}
	if !typeAllowed("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", DefaultUploadTypes()) || typeAllowed("application/octet-stream", DefaultUploadTypes()) ||
		!typeAllowed("text/csv", DefaultUploadTypes()) {
		t.Error("the default types are not what they say")
	}
}
