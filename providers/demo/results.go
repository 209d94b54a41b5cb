package demo

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// phraseResults answers the tool results that end msgs, in the order the
// calls were made: what each found, in words for the people reading, never
// the words a tool addresses to the model ("Shown to the user: …, wait for
// it").
func phraseResults(msgs []switchboard.Message) string {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == switchboard.RoleTool {
		start--
	}
	calls := map[string]switchboard.ToolCall{}
	question := ""
	if start > 0 && msgs[start-1].Role == switchboard.RoleAssistant {
		for _, c := range msgs[start-1].ToolCalls {
			calls[c.ID] = c
		}
	}
	for i := start - 1; i >= 0; i-- {
		if msgs[i].Role == switchboard.RoleUser {
			question = msgs[i].Content
			if label, ok := clicked(question); ok {
				question = label
			}
			break
		}
	}
	var out []string
	for _, m := range msgs[start:] {
		c := calls[m.ToolCallID]
		if c.Name == "" {
			c.Name = m.ToolName
		}
		if m.IsError {
			out = append(out, phraseFailure(c, m.Content))
		} else {
			out = append(out, phraseResult(c, m.Content, question))
		}
	}
	return strings.Join(out, " ")
}

// timeResult is what current_time returns:
// "2026-11-22T11:30:00+01:00 (Sunday, Europe/Berlin)".
var timeResult = regexp.MustCompile(`^(\S+) \((\w+), (.+)\)$`)

// phraseResult says what a tool that worked found.
func phraseResult(c switchboard.ToolCall, content, question string) string {
	switch c.Name {
	case "current_time":
		m := timeResult.FindStringSubmatch(strings.TrimSpace(content))
		if m == nil {
			break
		}
		t, err := time.Parse(time.RFC3339, m[1])
		if err != nil {
			break
		}
		return phraseTime(t, m[2], m[3], argString(c.Args, "timezone"), question)
	case "calculator":
		expr := argString(c.Args, "expression")
		if expr == "" {
			return fmt.Sprintf("That comes to %s.", content)
		}
		return fmt.Sprintf("%s = %s", markdownSafe(expr), content)
	case "present":
		var card struct {
			Buttons []json.RawMessage `json:"buttons"`
			Select  json.RawMessage   `json:"select"`
			Form    json.RawMessage   `json:"form"`
		}
		_ = json.Unmarshal(c.Args, &card) // a card that ran was valid JSON
		switch {
		case card.Form != nil:
			return "Fill in the form above."
		case len(card.Buttons) > 0 || card.Select != nil:
			return "Pick one above."
		}
		return "The card is above."
	}
	return fmt.Sprintf("%s says: %s", c.Name, oneLine(content))
}

// phraseTime: "It is 11:30 on Sunday in Berlin (Europe/Berlin)." for a
// place, "It is 10:30 UTC on Sunday." for UTC or an offset, with the date
// after the weekday when the question asked for it. The place is
// the one the question named when it is in the zone that was looked up
// ("San Francisco" for America/Los_Angeles), else the zone's city.
func phraseTime(t time.Time, weekday, zone, asked, question string) string {
	clock := t.Format("15:04")
	day := weekday
	if asksDate(words(question)) {
		day += ", " + t.Format("2 January 2006")
	}
	if isUTCLike(zone) {
		s := fmt.Sprintf("It is %s %s on %s.", clock, zoneCity(zone), day)
		if asked == "" {
			s += " Name a city or a time zone for its local time."
		}
		return s
	}
	name := zoneCity(zone)
	if z, n := zoneIn(question); z == zone && n != "" {
		name = n
	}
	if day != weekday {
		day += "," // "on Sunday, 22 November 2026, in Berlin"
	}
	if name == zone {
		return fmt.Sprintf("It is %s on %s in %s.", clock, day, zone)
	}
	return fmt.Sprintf("It is %s on %s in %s (%s).", clock, day, name, zone)
}

// phraseFailure says why a tool did not help, in a sentence a person can
// act on. The reasons come from the gateway (a denial, a timeout) or from
// the tool (a bad time zone, a division by zero).
func phraseFailure(c switchboard.ToolCall, content string) string {
	name := c.Name
	content = strings.TrimPrefix(strings.TrimSpace(content), name+": ") // the registry names the tool that failed
	doing := map[string]string{
		"current_time": "look it up",
		"calculator":   "work it out",
		"present":      "show you the card",
	}[name]
	if doing == "" {
		doing = "use it"
	}
	switch {
	case strings.HasPrefix(content, "the user denied"):
		return fmt.Sprintf("You did not approve %s, so I can't %s; ask again if you change your mind.", name, doing)
	case strings.HasPrefix(content, "nobody approved"):
		return fmt.Sprintf("Nobody approved %s in time, so I couldn't %s; ask again when someone can approve it.", name, doing)
	case strings.Contains(content, "is not allowed in this conversation"):
		return fmt.Sprintf("%s is not allowed in this conversation, so I can't %s.", name, doing)
	case strings.HasPrefix(content, "unknown tool"):
		return fmt.Sprintf("I have no %s tool here, so I can't %s.", name, doing)
	case strings.HasPrefix(content, "cancelled"):
		return fmt.Sprintf("%s was stopped before it finished.", name)
	case strings.HasPrefix(content, "timed out"):
		return fmt.Sprintf("%s took too long, so I gave up; try again in a moment.", name)
	case name == "current_time" && strings.HasPrefix(content, "unknown time zone"):
		zone := argString(c.Args, "timezone")
		return fmt.Sprintf("I don't know the time zone %q; try a city such as Berlin or a zone such as Europe/Berlin.", zone)
	case name == "calculator":
		why := calcPosition.ReplaceAllString(oneLine(content), "")
		if expr := argString(c.Args, "expression"); expr != "" {
			return fmt.Sprintf("I could not work out %s: %s.", markdownSafe(expr), why)
		}
		return fmt.Sprintf("I could not work that out: %s.", why)
	}
	return fmt.Sprintf("Sorry, %s did not work: %s.", name, oneLine(content))
}

// calcPosition is where the calculator says a problem is, which means
// little in a sentence: "division by zero at position 2".
var calcPosition = regexp.MustCompile(` at position \d+$`)

// argString reads a string argument of a tool call.
func argString(args json.RawMessage, key string) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

// oneLine is the first line of a tool's message, without a closing full
// stop, cut to a sentence's length.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimRight(s, ". ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}

// markdownSafe shows an expression as written: as is when Markdown leaves
// it alone, in a code span when two asterisks would turn into emphasis
// (2*3*4) or an underscore or backtick could.
func markdownSafe(expr string) string {
	if strings.Count(expr, "*") < 2 && !strings.ContainsAny(expr, "_`") {
		return expr
	}
	if strings.Contains(expr, "`") {
		return "`` " + expr + " ``"
	}
	return "`" + expr + "`"
}
