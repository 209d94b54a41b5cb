package mcp

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// Bounds on what one call may hand back: the text goes into the model's
// context, the pictures into every channel's events.
const (
	maxResultText = 64 << 10
	maxImages     = 4
	maxImageBytes = 4 << 20
)

// shownImage lists the pictures every channel can show; an SVG (a script
// carrier) or an exotic format is told to the model but not shown.
var shownImage = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// toResult maps an MCP tool result to the gateway's: text parts joined,
// pictures as Images (with a line telling the model they were shown),
// other content named in a line, structured content as JSON when there is
// no text. isError becomes an error with the server's text, so the turn
// marks the result as an error.
func toResult(server, tool string, r *sdk.CallToolResult) (tools.Result, error) {
	var res tools.Result
	var parts []string
	hasText := false
	for _, c := range r.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
			hasText = true
		case *sdk.ImageContent:
			parts = append(parts, addImage(&res, c.Data, c.MIMEType, server+"."+tool))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %s: not shown]", c.MIMEType, size(len(c.Data))))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			switch rc := c.Resource; {
			case rc.Text != "":
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", rc.URI, rc.Text))
				hasText = true
			case strings.HasPrefix(rc.MIMEType, "image/"):
				parts = append(parts, addImage(&res, rc.Blob, rc.MIMEType, rc.URI))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %s: binary, not shown]", rc.URI, rc.MIMEType, size(len(rc.Blob))))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content: not shown]", c))
		}
	}
	if !hasText && r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := capText(strings.Join(parts, "\n"))
	if r.IsError {
		if strings.TrimSpace(text) == "" {
			text = "the tool failed without saying why"
		}
		// The pictures of a failed call are not shown.
		return tools.Result{}, errors.New(text)
	}
	res.Content = text
	return res, nil
}

// addImage keeps a picture for the users and returns the line that tells
// the model about it.
func addImage(res *tools.Result, data []byte, mime, alt string) string {
	switch {
	case !shownImage[mime]:
		return fmt.Sprintf("[image, %s, %s: a format the chat does not show]", mime, size(len(data)))
	case len(data) > maxImageBytes:
		return fmt.Sprintf("[image, %s, %s: too large to show (the limit is %s)]", mime, size(len(data)), size(maxImageBytes))
	case len(res.Images) >= maxImages:
		return fmt.Sprintf("[image, %s: not shown, only %d pictures are shown per call]", mime, maxImages)
	}
	res.Images = append(res.Images, switchboard.UIImage{
		Data: base64.StdEncoding.EncodeToString(data), MIMEType: mime, Alt: alt,
	})
	return fmt.Sprintf("[image, %s, %s: shown to the user]", mime, size(len(data)))
}

// capText cuts text longer than maxResultText at a character boundary and
// says so, so the model knows it saw only the beginning.
func capText(s string) string {
	if len(s) <= maxResultText {
		return s
	}
	head := cutAt(s, maxResultText)
	return head + fmt.Sprintf("\n…[cut: the result was %s; this is the first %s]", size(len(s)), size(len(head)))
}

// cutAt is s cut to at most n bytes, at a character boundary.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
