package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BrokerPackage is the import path of the kfakebroker command.
const BrokerPackage = "github.com/filesink/filesink/internal/testutil/kafkatest/cmd/kfakebroker"

// brokerStartTimeout bounds the wait for a broker process's address.
const brokerStartTimeout = 60 * time.Second

// BuildBroker builds cmd/kfakebroker into a temporary directory of the test
// and returns the binary's path. It runs "go build" from the current
// directory, which must be inside this module.
func BuildBroker(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "kfakebroker")
	cmd := exec.Command("go", "build", "-o", bin, BrokerPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("kafkatest: go build %s: %v\n%s", BrokerPackage, err, out)
	}
	return bin
}

// BrokerProcess is a kfakebroker running as a child process.
type BrokerProcess struct {
	// Addr is the broker's host:port.
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	errb bytes.Buffer
}

// StartBroker runs the kfakebroker binary bin (see BuildBroker) on a free
// port of 127.0.0.1 with the given topics and extra flags, waits for its
// address, and kills it when the test ends.
func StartBroker(tb testing.TB, bin string, topics []Topic, flags ...string) *BrokerProcess {
	tb.Helper()
	args := []string{"-listen", "127.0.0.1:0"}
	for _, t := range topics {
		args = append(args, "-topic", fmt.Sprintf("%s:%d", t.Name, t.Partitions))
	}
	args = append(args, flags...)
	p := &BrokerProcess{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.errb}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("kafkatest: start %s: %v", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(p.Kill)
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), brokerStartTimeout)
	defer cancel()
	select {
	case a := <-addr:
		if a == "" {
			<-p.done
			tb.Fatalf("kafkatest: %s %v exited without an address: %s", bin, args, p.stderr())
		}
		p.Addr = a
	case <-ctx.Done():
		tb.Fatalf("kafkatest: %s %v printed no address within %v: %s", bin, args, brokerStartTimeout, p.stderr())
	}
	return p
}

// Kill kills the broker with SIGKILL and waits for it to exit. Calling it
// again does nothing.
func (p *BrokerProcess) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Kill)
	<-p.done
}

// Done is closed when the process has exited.
func (p *BrokerProcess) Done() <-chan struct{} { return p.done }

func (p *BrokerProcess) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errb.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
