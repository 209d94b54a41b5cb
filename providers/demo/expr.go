package demo

import (
	"regexp"
	"strings"
	"unicode"
)

// functions are the calculator's; a word of the text counts as part of an
// expression only when it is one of these followed by "(", or pi.
var functions = map[string]bool{
	"sqrt": true, "abs": true, "round": true, "floor": true, "ceil": true, "ln": true, "log10": true,
	"sin": true, "cos": true, "tan": true, "min": true, "max": true, "pow": true,
}

// isOperator: the calculator's operators, with the typographic ones it
// also takes (× · ÷ −).
func isOperator(r rune) bool {
	return strings.ContainsRune("+-*/%^(),×·÷−", r)
}

// isBinary: an operator between two operands.
func isBinary(r rune) bool { return strings.ContainsRune("+-*/%^×·÷−", r) }

var datePattern = regexp.MustCompile(`^\d{4}-\d{1,2}-\d{1,2}$`)

// expressionIn finds the arithmetic in a text: the longest run of
// numbers, operators, parentheses and calculator functions in which an
// operator stands between two operands or a function is called, trimmed
// of what cannot end or start one. "What is 2*(3+4)?" gives "2*(3+4)";
// "sqrt(2) * 10, please" gives "sqrt(2) * 10"; "version 2.0" and
// "15% of 80" give "".
func expressionIn(text string) string {
	rs := []rune(text)
	best := ""
	for i := 0; i < len(rs); {
		j := scanExpression(rs, i)
		if j == i {
			i++
			continue
		}
		if e := trimExpression(string(rs[i:j])); qualifies(e) && len(e) > len(best) {
			if !strings.ContainsFunc(e, unicode.IsLetter) { // no function's arguments: commas are thousands
				e = strings.ReplaceAll(e, ",", "")
			}
			best = e
		}
		i = j
	}
	return best
}

// scanExpression returns the end of the run of expression characters
// starting at i (i itself when there is none).
func scanExpression(rs []rune, i int) int {
	j, depth := i, 0
	for j < len(rs) {
		r := rs[j]
		switch {
		case r == ',' && depth == 0 && !thousands(rs, j):
			return j // between two sentences' parts, not a function's arguments
		case unicode.IsDigit(r) || r == '.' || isOperator(r):
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
			j++
		case r == ' ' || r == '\t':
			if j == i {
				return i
			}
			j++
		case unicode.IsLetter(r):
			k := j
			for k < len(rs) && (unicode.IsLetter(rs[k]) || unicode.IsDigit(rs[k])) {
				k++
			}
			word := strings.ToLower(string(rs[j:k]))
			if j > i && unicode.IsDigit(rs[j-1]) {
				if e := exponent(rs, j); e > j {
					j = e // 1e3, 2.5E-4
					continue
				}
				return j // a word must stand apart from digits: "2x"
			}
			next := k
			for next < len(rs) && rs[next] == ' ' {
				next++
			}
			if word == "pi" || functions[word] && next < len(rs) && rs[next] == '(' {
				j = k
				continue
			}
			return j
		default:
			return j
		}
	}
	return j
}

// exponent returns the end of a number's exponent starting at j ("e3",
// "E-4"), or j when there is none.
func exponent(rs []rune, j int) int {
	if rs[j] != 'e' && rs[j] != 'E' {
		return j
	}
	k := j + 1
	if k < len(rs) && (rs[k] == '+' || rs[k] == '-') {
		k++
	}
	d := k
	for k < len(rs) && unicode.IsDigit(rs[k]) {
		k++
	}
	if k == d {
		return j
	}
	return k
}

// thousands: the comma at j separates thousands, as in 1,000.
func thousands(rs []rune, j int) bool {
	if j == 0 || !unicode.IsDigit(rs[j-1]) || j+3 >= len(rs) {
		return false
	}
	for k := j + 1; k <= j+3; k++ {
		if !unicode.IsDigit(rs[k]) {
			return false
		}
	}
	return j+4 == len(rs) || !unicode.IsDigit(rs[j+4])
}

// trimExpression drops what cannot start or end an expression: spaces,
// commas, a trailing operator, and parentheses left unmatched by the
// sentence around it ("(about 2+3)" is "2+3").
func trimExpression(e string) string {
	for {
		before := e
		e = strings.TrimSpace(e)
		e = strings.TrimRight(e, "+-*/%^,×·÷−.")
		e = strings.TrimLeft(e, "+*/%^,×·÷)")
		open, closed := strings.Count(e, "("), strings.Count(e, ")")
		if closed > open && strings.HasSuffix(e, ")") {
			e = e[:len(e)-1]
		}
		if open > closed && strings.HasPrefix(e, "(") {
			e = e[1:]
		}
		if e == before {
			return e
		}
	}
}

// qualifies: a digit and either a function call or an operator with an
// operand on each side; a date (2026-11-22) is not arithmetic.
func qualifies(e string) bool {
	if !strings.ContainsFunc(e, unicode.IsDigit) || datePattern.MatchString(e) {
		return false
	}
	if strings.Contains(e, "(") && strings.ContainsFunc(e, unicode.IsLetter) {
		return true // a function call: sqrt(2)
	}
	rs := []rune(e)
	for k := 1; k < len(rs); k++ {
		if isBinary(rs[k]) {
			return true // not the first rune: something comes before it, and trimming left something after
		}
	}
	return false
}
