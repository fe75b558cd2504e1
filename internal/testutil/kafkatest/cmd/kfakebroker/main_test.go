package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-topic", "a:2", "-topic", "b"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr := strings.TrimSpace(line)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %q", addr)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	topics, err := kadm.NewClient(cl).ListTopics(tctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(topics["a"].Partitions); n != 2 {
		t.Errorf("topic a has %d partitions, want 2", n)
	}
	if n := len(topics["b"].Partitions); n != 1 {
		t.Errorf("topic b has %d partitions, want 1", n)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
}

// TestRunGroupMinSessionTimeout: -group-min-session-timeout admits a
// group member with a session shorter than kfake's default minimum.
func TestRunGroupMinSessionTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-topic", "a:2", "-group-min-session-timeout", "500ms"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	if err := kafkatest.TryJoin(tctx, []string{strings.TrimSpace(line)}, "g", "a", time.Second); err != nil {
		t.Fatalf("join with a 1s session: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-topic", "a:0"}, {"-listen", "256.0.0.1:1"}, {"extra"}, {"-group-min-session-timeout", "-1s"}, {"-group-min-session-timeout", "soon"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
