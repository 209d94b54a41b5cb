// Package mdbounds keeps the Markdown the project gives goldmark within
// bounds where parsing stays cheap: goldmark is quadratic on some inputs
// (deeply nested containers, thousands of unclosed links or emphasis
// delimiters), and the text it is given is a model's, or a person's. Every
// listener that converts Markdown (the widget's HTML, Slack's mrkdwn,
// Discord's Markdown) parses long text in Chunks and only what is
// Parseable (Convert does both).
//
// The package also holds what the chat listeners share beyond the parse:
// cutting their text into messages of a bounded length (Split, Truncate,
// in split.go) and a few helpers for writing text (text.go).
package mdbounds

import (
	"strings"

	"github.com/yuin/goldmark/util"
)

// Bounds on one parse.
const (
	Chunk     = 16 << 10 // bytes of Markdown parsed at once, where a blank line allows
	MaxDepth  = 16       // containers (quotes, list items) opened on one line
	MaxLinks  = 512      // "](" link openings, closed or not
	MaxDelims = 4096     // emphasis delimiters (* _) and link brackets ([) outside code blocks
)

// Unescape resolves backslash escapes and character references.
func Unescape(v []byte) string {
	if !strings.ContainsAny(string(v), `\&`) {
		return string(v)
	}
	v = util.UnescapePunctuations(v)
	v = util.ResolveNumericReferences(v)
	v = util.ResolveEntityNames(v)
	return string(v)
}

// Chunks cuts src at blank lines outside code blocks into pieces of
// about Chunk bytes, so that long text is parsed in bounded pieces.
func Chunks(src string) []string {
	if len(src) <= Chunk {
		return []string{src}
	}
	var chunks []string
	var cur strings.Builder
	var fence string
	for line := range strings.Lines(src) {
		trimmed := strings.TrimLeft(line, " ")
		if f := fenceOf(trimmed); f != "" && len(line)-len(trimmed) < 4 {
			switch {
			case fence == "":
				fence = f
			case f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(trimmed[len(f):]) == "":
				fence = ""
			}
		}
		if fence == "" && strings.TrimSpace(line) == "" && cur.Len() >= Chunk {
			chunks = append(chunks, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	if cur.Len() > 0 {
		chunks = append(chunks, cur.String())
	}
	return chunks
}

// Convert converts Markdown a Chunk at a time, its line endings made
// "\n" first: a chunk that is Parseable within maxBytes with convert, any
// other with fallback (which shows it as text), each result then tidied
// with tidy; the results that are not empty are joined by a blank line.
func Convert(src string, maxBytes int, convert, fallback, tidy func(string) string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	var parts []string
	for _, chunk := range Chunks(src) {
		var out string
		if Parseable(chunk, maxBytes) {
			out = convert(chunk)
		} else {
			out = fallback(chunk)
		}
		if out = tidy(out); out != "" {
			parts = append(parts, out)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Parseable reports whether src is within the bounds goldmark is given:
// at most maxBytes, MaxDepth containers opened at the start of any one
// line, and, outside fenced code blocks, MaxLinks link openings and
// MaxDelims emphasis delimiters and brackets (goldmark's cost grows with
// the square of those). What is not is shown as text.
func Parseable(src string, maxBytes int) bool {
	if len(src) > maxBytes {
		return false
	}
	links, delims := 0, 0
	var fence string
	for line := range strings.Lines(src) {
		if containerDepth(line) > MaxDepth {
			return false
		}
		trimmed := strings.TrimLeft(line, " ")
		if f := fenceOf(trimmed); f != "" && len(line)-len(trimmed) < 4 {
			switch {
			case fence == "":
				fence = f
				continue
			case f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(trimmed[len(f):]) == "":
				fence = ""
				continue
			}
		}
		if fence != "" {
			continue
		}
		links += strings.Count(line, "](")
		delims += strings.Count(line, "*") + strings.Count(line, "_") + strings.Count(line, "[")
		if links > MaxLinks || delims > MaxDelims {
			return false
		}
	}
	return true
}

// fenceOf is the code fence (``` or ~~~, or longer) that line starts with.
func fenceOf(line string) string {
	if line == "" || (line[0] != '`' && line[0] != '~') {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return line[:n]
}

// containerDepth counts the block quote and list markers a line opens
// before its text: "> > - 1. x" opens four.
func containerDepth(line string) int {
	depth := 0
	for i := 0; i < len(line); {
		switch ch := line[i]; {
		case ch == ' ' || ch == '\t':
			i++
		case ch == '>':
			depth++
			i++
		case (ch == '-' || ch == '*' || ch == '+') && (i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\t'):
			depth++
			i++
		case ch >= '0' && ch <= '9':
			j := i
			for j < len(line) && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j < len(line) && (line[j] == '.' || line[j] == ')') {
				depth++
				i = j + 1
				continue
			}
			return depth
		default:
			return depth
		}
	}
	return depth
}
