package proc

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestKillAndStop(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sleep(1)")
	}
	for _, stop := range []bool{false, true} {
		p, err := Start(exec.Command("sleep", "60"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Exited() || p.Err() != nil {
			t.Fatalf("a running process reports exited=%v err=%v", p.Exited(), p.Err())
		}
		if stop {
			p.Stop(10 * time.Second)
		} else {
			p.Kill()
		}
		if !p.Exited() || p.Err() == nil {
			t.Fatalf("after stop=%v: exited=%v err=%v, want exited by a signal", stop, p.Exited(), p.Err())
		}
		p.Kill() // no-op once exited
	}
}

func TestStartFails(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/binary")); err == nil || !strings.Contains(err.Error(), "/nonexistent/binary") {
		t.Fatalf("Start of a missing binary: %v, want an error naming it", err)
	}
}

func TestTail(t *testing.T) {
	tl := &Tail{Max: 4}
	_, _ = tl.Write([]byte("abc"))
	_, _ = tl.Write([]byte("defg"))
	if got := tl.String(10); got != "defg" {
		t.Fatalf("tail = %q, want %q", got, "defg")
	}
	if got := tl.String(2); got != "fg" {
		t.Fatalf("tail(2) = %q, want %q", got, "fg")
	}
}

func TestRetryPortInUse(t *testing.T) {
	tries := 0
	err := RetryPortInUse(3, 0, func() error { tries++; return fmt.Errorf("bind: %w", ErrPortInUse) })
	if !errors.Is(err, ErrPortInUse) || tries != 3 {
		t.Fatalf("always in use: %d tries, %v; want 3 tries and ErrPortInUse", tries, err)
	}
	tries = 0
	other := errors.New("no binary")
	if err := RetryPortInUse(3, 0, func() error { tries++; return other }); err != other || tries != 1 {
		t.Fatalf("another error: %d tries, %v; want 1 try and that error", tries, err)
	}
	tries = 0
	if err := RetryPortInUse(3, 0, func() error {
		tries++
		if tries == 1 {
			return ErrPortInUse
		}
		return nil
	}); err != nil || tries != 2 {
		t.Fatalf("in use once: %d tries, %v; want 2 tries and nil", tries, err)
	}
}
