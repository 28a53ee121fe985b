package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/lograte"
)

// kgoLogger passes franz-go's warnings and errors to the consumer's
// logger, so that a broker that went away shows in the logs while the
// clients keep retrying. Warnings are rate-limited per message (every
// partition's client repeats them while a broker is away); errors are
// logged each.
type kgoLogger struct {
	log   *slog.Logger
	fails *lograte.Limiter
}

// Level implements kgo.Logger.
func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log implements kgo.Logger.
func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level == kgo.LogLevelError {
		l.log.Log(context.Background(), slog.LevelError, "kafka: franz-go: "+msg, keyvals...)
		return
	}
	l.fails.Fail("franz-go: "+msg, "kafka: franz-go: "+msg, keyvals...)
}
