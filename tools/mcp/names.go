package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Names. People (guides, docs, logs) and the gateway's registry call an MCP
// tool server.tool (GatewayName); the providers allow no dot in a function
// name (^[A-Za-z0-9_-]{1,64}$), so the model sees server__tool (ToolName):
//
//	github.create_issue  →  github__create_issue
//
// A server name has no "__" and does not end in "_" (ServerConfig.Validate),
// so the first "__" of a model name always ends the server part: two
// servers can never produce the same name. A tool name that cannot be used
// as it is (a dot, a space, longer than fits) is cleaned and shortened and
// gets a hash of the original, so the mapping stays deterministic (the same
// name after every restart, which "always allow" and stored history rely
// on) and distinct tools stay distinct:
//
//	github.repos.list  →  github.repos_list_5b7c1028, github__repos_list_5b7c1028
const (
	sep         = "__"
	maxNameLen  = 64
	hashLen     = 8
	patternSep  = "."
	maxToolName = 128 // what MCP allows a tool name
)

var (
	serverName   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,30}$`)
	plainTool    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	notToolChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)
)

// ToolName is the name the model sees for the MCP tool tool of server: see
// the mapping above. server must be a valid server name.
func ToolName(server, tool string) string {
	name := server + sep + tool
	if plainTool.MatchString(tool) && len(name) <= maxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(server + patternSep + tool))
	suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
	clean := notToolChars.ReplaceAllString(tool, "_")
	if room := maxNameLen - len(server) - len(sep) - len(suffix); len(clean) > room {
		clean = clean[:room]
	}
	return server + sep + clean + suffix
}

// GatewayName is the name the gateway's registry and guides give the MCP
// tool tool of server: "server.tool" with the MCP name itself when it is
// 1-64 letters, digits, _ or - (what tools.Registry.SetGroup takes), else
// with ToolName's cleaned and hashed form ("github.repos_list_5b7c1028").
// The providers send it to the model as server__tool.
func GatewayName(server, tool string) string {
	if plainTool.MatchString(tool) && len(tool) <= maxNameLen {
		return server + patternSep + tool
	}
	return server + patternSep + strings.TrimPrefix(ToolName(server, tool), server+sep)
}

func validServerName(name string) error {
	switch {
	case !serverName.MatchString(name):
		return fmt.Errorf("server name %q must be 1-31 lowercase letters, digits, _ or -, starting with a letter", name)
	case strings.Contains(name, sep) || strings.HasSuffix(name, "_"):
		// Either would make server__tool ambiguous: a__b + c and a + b__c.
		return fmt.Errorf("server name %q may not contain %q or end in _", name, sep)
	}
	return nil
}
