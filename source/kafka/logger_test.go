package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClientLogLevels: the Kafka client's internals go to Debug, its
// warnings and errors stay warnings and errors, but for those about a
// group session it rejoins by itself and its own shutdown; with the
// logger at Info the client is asked for warnings and errors only.
func TestClientLogLevels(t *testing.T) {
	cases := []struct {
		level kgo.LogLevel
		msg   string
		kv    []any
		want  slog.Level
	}{
		{kgo.LogLevelInfo, "joining group", []any{"group", "g"}, slog.LevelDebug},
		{kgo.LogLevelInfo, "heartbeat errored", []any{"group", "g", "err", kerr.RebalanceInProgress}, slog.LevelDebug},
		{kgo.LogLevelDebug, "wrote Fetch v16", nil, slog.LevelDebug},
		{kgo.LogLevelError, "group manage loop errored", []any{"group", "g", "err", kerr.IllegalGeneration, "consecutive_errors", 1}, slog.LevelDebug},
		{kgo.LogLevelError, "group manage loop errored", []any{"err", fmt.Errorf("sync: %w", kerr.UnknownMemberID)}, slog.LevelDebug},
		{kgo.LogLevelWarn, "join group failed", []any{"group", "g", "err", kerr.RebalanceInProgress}, slog.LevelDebug},
		{kgo.LogLevelWarn, "heartbeat errored", []any{"err", context.Canceled}, slog.LevelDebug},
		{kgo.LogLevelWarn, "unable to open connection to broker", []any{"addr", "b:9092", "err", errors.New("connection refused")}, slog.LevelWarn},
		{kgo.LogLevelError, "group manage loop errored", []any{"err", kerr.GroupAuthorizationFailed}, slog.LevelError},
		{kgo.LogLevelError, "balance failed", []any{"err", "not an error value"}, slog.LevelError},
		{kgo.LogLevelWarn, "leaving group as a static member", nil, slog.LevelWarn},
	}
	for _, c := range cases {
		var b bytes.Buffer
		l := slogLogger{slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		l.Log(c.level, c.msg, c.kv...)
		if want := "level=" + c.want.String() + " "; !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "kafka: "+c.msg) {
			t.Errorf("%v %q %v: logged %q, want %s", c.level, c.msg, c.kv, b.String(), want)
		}
	}
	info := slogLogger{slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}
	debug := slogLogger{slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if info.Level() != kgo.LogLevelWarn || debug.Level() != kgo.LogLevelInfo {
		t.Errorf("client levels: %v at Info, %v at Debug; want warn and info", info.Level(), debug.Level())
	}
}
