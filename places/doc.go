// Package places is what every chat app does the same way with a place —
// a thread or a DM that shows a conversation — whatever the platform: the
// core's side of a chat app, which defines both sides' interfaces and
// imports no platform's SDK. A chat app keeps lifecycle, inbound decoding
// and rendering, and implements Room (and Line for joins); see
// docs/architecture.md, "Adding a chat app".
//
// Ordering and backpressure. Inbound work is run by Layer.Run on one of a
// fixed set of workers chosen by the place's address: what happens in one
// place is handled in the order the chat app queued it, places in
// parallel, with no lock shared between them. Each worker's queue is
// bounded (Config.Depth): when it is full, Run blocks the caller — the
// platform's event reader — until there is room or the layer stops, so a
// flood in one place slows its platform's delivery rather than growing
// memory. Work that may take long, downloading the files a person
// attached, is set aside (Layer.Aside) on a goroutine of its own: the
// place's later work waits for it, in order, while the other places on
// its worker go on (files.go); what waits behind it is bounded by Depth
// too. Rendering runs on one goroutine per followed place (a Room is never
// called concurrently), fed by the session's Subscription, whose own
// bounded buffer drops a follower that cannot keep up to catch up from
// the store by seq: a slow platform never slows a session.
package places
