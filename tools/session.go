package tools

import "context"

type sessionKey struct{}

// WithSession tells the tools a call runs for which session: tools with
// state of their own (a sandbox's files) keep it per session.
func WithSession(ctx context.Context, sessionID string) context.Context {
	return context.WithValue(ctx, sessionKey{}, sessionID)
}

// SessionOf is the session a call runs for, "" outside one.
func SessionOf(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}
