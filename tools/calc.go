package tools

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// The calculator is a recursive-descent parser that evaluates as it parses.
// Grammar, loosest binding first:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]          right-associative; -2^2 = -4
//	primary = number | name | name "(" expr { "," expr } ")" | "(" expr ")"
//
// Models write maths the way people do, so "**", "×", "÷" and "−" are
// accepted as well. Positions in errors count characters from 1.

// maxCalcDepth bounds nesting so a hostile expression cannot exhaust the
// stack.
const maxCalcDepth = 200

type tokenKind int

const (
	tokEnd tokenKind = iota
	tokNum
	tokName
	tokOp
)

type token struct {
	kind tokenKind
	text string  // as written, for error messages
	pos  int     // 1-based character position
	op   rune    // tokOp: normalised operator
	num  float64 // tokNum
}

// calcError is a problem in the expression and where it is.
type calcError struct {
	pos int
	msg string
}

func (e *calcError) Error() string { return fmt.Sprintf("%s at position %d", e.msg, e.pos) }

func errAt(pos int, format string, args ...any) error {
	return &calcError{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// calculate evaluates an arithmetic expression.
func calculate(expr string) (float64, error) {
	toks, err := lex(expr)
	if err != nil {
		return 0, err
	}
	if toks[0].kind == tokEnd {
		return 0, errors.New("empty expression")
	}
	p := &parser{toks: toks}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if t := p.peek(); t.kind != tokEnd {
		return 0, unexpected(t)
	}
	return v, nil
}

// formatNumber prints a result compactly: 7 rather than 7.000000, and 15
// significant digits so that 0.1+0.2 reads 0.3.
func formatNumber(v float64) string {
	if v == 0 {
		return "0" // also for -0
	}
	return strconv.FormatFloat(v, 'g', 15, 64)
}

func lex(expr string) ([]token, error) {
	rs := []rune(expr)
	var toks []token
	for i := 0; i < len(rs); {
		r := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(r):
			i++
		case isDigit(r) || r == '.' && i+1 < len(rs) && isDigit(rs[i+1]):
			j := scanNumber(rs, i)
			text := string(rs[i:j])
			v, err := strconv.ParseFloat(text, 64)
			if err != nil && (math.IsInf(v, 0) || !errors.Is(err, strconv.ErrRange)) {
				return nil, errAt(pos, "number %s is out of range", text)
			}
			toks = append(toks, token{kind: tokNum, text: text, pos: pos, num: v})
			i = j
		case unicode.IsLetter(r) || r == '_':
			j := i + 1
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			toks = append(toks, token{kind: tokName, text: string(rs[i:j]), pos: pos})
			i = j
		case r == '*' && i+1 < len(rs) && rs[i+1] == '*':
			toks = append(toks, token{kind: tokOp, text: "**", pos: pos, op: '^'})
			i += 2
		default:
			op, ok := operator(r)
			if !ok {
				return nil, errAt(pos, "unexpected %q", string(r))
			}
			toks = append(toks, token{kind: tokOp, text: string(r), pos: pos, op: op})
			i++
		}
	}
	return append(toks, token{kind: tokEnd, pos: len(rs) + 1}), nil
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// scanNumber returns the end of the number starting at i: digits, an
// optional fraction, and an exponent only when digits follow the "e", so
// that "2e" stays 2 followed by the constant e.
func scanNumber(rs []rune, i int) int {
	for i < len(rs) && isDigit(rs[i]) {
		i++
	}
	if i < len(rs) && rs[i] == '.' {
		i++
		for i < len(rs) && isDigit(rs[i]) {
			i++
		}
	}
	if i < len(rs) && (rs[i] == 'e' || rs[i] == 'E') {
		j := i + 1
		if j < len(rs) && (rs[j] == '+' || rs[j] == '-') {
			j++
		}
		if j < len(rs) && isDigit(rs[j]) {
			for j < len(rs) && isDigit(rs[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

func operator(r rune) (rune, bool) {
	switch r {
	case '+', '-', '*', '/', '%', '^', '(', ')', ',':
		return r, true
	case '×', '·':
		return '*', true
	case '÷':
		return '/', true
	case '−':
		return '-', true
	}
	return 0, false
}

func unexpected(t token) error {
	if t.kind == tokEnd {
		return errAt(t.pos, "unexpected end of expression")
	}
	return errAt(t.pos, "unexpected %q", t.text)
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

// isOp reports whether the next token is one of the operators.
func (p *parser) isOp(ops string) bool {
	t := p.peek()
	return t.kind == tokOp && strings.ContainsRune(ops, t.op)
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxCalcDepth {
		return errAt(p.peek().pos, "expression nested too deeply")
	}
	return nil
}

func (p *parser) expr() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer func() { p.depth-- }()
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for p.isOp("+-") {
		op := p.next()
		r, err := p.term()
		if err != nil {
			return 0, err
		}
		if op.op == '+' {
			v += r
		} else {
			v -= r
		}
		if err := finite(v, op.pos); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for p.isOp("*/%") {
		op := p.next()
		r, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op.op {
		case '*':
			v *= r
		case '/':
			if r == 0 {
				return 0, errAt(op.pos, "division by zero")
			}
			v /= r
		case '%':
			if r == 0 {
				return 0, errAt(op.pos, "modulo by zero")
			}
			v = math.Mod(v, r)
		}
		if err := finite(v, op.pos); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func (p *parser) unary() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer func() { p.depth-- }()
	if p.isOp("+-") {
		op := p.next()
		v, err := p.unary()
		if op.op == '-' {
			v = -v
		}
		return v, err
	}
	return p.power()
}

func (p *parser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if !p.isOp("^") {
		return base, nil
	}
	op := p.next()
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	if base == 0 && exp < 0 {
		return 0, errAt(op.pos, "division by zero")
	}
	v := math.Pow(base, exp)
	if err := finite(v, op.pos); err != nil {
		return 0, err
	}
	return v, nil
}

func (p *parser) primary() (float64, error) {
	t := p.next()
	switch {
	case t.kind == tokNum:
		return t.num, nil
	case t.kind == tokName:
		name := strings.ToLower(t.text)
		if p.isOp("(") {
			p.next()
			args, err := p.args()
			if err != nil {
				return 0, err
			}
			return call(name, t, args)
		}
		switch name {
		case "pi":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		if isFunction(name) {
			return 0, errAt(t.pos, "%s needs parentheses, as in %s(2)", t.text, name)
		}
		return 0, errAt(t.pos, "unknown name %q (constants: pi, e)", t.text)
	case t.kind == tokOp && t.op == '(':
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if !p.isOp(")") {
			return 0, unexpected(p.peek())
		}
		p.next()
		return v, nil
	}
	return 0, unexpected(t)
}

// args parses a call's arguments after its "(" up to and including ")".
func (p *parser) args() ([]float64, error) {
	var args []float64
	if p.isOp(")") {
		p.next()
		return args, nil
	}
	for {
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		args = append(args, v)
		switch {
		case p.isOp(","):
			p.next()
		case p.isOp(")"):
			p.next()
			return args, nil
		default:
			return nil, unexpected(p.peek())
		}
	}
}

const functionNames = "abs, ceil, cos, floor, ln, log10, max, min, pow, round, sin, sqrt, tan"

func isFunction(name string) bool {
	switch name {
	case "abs", "ceil", "cos", "floor", "ln", "log10", "max", "min", "pow", "round", "sin", "sqrt", "tan":
		return true
	}
	return false
}

// call applies a function; t is the name token, for positions.
func call(name string, t token, args []float64) (float64, error) {
	arity := func(lo, hi int) error {
		switch n := len(args); {
		case n >= lo && (hi < 0 || n <= hi):
			return nil
		case lo == hi && lo == 1:
			return errAt(t.pos, "%s takes 1 argument, got %d", name, n)
		case lo == hi:
			return errAt(t.pos, "%s takes %d arguments, got %d", name, lo, n)
		case hi < 0:
			return errAt(t.pos, "%s takes at least %d argument(s), got %d", name, lo, n)
		default:
			return errAt(t.pos, "%s takes %d to %d arguments, got %d", name, lo, hi, n)
		}
	}
	one := func(f func(float64) float64) (float64, error) {
		if err := arity(1, 1); err != nil {
			return 0, err
		}
		v := f(args[0])
		return v, finite(v, t.pos)
	}
	switch name {
	case "sqrt":
		if len(args) == 1 && args[0] < 0 {
			return 0, errAt(t.pos, "sqrt of a negative number")
		}
		return one(math.Sqrt)
	case "abs":
		return one(math.Abs)
	case "floor":
		return one(math.Floor)
	case "ceil":
		return one(math.Ceil)
	case "ln", "log10":
		if len(args) == 1 && args[0] <= 0 {
			return 0, errAt(t.pos, "%s of a number that is not positive", name)
		}
		if name == "ln" {
			return one(math.Log)
		}
		return one(math.Log10)
	case "sin":
		return one(math.Sin)
	case "cos":
		return one(math.Cos)
	case "tan":
		return one(math.Tan)
	case "round":
		if err := arity(1, 2); err != nil {
			return 0, err
		}
		if len(args) == 1 {
			return math.Round(args[0]), nil
		}
		digits := args[1]
		if digits != math.Trunc(digits) || math.Abs(digits) > 15 {
			return 0, errAt(t.pos, "round's digits must be a whole number from -15 to 15")
		}
		scale := math.Pow(10, digits)
		v := math.Round(args[0]*scale) / scale
		if math.IsInf(args[0]*scale, 0) {
			v = args[0] // already coarser than the digits asked for
		}
		return v, finite(v, t.pos)
	case "min", "max":
		if err := arity(1, -1); err != nil {
			return 0, err
		}
		v := args[0]
		for _, a := range args[1:] {
			if name == "min" {
				v = math.Min(v, a)
			} else {
				v = math.Max(v, a)
			}
		}
		return v, nil
	case "pow":
		if err := arity(2, 2); err != nil {
			return 0, err
		}
		if args[0] == 0 && args[1] < 0 {
			return 0, errAt(t.pos, "division by zero")
		}
		v := math.Pow(args[0], args[1])
		return v, finite(v, t.pos)
	}
	if name == "pi" || name == "e" {
		return 0, errAt(t.pos, "%s is a constant, not a function", t.text)
	}
	return 0, errAt(t.pos, "unknown function %q (available: %s)", t.text, functionNames)
}

// finite rejects results that are not real numbers or overflow float64,
// which the model would otherwise read as a valid answer.
func finite(v float64, pos int) error {
	switch {
	case math.IsNaN(v):
		return errAt(pos, "result is not a real number")
	case math.IsInf(v, 0):
		return errAt(pos, "result is too large")
	}
	return nil
}
