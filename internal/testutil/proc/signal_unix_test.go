//go:build unix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestSignalAndExitCode(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if p.ExitCode() != -1 || p.State() != "running" {
		t.Fatalf("a running process: ExitCode %d, State %q", p.ExitCode(), p.State())
	}
	for _, sig := range []os.Signal{syscall.SIGSTOP, syscall.SIGCONT} {
		if err := p.Signal(sig); err != nil {
			t.Fatalf("Signal(%v): %v", sig, err)
		}
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.ExitCode() != -1 || !strings.Contains(p.State(), "terminated") {
		t.Errorf("after SIGTERM: ExitCode %d, State %q; want -1 and a signal", p.ExitCode(), p.State())
	}
	if err := p.Signal(syscall.SIGCONT); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal to an exited process: %v, want os.ErrProcessDone", err)
	}
	q, err := Start(exec.Command("sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	<-q.Done()
	if q.ExitCode() != 3 || q.State() != "exit status 3" {
		t.Errorf("sh -c 'exit 3': ExitCode %d, State %q", q.ExitCode(), q.State())
	}
}
