package fence

import (
	"context"
	"log/slog"
)

// Unfenced runs fn, an effect on a resource that cannot check a token (a
// file system, a legacy API, a third-party service). It is NOT SAFE: a
// holder that paused past its lease can run fn after a newer holder has run
// it too, and no timeout setting prevents that. Prefer a resource that
// checks tokens (lease.Fence, Table, Header), or make the effect idempotent
// under an idempotency key.
//
// Every call logs a warning naming the resource, the token and reason, so
// unfenced effects are visible in production logs. log defaults to
// slog.Default().
func Unfenced(ctx context.Context, log *slog.Logger, resource string, t Token, reason string, fn func(context.Context) error) error {
	if log == nil {
		log = slog.Default()
	}
	log.WarnContext(ctx, "fence: UNFENCED effect: a stale holder could apply it twice",
		"resource", resource, "token", int64(t), "reason", reason)
	return fn(ctx)
}
