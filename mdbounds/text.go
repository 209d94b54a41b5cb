package mdbounds

import (
	"strings"
	"unicode"

	east "github.com/yuin/goldmark/extension/ast"
)

// OneLine joins the lines of s with spaces and trims it.
func OneLine(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\n", " "))
}

// CheckBox is how a task list item's box reads in text, a space after it:
// "☑ " or "☐ ".
func CheckBox(checked bool) string {
	if checked {
		return "☑ "
	}
	return "☐ "
}

// Table lays out a table's rows of cells (the first is the header) in
// columns for a code block, as chat platforms have no tables: cells
// aligned as aligns says (by column; missing ones are left-aligned) and
// separated by " | ", a "-+-" rule under the header, no trailing spaces,
// each line ending in "\n". width is how many columns a cell takes in a
// monospace font.
func Table(rows [][]string, aligns []east.Alignment, width func(string) int) string {
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	widths := make([]int, cols)
	for i := range widths {
		widths[i] = 1
	}
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], width(cell))
		}
	}
	var b strings.Builder
	line := func(cells []string, pad func(i int, s string) string, sep string) {
		parts := make([]string, cols)
		for i := range cols {
			s := ""
			if i < len(cells) {
				s = cells[i]
			}
			parts[i] = pad(i, s)
		}
		b.WriteString(strings.TrimRightFunc(strings.Join(parts, sep), unicode.IsSpace))
		b.WriteString("\n")
	}
	align := func(i int, s string) string {
		gap := widths[i] - width(s)
		a := east.AlignNone
		if i < len(aligns) {
			a = aligns[i]
		}
		switch a {
		case east.AlignRight:
			return strings.Repeat(" ", gap) + s
		case east.AlignCenter:
			return strings.Repeat(" ", gap/2) + s + strings.Repeat(" ", gap-gap/2)
		default:
			return s + strings.Repeat(" ", gap)
		}
	}
	for i, r := range rows {
		line(r, align, " | ")
		if i == 0 {
			line(nil, func(i int, _ string) string { return strings.Repeat("-", widths[i]) }, "-+-")
		}
	}
	return b.String()
}
