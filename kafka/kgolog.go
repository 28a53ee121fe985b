package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger passes franz-go's warnings and errors to the consumer's
// logger, so that a broker that went away shows in the logs while the
// clients keep retrying.
type kgoLogger struct{ log *slog.Logger }

// Level implements kgo.Logger.
func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log implements kgo.Logger.
func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "kafka: franz-go: "+msg, keyvals...)
}
