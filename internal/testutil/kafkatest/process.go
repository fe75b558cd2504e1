package kafkatest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/proc"
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
	proc *proc.Process
	errb *proc.Tail
}

// StartBroker runs the kfakebroker binary bin (see BuildBroker) on a free
// port of 127.0.0.1 with the given topics and extra flags, waits for its
// address, and kills it when the test ends.
func StartBroker(tb testing.TB, bin string, topics []Topic, flags ...string) *BrokerProcess {
	tb.Helper()
	return StartBrokerConfig(tb, bin, Config{Topics: topics}, flags...)
}

// StartBrokerConfig is StartBroker with the broker configured by cfg: its
// Topics, Listen (default a free port of 127.0.0.1), DataDir and
// GroupMinSessionTimeout become flags of kfakebroker (Brokers and Opts do
// not apply to a process).
func StartBrokerConfig(tb testing.TB, bin string, cfg Config, flags ...string) *BrokerProcess {
	tb.Helper()
	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	args := []string{"-listen", listen}
	for _, t := range cfg.Topics {
		args = append(args, "-topic", fmt.Sprintf("%s:%d", t.Name, t.Partitions))
	}
	if cfg.DataDir != "" {
		args = append(args, "-data-dir", cfg.DataDir)
	}
	if cfg.GroupMinSessionTimeout > 0 {
		args = append(args, "-group-min-session-timeout", cfg.GroupMinSessionTimeout.String())
	}
	args = append(args, flags...)
	p := &BrokerProcess{errb: &proc.Tail{Max: stderrKept}}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = p.errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if p.proc, err = proc.Start(cmd); err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
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
			<-p.proc.Done()
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
func (p *BrokerProcess) Kill() { p.proc.Kill() }

// Done is closed when the process has exited.
func (p *BrokerProcess) Done() <-chan struct{} { return p.proc.Done() }

func (p *BrokerProcess) stderr() string { return p.errb.String(stderrKept) }

// stderrKept is how much of a broker's standard error a failure shows.
const stderrKept = 64 << 10
