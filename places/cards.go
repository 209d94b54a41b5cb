package places

// Cards: the platform-neutral half of rendering a card or an approval —
// text cut to a limit, names on one line, arguments indented, images
// sorted into those shown by URL and those uploaded.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
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

// MaxUpload is the largest image a place is given as a file.
const MaxUpload = 8 << 20

// ErrNoImage: an image to upload is not base64 image data, or larger than
// MaxUpload.
var ErrNoImage = errors.New("not valid base64 image data, or larger than 8 MiB")

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
	if err != nil || len(raw) == 0 || len(raw) > MaxUpload {
		return "", nil, ErrNoImage
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
