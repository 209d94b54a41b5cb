package demo

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones must resolve on a bare machine, as the tool's do
	"unicode"
)

// place is somewhere people ask the time of: a city, or a country that
// keeps one time, and its IANA zone.
type place struct {
	name string
	zone string
}

// places are major cities (and a few one-zone countries) by the names
// people write; aliases repeat a zone under another spelling. Names that
// are also ordinary words (Nice, Reading, Turkey) are left out: "what
// time should the turkey go in" asks no time zone.
var places = []place{
	// Europe
	{"London", "Europe/London"}, {"Manchester", "Europe/London"}, {"Edinburgh", "Europe/London"},
	{"Dublin", "Europe/Dublin"}, {"Lisbon", "Europe/Lisbon"}, {"Porto", "Europe/Lisbon"},
	{"Madrid", "Europe/Madrid"}, {"Barcelona", "Europe/Madrid"}, {"Paris", "Europe/Paris"},
	{"Brussels", "Europe/Brussels"}, {"Amsterdam", "Europe/Amsterdam"}, {"Rotterdam", "Europe/Amsterdam"},
	{"Luxembourg", "Europe/Luxembourg"}, {"Berlin", "Europe/Berlin"}, {"Hamburg", "Europe/Berlin"},
	{"Munich", "Europe/Berlin"}, {"München", "Europe/Berlin"}, {"Frankfurt", "Europe/Berlin"},
	{"Cologne", "Europe/Berlin"}, {"Köln", "Europe/Berlin"}, {"Zurich", "Europe/Zurich"},
	{"Zürich", "Europe/Zurich"}, {"Geneva", "Europe/Zurich"}, {"Vienna", "Europe/Vienna"},
	{"Rome", "Europe/Rome"}, {"Milan", "Europe/Rome"}, {"Prague", "Europe/Prague"},
	{"Warsaw", "Europe/Warsaw"}, {"Budapest", "Europe/Budapest"}, {"Copenhagen", "Europe/Copenhagen"},
	{"Stockholm", "Europe/Stockholm"}, {"Oslo", "Europe/Oslo"}, {"Helsinki", "Europe/Helsinki"},
	{"Tallinn", "Europe/Tallinn"}, {"Riga", "Europe/Riga"}, {"Vilnius", "Europe/Vilnius"},
	{"Athens", "Europe/Athens"}, {"Istanbul", "Europe/Istanbul"}, {"Bucharest", "Europe/Bucharest"},
	{"Sofia", "Europe/Sofia"}, {"Belgrade", "Europe/Belgrade"}, {"Zagreb", "Europe/Zagreb"},
	{"Kyiv", "Europe/Kyiv"}, {"Kiev", "Europe/Kyiv"}, {"Moscow", "Europe/Moscow"},
	{"Saint Petersburg", "Europe/Moscow"}, {"St Petersburg", "Europe/Moscow"}, {"Reykjavik", "Atlantic/Reykjavik"},
	// The Americas
	{"New York", "America/New_York"}, {"New York City", "America/New_York"}, {"NYC", "America/New_York"},
	{"Boston", "America/New_York"}, {"Washington DC", "America/New_York"}, {"Washington D.C.", "America/New_York"},
	{"Miami", "America/New_York"},
	{"Atlanta", "America/New_York"}, {"Toronto", "America/Toronto"}, {"Montreal", "America/Toronto"},
	{"Chicago", "America/Chicago"}, {"Houston", "America/Chicago"}, {"Dallas", "America/Chicago"},
	{"Austin", "America/Chicago"}, {"Mexico City", "America/Mexico_City"}, {"Denver", "America/Denver"},
	{"Salt Lake City", "America/Denver"}, {"Phoenix", "America/Phoenix"}, {"Los Angeles", "America/Los_Angeles"},
	{"San Francisco", "America/Los_Angeles"}, {"San Diego", "America/Los_Angeles"}, {"Las Vegas", "America/Los_Angeles"},
	{"Seattle", "America/Los_Angeles"}, {"Vancouver", "America/Vancouver"}, {"Anchorage", "America/Anchorage"},
	{"Honolulu", "Pacific/Honolulu"}, {"Bogotá", "America/Bogota"}, {"Bogota", "America/Bogota"},
	{"Lima", "America/Lima"}, {"Santiago", "America/Santiago"}, {"Buenos Aires", "America/Argentina/Buenos_Aires"},
	{"São Paulo", "America/Sao_Paulo"}, {"Sao Paulo", "America/Sao_Paulo"}, {"Rio de Janeiro", "America/Sao_Paulo"},
	{"Caracas", "America/Caracas"},
	// Africa and the Middle East
	{"Cairo", "Africa/Cairo"}, {"Lagos", "Africa/Lagos"}, {"Accra", "Africa/Accra"},
	{"Nairobi", "Africa/Nairobi"}, {"Addis Ababa", "Africa/Addis_Ababa"}, {"Johannesburg", "Africa/Johannesburg"},
	{"Cape Town", "Africa/Johannesburg"}, {"Casablanca", "Africa/Casablanca"}, {"Tel Aviv", "Asia/Jerusalem"},
	{"Jerusalem", "Asia/Jerusalem"}, {"Dubai", "Asia/Dubai"}, {"Abu Dhabi", "Asia/Dubai"},
	{"Riyadh", "Asia/Riyadh"}, {"Doha", "Asia/Qatar"}, {"Tehran", "Asia/Tehran"},
	// Asia and Oceania
	{"Karachi", "Asia/Karachi"}, {"Delhi", "Asia/Kolkata"}, {"New Delhi", "Asia/Kolkata"},
	{"Mumbai", "Asia/Kolkata"}, {"Bangalore", "Asia/Kolkata"}, {"Bengaluru", "Asia/Kolkata"},
	{"Kolkata", "Asia/Kolkata"}, {"Kathmandu", "Asia/Kathmandu"}, {"Dhaka", "Asia/Dhaka"},
	{"Bangkok", "Asia/Bangkok"}, {"Hanoi", "Asia/Ho_Chi_Minh"}, {"Ho Chi Minh City", "Asia/Ho_Chi_Minh"},
	{"Saigon", "Asia/Ho_Chi_Minh"}, {"Jakarta", "Asia/Jakarta"}, {"Singapore", "Asia/Singapore"},
	{"Kuala Lumpur", "Asia/Kuala_Lumpur"}, {"Manila", "Asia/Manila"}, {"Hong Kong", "Asia/Hong_Kong"},
	{"Shanghai", "Asia/Shanghai"}, {"Beijing", "Asia/Shanghai"}, {"Shenzhen", "Asia/Shanghai"},
	{"Taipei", "Asia/Taipei"}, {"Seoul", "Asia/Seoul"}, {"Tokyo", "Asia/Tokyo"},
	{"Osaka", "Asia/Tokyo"}, {"Sydney", "Australia/Sydney"}, {"Melbourne", "Australia/Melbourne"},
	{"Brisbane", "Australia/Brisbane"}, {"Adelaide", "Australia/Adelaide"}, {"Perth", "Australia/Perth"},
	{"Auckland", "Pacific/Auckland"}, {"Wellington", "Pacific/Auckland"},
	// Countries that keep one time
	{"Germany", "Europe/Berlin"}, {"France", "Europe/Paris"}, {"Italy", "Europe/Rome"},
	{"Netherlands", "Europe/Amsterdam"}, {"Belgium", "Europe/Brussels"}, {"Switzerland", "Europe/Zurich"},
	{"Austria", "Europe/Vienna"}, {"Poland", "Europe/Warsaw"}, {"Ireland", "Europe/Dublin"},
	{"UK", "Europe/London"}, {"United Kingdom", "Europe/London"}, {"England", "Europe/London"},
	{"Britain", "Europe/London"}, {"Sweden", "Europe/Stockholm"}, {"Norway", "Europe/Oslo"},
	{"Denmark", "Europe/Copenhagen"}, {"Finland", "Europe/Helsinki"}, {"Greece", "Europe/Athens"},
	{"Israel", "Asia/Jerusalem"}, {"Egypt", "Africa/Cairo"}, {"Kenya", "Africa/Nairobi"},
	{"Nigeria", "Africa/Lagos"}, {"South Africa", "Africa/Johannesburg"}, {"India", "Asia/Kolkata"},
	{"China", "Asia/Shanghai"}, {"Japan", "Asia/Tokyo"}, {"South Korea", "Asia/Seoul"},
	{"Korea", "Asia/Seoul"}, {"Thailand", "Asia/Bangkok"}, {"Vietnam", "Asia/Ho_Chi_Minh"},
	{"Philippines", "Asia/Manila"}, {"New Zealand", "Pacific/Auckland"}, {"Argentina", "America/Argentina/Buenos_Aires"},
	{"Colombia", "America/Bogota"}, {"Peru", "America/Lima"},
}

// placeIndex finds a place by its words, lower-cased and joined by one
// space ("new york city"); longestPlace is the most words a name has.
var placeIndex, longestPlace = func() (map[string]place, int) {
	m := make(map[string]place, len(places))
	longest := 0
	for _, p := range places {
		w := words(p.name)
		m[strings.Join(w, " ")] = p
		longest = max(longest, len(w))
	}
	return m, longest
}()

// words splits text into lower-case words of letters and digits: "São
// Paulo's" is "são", "paulo", "s"; "Washington, D.C." is "washington",
// "d", "c".
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

var (
	// ianaPattern is a zone written out: Europe/Berlin, America/New_York,
	// America/Argentina/Buenos_Aires, Etc/GMT+5.
	ianaPattern = regexp.MustCompile(`\b[A-Za-z]+(?:/[A-Za-z0-9_+-]+){1,2}`)
	// offsetPattern is UTC or GMT with a whole-hour offset: UTC+2, GMT-5.
	offsetPattern = regexp.MustCompile(`(?i)\b(?:UTC|GMT)\s*([+\-−])\s*(\d{1,2})(?::00)?\b`)
	// utcPattern is UTC or GMT alone.
	utcPattern = regexp.MustCompile(`(?i)\b(?:UTC|GMT)\b`)
)

// zoneIn finds the time zone a text asks about: an IANA zone written out
// (Europe/Berlin), UTC or GMT with or without a whole-hour offset, or a
// city or country from places, in any case and across several words
// ("new york"). An explicit zone wins over a place; among places the one
// named first does, and of two that start together the longer ("New York
// City" over "New York"). name is how to call it in a reply: the place as
// the table spells it, or the zone's city ("America/New_York": "New
// York"). zone is "" when the text names none.
func zoneIn(text string) (zone, name string) {
	for _, m := range ianaPattern.FindAllString(text, -1) {
		if z, ok := loadZone(m); ok {
			return z, zoneCity(z)
		}
	}
	if m := offsetPattern.FindStringSubmatch(text); m != nil {
		h, _ := strconv.Atoi(m[2])
		// Etc/GMT zones count the other way round: UTC+2 is Etc/GMT-2.
		sign := "-"
		if m[1] != "+" {
			sign = "+"
		}
		z := "Etc/GMT" + sign + strconv.Itoa(h)
		if h == 0 {
			z = "UTC"
		}
		if _, ok := loadZone(z); ok {
			return z, zoneCity(z)
		}
	}
	w := words(text)
	for i := range w {
		for n := min(longestPlace, len(w)-i); n >= 1; n-- {
			key := strings.Join(w[i:i+n], " ")
			if p, ok := placeIndex[key]; ok {
				return p.zone, p.name
			}
		}
	}
	if utcPattern.MatchString(text) {
		return "UTC", "UTC"
	}
	return "", ""
}

// loadZone checks a written-out zone, forgiving its case: "europe/berlin"
// is Europe/Berlin. "Local" is the server's zone, which means nothing to
// the person asking, as the tool says too.
func loadZone(name string) (string, bool) {
	for _, z := range []string{name, titleZone(name)} {
		if z == "Local" || z == "" {
			continue
		}
		if _, err := time.LoadLocation(z); err == nil {
			return z, true
		}
	}
	return "", false
}

// titleZone capitalises each word of a zone name: "america/new_york" is
// "America/New_York"; "etc/gmt+5" is "Etc/GMT+5".
func titleZone(name string) string {
	if strings.HasPrefix(strings.ToLower(name), "etc/gmt") {
		return "Etc/GMT" + name[len("etc/gmt"):]
	}
	b := []rune(strings.ToLower(name))
	for i, r := range b {
		if i == 0 || b[i-1] == '/' || b[i-1] == '_' || b[i-1] == '-' {
			b[i] = unicode.ToUpper(r)
		}
	}
	return string(b)
}

// zoneCity is how a reply calls a zone: its city, "America/New_York" is
// "New York"; UTC stays UTC, and Etc/GMT-2 is UTC+2.
func zoneCity(zone string) string {
	switch {
	case zone == "UTC" || zone == "Etc/UTC" || zone == "GMT" || zone == "Etc/GMT":
		return "UTC"
	case strings.HasPrefix(zone, "Etc/GMT"):
		off := zone[len("Etc/GMT"):]
		switch {
		case strings.HasPrefix(off, "-"):
			return "UTC+" + off[1:]
		case strings.HasPrefix(off, "+"):
			return "UTC-" + off[1:]
		}
	}
	return strings.ReplaceAll(zone[strings.LastIndexByte(zone, '/')+1:], "_", " ")
}

// isUTCLike reports whether a zone is UTC or a fixed offset from it, which
// a reply names after the time ("10:30 UTC") rather than as a place.
func isUTCLike(zone string) bool {
	return zone == "UTC" || zone == "GMT" || strings.HasPrefix(zone, "Etc/")
}
