package websocket

// Renders is how many times h has run the Markdown renderer, for tests
// that check a message is rendered once however many clients see it.
func Renders(h *Handler) int64 { return h.md.renders.Load() }
