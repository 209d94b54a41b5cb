package guardrails

import (
	"regexp"
	"strings"
)

// A detector finds one kind of personal data or secret in text. Each is a
// pattern that finds candidates and, where the kind has one, a check that
// tells real ones from look-alikes (a card number's Luhn digit, an IBAN's
// mod-97): "order 4111 1111 1111 1112" is not a card.
type detector struct {
	pattern *regexp.Regexp
	valid   func(match string) bool // nil: every match counts
	// maxLen bounds a match's length in bytes, as the pattern allows it
	// (a stream holds back as much, see Stream).
	maxLen int
}

// Detectors are the built-in detectors' names, as guides select them.
func Detectors() []string {
	return []string{"email", "phone", "iban", "credit_card", "secret"}
}

// newDetector is the built-in detector of that name.
func newDetector(name string) (detector, bool) {
	switch name {
	case "email":
		// RFC 5322's common form; quoted local parts and IP literals are
		// not personal data worth the complexity.
		return detector{pattern: regexp.MustCompile(`[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?){0,3}\.[A-Za-z]{2,24}`), maxLen: 345}, true
	case "phone":
		// International (+49 30 1234567) and national numbers with
		// separators, 7 to 15 digits (E.164's bound); dates and amounts
		// are told apart by needing a + or a leading 0 or parentheses.
		return detector{pattern: regexp.MustCompile(`(?:\+[1-9]\d{0,2}|\(0\d{1,4}\)|\b0\d{1,4})(?:[ .\-/]?\(?\d{1,5}\)?){2,6}\b`), valid: phoneDigits, maxLen: 56}, true
	case "iban":
		return detector{pattern: regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4}){3,8}\b`), valid: validIBAN, maxLen: 44}, true
	case "credit_card":
		return detector{pattern: regexp.MustCompile(`\b\d(?:[ \-]?\d){12,18}\b`), valid: luhn, maxLen: 40}, true
	case "secret":
		// API keys and tokens by their vendors' prefixes, and private
		// keys' PEM headers.
		return detector{pattern: regexp.MustCompile(`\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,255}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{40,255}|xox[abprs]-[A-Za-z0-9\-]{10,255}|AIza[0-9A-Za-z_\-]{35}|glpat-[A-Za-z0-9_\-]{20,255})|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----`), maxLen: 270}, true
	}
	return detector{}, false
}

// digits keeps the digits of s.
func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

func phoneDigits(s string) bool {
	n := len(digits(s))
	return n >= 7 && n <= 15
}

// luhn checks a card number's check digit.
func luhn(s string) bool {
	d := digits(s)
	if len(d) < 13 || len(d) > 19 {
		return false
	}
	sum := 0
	for i := range len(d) {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// validIBAN checks an IBAN's length and its mod-97 check digits (ISO 13616).
func validIBAN(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	rearranged := s[4:] + s[:4]
	rem := 0
	for _, c := range rearranged {
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			v := int(c-'A') + 10
			rem = (rem*100 + v) % 97
		default:
			return false
		}
	}
	return rem == 1
}
