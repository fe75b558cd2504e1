// Command wordcount is the classic streaming word count, exactly once, from
// Kafka to MySQL/MariaDB, written as a program on filesink's library (not
// its CLI): the pipeline of Flink's two-phase-commit MySQL demo, without the
// demo's flaw.
//
//	wordcount --brokers HOST:PORT[,HOST:PORT] --topic lines \
//	  --dsn 'USER:PASS@tcp(HOST:3306)/DB' [--table wc] --state DIR [--bounded]
//	wordcount produce --brokers HOST:PORT --topic lines < FILE
//
// The second form writes the lines of FILE to the topic (a convenience for
// trying the example against a local broker without Kafka's tools).
//
// Lines are read from a Kafka topic (read_committed; offsets kept in the
// checkpoints, never in a consumer group), split into lower-case words
// (maximal runs of Unicode letters and digits), counted per checkpoint in
// memory, and added to the table
//
//	wc(word VARCHAR(255) PRIMARY KEY, num BIGINT)
//
// (created if absent) by the MySQL XA sink in Increment mode: at each
// checkpoint the counts are written as {"word":w,"num":n} rows into the
// checkpoint's XA branch before it is prepared, so a count rides the same
// two-phase commit as the Kafka offsets it came from. After any crash,
// running the program again on the same --state directory finishes the job:
// the totals in the table equal the word counts of the committed input
// exactly, however often it was killed.
//
// With --bounded it stops at the end offsets seen at the first start and
// exits 0 after the final commit; without it, it runs until SIGINT or
// SIGTERM, which take a final checkpoint (a second signal aborts at once,
// like a crash).
//
// See README.md in this directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// cli parses args, runs the job until the end of a bounded topic or a
// signal, and returns the exit code.
func cli(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "produce" {
		return produceCLI(args[1:], stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka bootstrap brokers, `HOST:PORT[,HOST:PORT]`")
	fs.StringVar(&cfg.Topic, "topic", "", "Kafka topic of text lines (required)")
	fs.StringVar(&cfg.Start, "start", "earliest", "first-run start position: earliest, latest or a time (RFC 3339 or Unix ms)")
	fs.BoolVar(&cfg.Bounded, "bounded", false, "stop at the end offsets seen at the first start and exit 0 after the final commit")
	fs.StringVar(&cfg.DSN, "dsn", "root@tcp(127.0.0.1:3306)/test", "MySQL/MariaDB DSN (go-sql-driver form, `USER:PASS@tcp(HOST:PORT)/DB`)")
	fs.StringVar(&cfg.Table, "table", "wc", "table of counts, `NAME` or DB.NAME (created if absent)")
	fs.StringVar(&cfg.State, "state", "", "checkpoint directory (required; keep it across restarts)")
	fs.StringVar(&cfg.Job, "job", "", "job id naming the XA branches (default: derived from --state)")
	fs.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", 5*time.Second, "time between checkpoints (counts become visible at each)")
	verbose := fs.Bool("v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "wordcount: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.Brokers = splitList(*brokers)
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// First signal: final checkpoint, then exit 0. Second: abort (the next
	// run recovers, as after a crash).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		cfg.Logger.Info("signal: stopping after a final checkpoint (again to abort)")
		close(stop)
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg.Stop = stop

	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "wordcount:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wordcount: %d lines, %d words read in this run; checkpoint %d committed (restored %d); end of input: %v\n",
		res.Lines, res.Words, res.Checkpoint, res.Restored, res.EndOfInput)
	return 0
}

// produceCLI writes the lines of stdin to a topic, one record each,
// spread over its partitions.
func produceCLI(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wordcount produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka bootstrap brokers, `HOST:PORT[,HOST:PORT]`")
	topic := fs.String("topic", "", "topic to write to (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *topic == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "wordcount produce: want --topic and no arguments (lines come from stdin)")
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	n, err := Produce(ctx, splitList(*brokers), *topic, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "wordcount produce:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wordcount produce: %d lines written to %s\n", n, *topic)
	return 0
}

func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
