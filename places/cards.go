package places

// Cards: the platform-neutral half of rendering a card or an approval —
// text cut to a limit, names on one line, arguments indented, images
// sorted into those shown by URL and those uploaded.

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
)

// Clip cuts plain text to at most n characters (runes), ending in "…".
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	rs := []rune(s)
	return strings.TrimRight(string(rs[:n-1]), " \t\n") + "…"
}

// OneLine puts s on one line with single spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ToolName is a tool's name on one line, "tool" if it has none.
func ToolName(name string) string {
	if name = OneLine(name); name == "" {
		return "tool"
	}
	return name
}

// PrettyArgs indents JSON arguments; anything else is shown as it is.
// null and nothing give "".
func PrettyArgs(args json.RawMessage) string {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, args, "", "  "); err != nil {
		return strings.TrimSpace(string(args))
	}
	return b.String()
}

// ImageOf sorts a card's image: one given by an http(s) URL of at most
// maxURL bytes is shown by its URL; one given as data (or as a data: URL)
// is returned for upload instead. note says why an image cannot be shown
// ("" for a card without one).
func ImageOf(img switchboard.UIImage, maxURL int) (shownAt string, upload *switchboard.UIImage, note string) {
	if img.Data != "" {
		up := img
		return "", &up, ""
	}
	u := strings.TrimSpace(img.URL)
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mime, isBase64 := strings.CutSuffix(meta, ";base64")
		if ok && isBase64 && strings.HasPrefix(mime, "image/") {
			return "", &switchboard.UIImage{Data: data, MIMEType: mime, Alt: img.Alt}, ""
		}
		return "", nil, "image not shown: unsupported data"
	}
	p, err := url.Parse(u)
	switch {
	case u == "":
		return "", nil, ""
	case err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "":
		return "", nil, "image not shown: not an http(s) URL"
	case len(u) > maxURL:
		return "", nil, "image not shown: its URL is too long"
	}
	return u, nil, ""
}

// maxUpload is the largest image a place is given as a file.
const maxUpload = 8 << 20

// errNoImage: an image to upload is not base64 image data, or larger than
// maxUpload.
var errNoImage = errors.New("not valid base64 image data, or larger than 8 MiB")

// Upload is an image to upload as the file a platform takes: its bytes
// (decoded from base64 or a data: URL's base64) and a file name with the
// extension of its type.
func Upload(img *switchboard.UIImage) (name string, data []byte, err error) {
	b64 := img.Data
	if rest, ok := strings.CutPrefix(b64, "data:"); ok {
		if _, after, ok := strings.Cut(rest, ","); ok {
			b64 = after
		}
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) == 0 || len(raw) > maxUpload {
		return "", nil, errNoImage
	}
	ext := ".png"
	switch img.MIMEType {
	case "image/jpeg":
		ext = ".jpg"
	case "image/gif":
		ext = ".gif"
	case "image/webp":
		ext = ".webp"
	case "image/svg+xml":
		ext = ".svg"
	}
	return "image" + ext, raw, nil
}

// A Choice is one option of a card's select as a place shows it: its
// label on one line (never empty) and its position among the card's
// options (what OptionValue carries back).
type Choice struct {
	Label string
	Index int
	switchboard.UIOption
}

// A SelectPage is one of the selects a card's choice is shown in, where a
// platform takes fewer options to a select than the card has: its
// placeholder says which options it holds ("Choose… (26–50)").
type SelectPage struct {
	Placeholder string
	Choices     []Choice
}

// SelectPages lays a card's select out in selects of at most perSelect
// options, at most most options in all (note says how many more there
// were), each placeholder at most placeholderLimit characters.
func SelectPages(sel switchboard.UISelect, perSelect, most, placeholderLimit int) (pages []SelectPage, note string) {
	opts := sel.Options
	if len(opts) > most {
		note = fmt.Sprintf("%d more options not shown", len(opts)-most)
		opts = opts[:most]
	}
	base := OneLine(sel.Placeholder)
	if base == "" {
		base = "Choose…"
	}
	n := (len(opts) + perSelect - 1) / perSelect
	for page := range n {
		lo, hi := page*perSelect, min((page+1)*perSelect, len(opts))
		p := SelectPage{Placeholder: Clip(base, placeholderLimit)}
		if n > 1 {
			suffix := fmt.Sprintf(" (%d–%d)", lo+1, hi)
			p.Placeholder = Clip(base, placeholderLimit-utf8.RuneCountInString(suffix)) + suffix
		}
		for i, o := range opts[lo:hi] {
			label := cmp.Or(OneLine(o.Label), OneLine(o.Value), fmt.Sprintf("Option %d", lo+i+1))
			p.Choices = append(p.Choices, Choice{Label: label, Index: lo + i, UIOption: o})
		}
		pages = append(pages, p)
	}
	return pages, note
}
