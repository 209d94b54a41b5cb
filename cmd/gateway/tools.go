package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
	"github.com/switchboard-gw/switchboard/tools/mcp"
	"github.com/switchboard-gw/switchboard/tools/sandbox"
)

// toolbox is the tools the gateway offers: the built-ins, the sandbox's
// when tools.sandbox.enabled, and each MCP server's under its name.
type toolbox struct {
	registry *tools.Registry
	sandbox  *sandbox.Sandbox // nil when off
	// workspaces are the conversations' folders, under tools.sandbox.dir:
	// the sandbox's when it is on, else one for people's files alone (nil
	// when uploads are off too).
	workspaces *sandbox.Sandbox
	uploadsOn  bool
	// mcp runs the MCP servers: nil without any. A reload may set it
	// (reload.go), so it is read through mcpManager once the gateway runs.
	mcpMu   sync.Mutex
	mcp     *mcp.Manager
	environ []string
	images  string // the terminal's saved images (dataDir)
	log     *slog.Logger
}

// mcpManager is the MCP servers' manager now (nil: none configured).
func (tb *toolbox) mcpManager() *mcp.Manager {
	tb.mcpMu.Lock()
	defer tb.mcpMu.Unlock()
	return tb.mcp
}

// mcpServers is tools.mcp in the MCP package's terms.
func mcpServers(list []config.MCPServer) []mcp.ServerConfig {
	servers := make([]mcp.ServerConfig, len(list))
	for i, s := range list {
		servers[i] = mcp.ServerConfig{Name: s.Name, Command: s.Command, Env: s.Env, URL: s.URL, Headers: s.Headers, MaxResponseMB: s.MaxResponseMB}
	}
	return servers
}

// buildTools makes the registry. Nothing is started: MCP servers start
// with start, once the sessions exist.
// db keeps what remember is told and recall answers memory_search (the
// store's full-text search, or semantic recall's); both are nil for the
// doctor, which only checks that guides name tools that exist.
func buildTools(cfg config.Config, environ []string, memories tools.Memories, recall tools.Recall, log *slog.Logger) (*toolbox, error) {
	tb := &toolbox{log: log, images: dataDir(cfg, "images"), environ: environ}
	all := append(tools.Builtins(time.Now), append(tools.MemoryTools(memories, time.Now), tools.RecallTool(recall))...)
	if sc := cfg.Tools.Sandbox; sc.Enabled {
		sb, err := sandbox.New(sandboxConfig(cfg), log)
		if err != nil {
			return nil, err
		}
		tb.sandbox = sb
		all = append(all, sb.Tools()...)
	}
	tb.workspaces, tb.uploadsOn = tb.sandbox, cfg.Uploads.Enabled
	reg, err := tools.NewRegistry(all...)
	if err != nil {
		return nil, err
	}
	tb.registry = reg
	if len(cfg.Tools.MCP) > 0 {
		m, err := mcp.New(mcpServers(cfg.Tools.MCP), environ, log)
		if err != nil {
			return nil, err
		}
		tb.mcp = m
	}
	return tb, nil
}

// sandboxConfig is tools.sandbox in the sandbox's terms; its workspaces go
// beside the database unless tools.sandbox.dir says where.
func sandboxConfig(cfg config.Config) sandbox.Config {
	sc := cfg.Tools.Sandbox
	dir := sc.Dir
	if dir == "" {
		dir = dataDir(cfg, "sandbox")
	}
	return sandbox.Config{
		Enabled: true, Dir: dir, Python: sc.Python, Bwrap: sc.Bwrap,
		Timeout: time.Duration(sc.Timeout), CPUSeconds: int(time.Duration(sc.CPU) / time.Second),
		MemoryBytes: int64(sc.MemoryMB) << 20, MaxFiles: sc.MaxFiles, FileSizeBytes: int64(sc.FileSizeMB) << 20,
		MaxProcs: sc.MaxProcs, OutputBytes: sc.OutputKB << 10, QuotaBytes: int64(sc.QuotaMB) << 20,
		TmpBytes: int64(sc.TmpMB) << 20, Concurrency: sc.Concurrency, Wheelhouse: sc.Wheelhouse,
	}
}

// groups are the MCP servers' names: a guide may name their tools.
func (tb *toolbox) groups() []string {
	m := tb.mcpManager()
	if m == nil {
		return nil
	}
	return m.Servers()
}

// start checks the sandbox (its tools refuse with the reason when it
// cannot run, so the gateway still starts) and connects the MCP servers,
// keeping their tools in the registry as they change, until ctx ends.
func (tb *toolbox) start(ctx context.Context) {
	if tb.sandbox != nil {
		if err := tb.sandbox.Check(ctx); err != nil {
			tb.log.Error("tools.sandbox: the python tool cannot run here", "err", err)
		}
	}
	if m := tb.mcpManager(); m != nil {
		tb.startMCP(ctx, m)
	}
}

// startMCP connects the MCP servers (for 30 s at most: the others come up
// in the background) and keeps their tools in the registry as they
// change, until ctx ends.
func (tb *toolbox) startMCP(ctx context.Context, m *mcp.Manager) {
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.Start(startCtx); err != nil {
		tb.log.Error("mcp: start", "err", err)
	}
	tb.syncMCP(m)
	go func() {
		for {
			select {
			case <-m.Changed(): // buffered: a change since Start is not missed
				tb.syncMCP(m)
			case <-ctx.Done():
				return
			}
		}
	}()
}

// syncMCP puts each server's tools in the registry as "server.tool", the
// name guides and people use; the providers send it as "server__tool".
func (tb *toolbox) syncMCP(m *mcp.Manager) {
	for _, server := range m.Servers() {
		if err := tb.registry.SetGroup(server, m.Group(server)); err != nil {
			tb.log.Warn("mcp: some tools of a server are left out", "server", server, "err", err)
		}
	}
}

// close stops the MCP servers.
func (tb *toolbox) close() {
	if m := tb.mcpManager(); m != nil {
		if err := m.Close(); err != nil {
			tb.log.Warn("mcp: close", "err", err)
		}
	}
}

// openWorkspaces makes the conversations' folders ready for people's
// files when the python tool's sandbox did not (it is off): the model
// reads of them, and sees pictures, whether or not python runs. The
// doctor builds the tools without it, and so creates nothing.
func (tb *toolbox) openWorkspaces(cfg config.Config) error {
	if tb.workspaces != nil || !cfg.Uploads.Enabled {
		return nil
	}
	ws, err := sandbox.New(sandboxConfig(cfg), tb.log)
	if err != nil {
		return err
	}
	tb.workspaces = ws
	return nil
}

// uploads is where people's files go; nil when uploads are off.
func (tb *toolbox) uploads() sessions.Uploads {
	if !tb.uploadsOn || tb.workspaces == nil {
		return nil
	}
	return tb.workspaces.Uploads()
}

// uploadLimits is the uploads section in the sessions' terms.
func uploadLimits(u config.Uploads) sessions.UploadLimits {
	return sessions.UploadLimits{
		FileBytes: int64(u.MaxFileMB) << 20, MessageBytes: int64(u.MaxMessageMB) << 20, Files: u.MaxFiles, Types: u.Types,
	}
}

// forget deletes what a session kept in files, once retention deleted it.
func (tb *toolbox) forget(ids []string) {
	for _, id := range ids {
		if tb.workspaces != nil {
			if err := tb.workspaces.Remove(id); err != nil {
				tb.log.Warn("retention: a sandbox's files were not deleted", "session", id, "err", err)
			}
		}
		if !safeSessionID(id) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(tb.images, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			tb.log.Warn("retention: saved images were not deleted", "session", id, "err", err)
		}
	}
}

// files lists a session's sandbox files for /files.
func (tb *toolbox) files(sessionID string) ([]sessions.File, error) {
	if tb.workspaces == nil {
		return nil, sessions.ErrNoFiles
	}
	fs, err := tb.workspaces.Files(sessionID)
	if err != nil {
		return nil, fmt.Errorf("sandbox: files of %s: %w", sessionID, err)
	}
	out := make([]sessions.File, len(fs))
	for i, f := range fs {
		out[i] = sessions.File{Path: f.Path, Size: f.Size, Modified: f.ModTime}
	}
	return out, nil
}

// safeSessionID: a session id is a folder name as it is (s_ and hex).
func safeSessionID(id string) bool {
	if !strings.HasPrefix(id, "s_") || len(id) > 64 {
		return false
	}
	for _, r := range id[2:] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
