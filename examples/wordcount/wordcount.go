package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
	"github.com/filesink/filesink/vfs"
)

// MaxWordLen is the length of the word column, in characters; longer words
// are cut to it (and counted as their first MaxWordLen characters).
const MaxWordLen = 255

// Config describes a word-count job. Brokers, Topic, DSN and State are
// required.
type Config struct {
	Brokers []string // Kafka bootstrap brokers, "host:port"
	Topic   string   // topic of text lines
	Start   string   // first-run start: "earliest" (default), "latest" or a time
	Bounded bool     // stop at the end offsets seen at the first start

	DSN   string // go-sql-driver DSN of the database
	Table string // table of counts (default "wc"), created if absent
	State string // checkpoint directory
	// Job names the job's XA branches; two jobs on one server need
	// different ids. Default: "wc-" and 8 hex digits of the SHA-256 of the
	// absolute State path.
	Job string

	// CheckpointInterval is the time between checkpoints (default 5 s):
	// counts become visible in the table at each.
	CheckpointInterval time.Duration
	// CheckpointEvery also takes a checkpoint every that many lines (0:
	// only on time).
	CheckpointEvery int64
	// Stop, when closed, makes Run take a final checkpoint and return.
	Stop <-chan struct{}
	// Logger (default: discard).
	Logger *slog.Logger

	// hook is passed to committer.WithHook (tests crash with it).
	hook func(point string) error
}

// Result describes a finished run.
type Result struct {
	pipeline.Result
	Lines int64 // lines (Kafka records) read in this run
	Words int64 // words counted in this run (including ones a crash made count again)
}

// Run runs the job until the end of a bounded topic, a stop or an error.
// A nil error means every word of the lines read up to the final
// checkpoint is in the table exactly once. After an error (or a crash of
// the process) Run with the same Config finishes the job: nothing decided
// is lost and nothing is counted twice.
func Run(ctx context.Context, cfg Config) (Result, error) {
	var res Result
	if len(cfg.Brokers) == 0 || cfg.Topic == "" || cfg.DSN == "" || cfg.State == "" {
		return res, errors.New("brokers, topic, DSN and state directory are required")
	}
	if cfg.Table == "" {
		cfg.Table = "wc"
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Logger

	// One process per state directory: the open store holds its lock, as a
	// second process would restore the same checkpoint and fight over the
	// same XA branches.
	store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(cfg.State, "checkpoints"))
	if err != nil {
		return res, err
	}
	defer store.Close()
	if cfg.Job == "" {
		if cfg.Job, err = defaultJob(cfg.State); err != nil {
			return res, err
		}
	}

	mc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return res, errors.New("invalid DSN (not shown: it may contain a password)")
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return res, fmt.Errorf("DSN %s: %v", mysqlxa.RedactDSN(cfg.DSN), err)
	}
	db := sql.OpenDB(conn)
	defer db.Close() // after pipeline.Run closed the sink
	if err := createTable(ctx, db, cfg.Table); err != nil {
		return res, err
	}
	out, err := mysqlxa.New(ctx, db, cfg.Table,
		mysqlxa.WithMode(mysqlxa.Increment), mysqlxa.WithKey("word"),
		mysqlxa.WithJob(cfg.Job), mysqlxa.WithSink("wordcount"), mysqlxa.WithLogger(log))
	if err != nil {
		return res, err
	}
	wc := newCounter(out)

	kcfg := kafka.Config{Brokers: cfg.Brokers, Topics: []string{cfg.Topic}, Start: cfg.Start, Bounded: cfg.Bounded, ClientID: "wordcount"}
	if log.Enabled(ctx, slog.LevelDebug) {
		kcfg.Logger = log.With("source", "kafka") // the client's own log is chatty at Info
	}
	var opts []committer.Option
	if cfg.hook != nil {
		opts = append(opts, committer.WithHook(cfg.hook))
	}
	log.Info("word count", "topic", cfg.Topic, "table", out.Table(), "job", cfg.Job, "state", cfg.State, "bounded", cfg.Bounded)
	pres, err := pipeline.Run(ctx, pipeline.Config{
		OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			return kafka.Open(ctx, kcfg, pos)
		},
		Store: store,
		// One subtask: every word of a checkpoint goes into one branch.
		// Words of one line cannot be routed to different subtasks (the
		// pipeline routes whole records), and two subtasks' branches
		// incrementing one word would wait for each other's row locks.
		Sinks:              []pipeline.Sink{wc},
		CheckpointInterval: cfg.CheckpointInterval,
		CheckpointEvery:    cfg.CheckpointEvery,
		Stop:               cfg.Stop,
		Logger:             log,
		CommitterOptions:   opts,
	})
	res.Result, res.Lines, res.Words = pres, pres.Records, wc.words
	return res, err
}

// defaultJob is the job id of a state directory: "wc-" and 8 hex digits of
// the SHA-256 of its absolute path.
func defaultJob(state string) (string, error) {
	abs, err := filepath.Abs(state)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return "wc-" + hex.EncodeToString(sum[:4]), nil
}

// createTable creates the table of counts if it does not exist. The word
// column compares bytes (utf8mb4_bin): with the server's default collation
// "Straße", "strasse" and "STRASSE", or "e" and "é", would be one key.
func createTable(ctx context.Context, db *sql.DB, table string) error {
	q := "CREATE TABLE IF NOT EXISTS " + quoteTable(table) + " (" +
		"word VARCHAR(" + strconv.Itoa(MaxWordLen) + ") CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, " +
		"num BIGINT NOT NULL) ENGINE=InnoDB"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	return nil
}

// quoteTable quotes "name" or "db.name" as identifiers.
func quoteTable(t string) string {
	q := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
	if db, name, ok := strings.Cut(t, "."); ok {
		return q(db) + "." + q(name)
	}
	return q(t)
}

// counter is the word-count operator fused with its sink: Write splits a
// line into words and counts them in memory; Prepare (phase 1 of a
// checkpoint) writes one {"word":w,"num":n} row per word counted since the
// last checkpoint into the MySQL sink's XA branch of that checkpoint, then
// prepares the branch. The counts therefore commit, or vanish, with the
// offsets of the lines they came from: exactly once. The rest of the
// protocol is the MySQL sink's.
//
// In Flink terms this is a keyed window aggregation whose window is the
// checkpoint, so no operator state is needed: the counts of a checkpoint
// are empty again once it is prepared, and Restore drops the counts of
// lines read after the restored checkpoint (they are read again).
//
// Like every pipeline.Sink, it is used by one goroutine at a time.
type counter struct {
	committer.NopPostCommit
	out    *mysqlxa.Sink
	counts map[string]int64
	words  int64  // words counted by this instance
	rec    []byte // scratch for the row records
}

var _ pipeline.Sink = (*counter)(nil)

func newCounter(out *mysqlxa.Sink) *counter {
	return &counter{out: out, counts: map[string]int64{}}
}

// Name is the MySQL sink's: the checkpoint records name its state.
func (c *counter) Name() string { return c.out.Name() }

// Write counts the words of one line.
func (c *counter) Write(_ context.Context, line []byte, _ source.Origin) error {
	splitWords(line, func(w []byte) {
		c.counts[string(w)]++
		c.words++
	})
	return nil
}

// Prepare flushes the counts of the checkpoint into the XA branch, then
// prepares it.
func (c *counter) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	// Sorted: the same lock order in every branch, and reproducible rows.
	for i, w := range slices.Sorted(maps.Keys(c.counts)) {
		c.rec = appendRow(c.rec[:0], w, c.counts[w])
		if err := c.out.Write(ctx, c.rec, source.Origin{Name: "wordcount/checkpoint-" + strconv.FormatUint(id, 10), Num: int64(i)}); err != nil {
			return nil, err
		}
	}
	clear(c.counts)
	return c.out.Prepare(ctx, id, final)
}

func (c *counter) Commit(ctx context.Context, committable json.RawMessage) error {
	return c.out.Commit(ctx, committable)
}

// Restore drops the counts of lines read since the restored checkpoint.
func (c *counter) Restore(ctx context.Context, state json.RawMessage) error {
	clear(c.counts)
	return c.out.Restore(ctx, state)
}

func (c *counter) Sweep(ctx context.Context, retained []*recovery.Checkpoint) (committer.Swept, error) {
	return c.out.Sweep(ctx, retained)
}

func (c *counter) Tick(ctx context.Context, now time.Time) error { return c.out.Tick(ctx, now) }

// OverlapsCheckpoints is the XA sink's: false (see mysqlxa.Sink).
func (c *counter) OverlapsCheckpoints() bool { return c.out.OverlapsCheckpoints() }

// Counters are the XA sink's.
func (c *counter) Counters() committer.Counters { return c.out.Counters() }

// BeginBatch does nothing: the counts do not depend on the batches.
func (c *counter) BeginBatch() {}

// EndBatch does nothing.
func (c *counter) EndBatch() {}

func (c *counter) Close() error { return c.out.Close() }

// splitWords calls f with each word of line, lower-cased: a maximal run of
// Unicode letters and digits, cut to MaxWordLen characters. Invalid UTF-8
// separates words. The slice passed to f is valid until f returns.
func splitWords(line []byte, f func(word []byte)) {
	var buf [4 * MaxWordLen]byte
	w := buf[:0]
	n := 0 // characters in w
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		i += size
		if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if n < MaxWordLen {
				w = utf8.AppendRune(w, unicode.ToLower(r))
				n++
			}
			continue
		}
		if n > 0 {
			f(w)
			w, n = w[:0], 0
		}
	}
	if n > 0 {
		f(w)
	}
}

// appendRow appends {"word":w,"num":n}. A word holds letters and digits
// only, so it needs no JSON escaping; json.Marshal keeps that true should
// the definition of a word change.
func appendRow(b []byte, w string, n int64) []byte {
	q, _ := json.Marshal(w)
	b = append(b, `{"word":`...)
	b = append(b, q...)
	b = append(b, `,"num":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '}')
}
