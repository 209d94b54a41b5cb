package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/listeners/openai"
	"github.com/switchboard-gw/switchboard/sessions"
)

// checkOpenAI refuses to serve the OpenAI-compatible API with a key whose
// variable is unset or too short (an empty key would match a request that
// sends none), or that names a guide the catalog lacks.
func checkOpenAI(cfg config.Config, environ []string, catalog *guides.Catalog) error {
	o := cfg.Listeners.OpenAI
	if !o.Enabled {
		return nil
	}
	for i, k := range o.Keys {
		key := fmt.Sprintf("listeners.openai.keys[%d]", i)
		switch secret := k.Secret(environ); {
		case secret == "":
			return fmt.Errorf("%s.key_env: the environment variable %s is not set (the key of %q)", key, k.KeyEnv, k.Name)
		case len(secret) < config.MinOpenAIKey:
			return fmt.Errorf("%s.key_env: the key in %s must be at least %d characters; e.g. echo sk-$(openssl rand -hex 24)", key, k.KeyEnv, config.MinOpenAIKey)
		}
		for _, g := range k.Guides {
			if _, ok := catalog.Get(g); !ok {
				return fmt.Errorf("%s.guides: no guide %q in %s (have: %s)", key, g, cfg.Guides.Dir, strings.Join(catalog.Names(), ", "))
			}
		}
	}
	return nil
}

// mountOpenAI serves the API under /v1/ in front of handler when it is
// enabled. Its requests are authenticated by their keys, and come through
// whatever name the proxy in front has: outside the Host guard, as
// Slack's and Discord's are.
func mountOpenAI(ctx context.Context, cfg config.Config, environ []string, handler http.Handler, mgr *sessions.Manager, catalog *guides.Catalog, log *slog.Logger) http.Handler {
	o := cfg.Listeners.OpenAI
	if !o.Enabled {
		return handler
	}
	var keys []openai.Key
	for _, k := range o.Keys {
		role := collaboration.Role(k.Role)
		keys = append(keys, openai.Key{Name: k.Name, Secret: k.Secret(environ), Role: role, Guides: slices.Clone(k.Guides)})
	}
	outer := http.NewServeMux()
	outer.Handle("/v1/", openai.New(ctx, openai.Config{Keys: keys, RequestsPerMinute: o.RequestsPerMinute, MaxBodyBytes: o.MaxBodyBytes,
		ApprovalTimeout: time.Duration(o.ApprovalTimeout)}, mgr, catalog, log))
	outer.Handle("/", handler)
	log.Info("the OpenAI-compatible API is served under /v1", "keys", len(keys))
	return outer
}
