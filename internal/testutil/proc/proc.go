// Package proc supervises the child processes of tests (MinIO, mariadbd,
// kfake brokers): one started process is waited for on a goroutine of its
// own, so Done, Kill and Stop never race with the wait, and on Linux the
// kernel kills it when the test binary dies (a panic, a timeout, kill -9),
// so no server outlives its test.
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is a started child process. Its methods are safe for concurrent
// use.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, once done is closed
}

// Start starts cmd (set its Stdout, Stderr and pipes first) and returns its
// Process. A nil error means the process runs and is being waited for.
func Start(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = sysProcAttr()
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns the result of waiting for the process: nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Args is the command line, for messages.
func (p *Process) Args() []string { return p.cmd.Args }

// Signal sends sig to the process (SIGSTOP and SIGCONT to pause and
// resume it, say). A nil error means the signal was sent; a process that
// has exited gets none (os.ErrProcessDone).
func (p *Process) Signal(sig os.Signal) error {
	if p.Exited() {
		return os.ErrProcessDone
	}
	return p.cmd.Process.Signal(sig)
}

// ExitCode is the process's exit code once it has exited (-1 if a signal
// ended it), and -1 while it runs.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// State describes how the process ended ("exit status 1", "signal:
// killed"), or "running".
func (p *Process) State() string {
	if !p.Exited() {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

// Kill sends SIGKILL (a crash) and waits for the exit. It is a no-op on a
// process that has exited.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM, waits up to grace for the exit, then kills. Where
// SIGTERM cannot be sent (Windows) it kills at once.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.Kill()
		return
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Tail is an io.Writer that keeps the last Max bytes written to it (a
// process's output, shown when it fails). Safe for concurrent use.
type Tail struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Max; t.Max > 0 && over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns up to the last n bytes written.
func (t *Tail) String(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// ErrPortInUse is matched by a server start that failed because its port
// was taken between choosing it and binding it; another try may succeed.
var ErrPortInUse = errors.New("port already in use")

// RetryPortInUse calls start up to n times while it fails with an error
// matching ErrPortInUse, pausing pause × the number of tries so far before
// each new try (0: none), and returns the last result. start chooses the
// port: the same one (a restart keeping its address) or a new one.
func RetryPortInUse(n int, pause time.Duration, start func() error) error {
	var err error
	for i := range n {
		if i > 0 {
			time.Sleep(time.Duration(i) * pause)
		}
		if err = start(); !errors.Is(err, ErrPortInUse) {
			return err
		}
	}
	return err
}
