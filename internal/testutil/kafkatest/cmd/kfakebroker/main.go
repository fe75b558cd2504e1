// Command kfakebroker runs a kfake Kafka broker as its own process, for
// black-box tests that kill the program under test (or the broker).
//
// Usage:
//
//	kfakebroker [-listen 127.0.0.1:0] [-topic NAME:PARTITIONS]... [-data-dir DIR]
//	            [-group-min-session-timeout 6s]
//
// Once the broker accepts connections it prints its address (host:port) on
// a line of its own on stdout; it then runs until it gets SIGINT or SIGTERM
// (or is killed). With -data-dir the log persists across restarts on the
// same directory. -group-min-session-timeout lowers the shortest session
// timeout a consumer group member may ask for, so that tests of group
// membership can use sessions of a second.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kfakebroker:", err)
		os.Exit(2)
	}
}

type topicsFlag []kafkatest.Topic

func (f *topicsFlag) String() string {
	var s []string
	for _, t := range *f {
		s = append(s, fmt.Sprintf("%s:%d", t.Name, t.Partitions))
	}
	return strings.Join(s, ",")
}

func (f *topicsFlag) Set(v string) error {
	t, err := kafkatest.ParseTopic(v)
	if err != nil {
		return err
	}
	*f = append(*f, t)
	return nil
}

// run starts the broker, writes its address to stdout and waits for ctx.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kfakebroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (host:port; port 0 picks a free one)")
	dataDir := fs.String("data-dir", "", "directory to persist the log in (default: memory only)")
	fetchDelay := fs.Duration("fetch-delay", 0, "how long the broker holds each fetch before it answers (a slow broker: with a consumer's small partition fetch size, it bounds how fast a partition is read)")
	minSession := fs.Duration("group-min-session-timeout", 0, "shortest session timeout of a consumer group member (default: kfake's, 6s)")
	var topics topicsFlag
	fs.Var(&topics, "topic", "topic to create, NAME:PARTITIONS (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *fetchDelay < 0 {
		return fmt.Errorf("-fetch-delay %v: negative", *fetchDelay)
	}
	if *minSession < 0 {
		return fmt.Errorf("-group-min-session-timeout %v: negative", *minSession)
	}
	c, err := kafkatest.NewCluster(kafkatest.Config{Topics: topics, Listen: *listen, DataDir: *dataDir, GroupMinSessionTimeout: *minSession})
	if err != nil {
		return err
	}
	defer c.Close()
	if d := *fetchDelay; d > 0 {
		// SleepControl lets the broker serve the other connections
		// (the group's heartbeats among them) while a fetch waits.
		c.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			c.SleepControl(func() { time.Sleep(d) })
			return nil, nil, false
		})
	}
	if _, err := fmt.Fprintln(stdout, c.Addrs()[0]); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
