package tools

import (
	"errors"
	"strings"
	"testing"
)

func TestCalculate(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		// precedence
		{"1 + 2 * 3", "7"},
		{"(1 + 2) * 3", "9"},
		{"2 * (3 + 4) ^ 2 / 7", "14"},
		{"10 - 4 - 3", "3"},    // left-assoc
		{"64 / 4 / 2", "8"},    // left-assoc
		{"2 ^ 3 ^ 2", "512"},   // right-assoc: 2^9, not 8^2
		{"2 ** 3 ** 2", "512"}, // ** is ^
		{"17 % 5", "2"},
		{"-7 % 3", "-1"},
		{"1 + 10 % 4 * 2", "5"},
		// unary
		{"-3", "-3"},
		{"--3", "3"},
		{"+3", "3"},
		{"-2 ^ 2", "-4"}, // power binds tighter than unary minus
		{"(-2) ^ 2", "4"},
		{"2 ^ -1", "0.5"},
		{"3 - -2", "5"},
		{"2 * -3", "-6"},
		// numbers
		{"1.5 + .5", "2"},
		{"1e3", "1000"},
		{"2.5E-1", "0.25"},
		{"1e+2 * 2", "200"},
		{"0.1 + 0.2", "0.3"},
		{"7.000", "7"},
		{"1e21", "1e+21"},
		{"-0", "0"},
		// functions and constants
		{"sqrt(16)", "4"},
		{"abs(-2.5)", "2.5"},
		{"round(2.5)", "3"},
		{"round(-2.5)", "-3"},
		{"round(3.14159, 2)", "3.14"},
		{"round(1234, -2)", "1200"},
		{"floor(-1.5)", "-2"},
		{"ceil(1.2)", "2"},
		{"ln(e)", "1"},
		{"log10(1000)", "3"},
		{"sin(0)", "0"},
		{"cos(pi)", "-1"},
		{"tan(0)", "0"},
		{"min(3, 1, 2)", "1"},
		{"max(3, 1, 2)", "3"},
		{"max(-1)", "-1"},
		{"pow(2, 10)", "1024"},
		{"pi", "3.14159265358979"},
		{"PI * Sqrt(4)", "6.28318530717959"},
		{"sqrt(pow(3, 2) + 4^2)", "5"},
		{"2 × 3 ÷ 4 − 1", "0.5"},
		{"  ( ( 1 ) )  ", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			v, err := calculate(tt.expr)
			if err != nil {
				t.Fatalf("calculate(%q): %v", tt.expr, err)
			}
			if got := formatNumber(v); got != tt.want {
				t.Errorf("calculate(%q) = %s, want %s", tt.expr, got, tt.want)
			}
		})
	}
}

func TestCalculateErrors(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{"(1 + 2))", `unexpected ")" at position 8`},
		{"2 * (3 + )", `unexpected ")" at position 10`},
		{"2 +", `unexpected end of expression at position 4`},
		{"(1 + 2", `unexpected end of expression at position 7`},
		{"", `empty expression`},
		{"   ", `empty expression`},
		{"2 3", `unexpected "3" at position 3`},
		{"2e", `unexpected "e" at position 2`}, // no implicit multiplication
		{"2 pi", `unexpected "pi" at position 3`},
		{"1 / 0", `division by zero at position 3`},
		{"1 / (2 - 2)", `division by zero at position 3`},
		{"5 % 0", `modulo by zero at position 3`},
		{"0 ^ -1", `division by zero at position 3`},
		{"foo(1)", `unknown function "foo" (available: ` + functionNames + `) at position 1`},
		{"1 + x", `unknown name "x" (constants: pi, e) at position 5`},
		{"sqrt 4", `sqrt needs parentheses, as in sqrt(2) at position 1`},
		{"pi(2)", `pi is a constant, not a function at position 1`},
		{"sqrt(1, 2)", `sqrt takes 1 argument, got 2 at position 1`},
		{"pow(2)", `pow takes 2 arguments, got 1 at position 1`},
		{"min()", `min takes at least 1 argument(s), got 0 at position 1`},
		{"round(1, 2, 3)", `round takes 1 to 2 arguments, got 3 at position 1`},
		{"round(1, 0.5)", `round's digits must be a whole number from -15 to 15 at position 1`},
		{"min(1,,2)", `unexpected "," at position 7`},
		{"sqrt(-1)", `sqrt of a negative number at position 1`},
		{"ln(0)", `ln of a number that is not positive at position 1`},
		{"1 + log10(-1)", `log10 of a number that is not positive at position 5`},
		{"(-8) ^ 0.5", `result is not a real number at position 6`},
		{"10 ^ 400", `result is too large at position 4`},
		{"1e400", `number 1e400 is out of range at position 1`},
		{"2 $ 3", `unexpected "$" at position 3`},
		{"1.2.3", `unexpected ".3" at position 4`},
		{"é + 1", `unknown name "é" (constants: pi, e) at position 1`},
		{"× 2", `unexpected "×" at position 1`},
		{strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), `expression nested too deeply at position 101`},
		{strings.Repeat("-", 300) + "1", `expression nested too deeply at position 200`},
	}
	for _, tt := range tests {
		name := tt.expr
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		t.Run(name, func(t *testing.T) {
			v, err := calculate(tt.expr)
			if err == nil {
				t.Fatalf("calculate(%q) = %v, want error %q", tt.expr, v, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("calculate(%q) error\n got: %s\nwant: %s", tt.expr, err, tt.want)
			}
		})
	}
}

func FuzzCalculator(f *testing.F) {
	for _, s := range []string{
		"2 * (3 + 4) ^ 2 / 7", "-2^-2", "sqrt(pow(3,2)+4^2)", "1e3 % 7", "min(1,2,3)",
		"round(2.555, 2)", "((1)", "1//2", "ln(0)", "2 ** 3", "1e", ".5e-3", "π", "×÷−",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		v, err := calculate(expr) // must not panic or hang
		if err != nil {
			var ce *calcError
			if errors.As(err, &ce) && (ce.pos < 1 || ce.pos > len([]rune(expr))+1) {
				t.Fatalf("calculate(%q): position %d outside the expression", expr, ce.pos)
			}
			return
		}
		if formatNumber(v) == "NaN" || strings.Contains(formatNumber(v), "Inf") {
			t.Fatalf("calculate(%q) = %v, want a finite number or an error", expr, v)
		}
	})
}
