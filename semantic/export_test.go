package semantic

import "context"

// Step is one step of the indexer (Run's loop without its waits), for
// tests that drive it by hand.
func (r *Recall) Step(ctx context.Context) (int, error) { return r.step(ctx) }
