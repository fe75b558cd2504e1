package filesink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/recovery"
)

// SuccessFile is the name of the partition-complete marker of a bucket.
const SuccessFile = "_SUCCESS"

// Markers writes partition-complete markers, as Flink SQL's "success-file"
// partition-commit policy and Hadoop's committers do: once a time bucket's
// range is closed and every file of it is committed, the bucket gets a
// _SUCCESS file listing its files. It works from the commit manifests and
// the checkpoint records, so it sees the files of every subtask of a job.
//
// A bucket's range [start, end) is closed when end plus Lateness is not
// after the watermark: with EventTime, the smallest, over the job's
// writers, of the latest event time each has published (Flink's watermark
// is likewise the minimum over parallel instances); otherwise the
// processing time of the checkpoint. Its files are all committed when the
// checkpoint record lists no open part file in it. A record that arrives
// for a bucket after its marker (later than Lateness) goes to a new file
// that the marker does not list; the run logs a warning.
//
// Not safe for concurrent use: the pipeline calls Checkpointed from one
// goroutine, after each checkpoint's phase 2.
type Markers struct {
	// Output is the sink's backend (or only its driver.Output).
	Output driver.Output
	// Assigner is the job's time bucket assigner.
	Assigner bucketing.Windowed
	// Lateness is how long after a bucket's end records may still come.
	Lateness time.Duration
	// EventTime takes the watermark from the event times in the
	// manifests instead of the processing time.
	EventTime bool
	// Prefix is the part prefix of the job's writers (default "part"):
	// only their manifests are read.
	Prefix string
	Log    *slog.Logger

	read    uint64              // manifests of checkpoints <= read are in buckets
	started bool                // the first call read all manifests
	buckets map[string][]string // bucket -> its committed files
	maxET   map[string]time.Time
	marked  map[string]bool
}

// marker is the content of a _SUCCESS file.
type marker struct {
	Bucket     string   `json:"bucket"`
	Start      string   `json:"start"`
	End        string   `json:"end"`
	Checkpoint uint64   `json:"checkpoint"`
	Files      []string `json:"files"`
}

// Checkpointed is called once checkpoint rec is committed (its files and
// manifests published). It writes the markers of the buckets that became
// complete. A nil error means every marker due is durable. A marker that
// exists already (a run before a crash wrote it) is left as it is.
func (m *Markers) Checkpointed(ctx context.Context, rec *recovery.Checkpoint) error {
	ms := m.Output
	if m.buckets == nil {
		m.buckets, m.maxET, m.marked = map[string][]string{}, map[string]time.Time{}, map[string]bool{}
	}
	prefix := m.Prefix
	if prefix == "" {
		prefix = "part"
	}
	var names []string
	var err error
	if m.started {
		// Only the manifests of checkpoints after the last one read: their
		// names start with the 20-digit checkpoint id, and '~' sorts after
		// the '-' that follows it.
		names, err = ms.ListMetaAfter(ctx, ManifestDir, fmt.Sprintf("%s/%020d~", ManifestDir, m.read))
	} else {
		names, err = ms.ListMeta(ctx, ManifestDir)
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		id, writer, ok := parseManifestName(name)
		if !ok || (m.started && id <= m.read) || id > rec.ID || !strings.HasPrefix(writer, prefix+"-") {
			continue
		}
		data, err := ms.GetMeta(ctx, name)
		if err != nil {
			return fmt.Errorf("filesink: markers: read manifest %s: %w", ms.MetaLocation(name), err)
		}
		var man Manifest
		if err := json.Unmarshal(data, &man); err != nil {
			return fmt.Errorf("filesink: markers: manifest %s: %w", ms.MetaLocation(name), err)
		}
		for _, f := range man.Files {
			if f.DeadLetter {
				continue
			}
			b := path.Dir(f.Path)
			if m.marked[b] && m.started {
				m.log().Warn("a file was published in a bucket after its _SUCCESS marker (a record later than the allowed lateness)", "bucket", b, "file", f.Path)
			}
			m.buckets[b] = append(m.buckets[b], f.Path)
			if f.MaxEventTime != nil && f.MaxEventTime.After(m.maxET[man.Writer]) {
				m.maxET[man.Writer] = *f.MaxEventTime
			}
		}
	}
	m.started, m.read = true, rec.ID
	open, err := openBuckets(rec)
	if err != nil {
		return err
	}
	watermark := rec.Time
	if m.EventTime {
		watermark = time.Time{}
		first := true
		for _, t := range m.maxET {
			if first || t.Before(watermark) {
				watermark, first = t, false
			}
		}
		if first {
			return nil // no event time published yet
		}
	}
	var due []string
	for b := range m.buckets {
		if m.marked[b] || open[b] {
			continue
		}
		if _, end, ok := m.Assigner.Window(b); ok && !end.Add(m.Lateness).After(watermark) {
			due = append(due, b)
		}
	}
	slices.Sort(due)
	for _, b := range due {
		start, end, _ := m.Assigner.Window(b)
		files := slices.Clone(m.buckets[b])
		slices.Sort(files)
		for i := range files {
			files[i] = path.Base(files[i])
		}
		data, _ := json.MarshalIndent(marker{Bucket: b, Start: start.UTC().Format(time.RFC3339Nano),
			End: end.UTC().Format(time.RFC3339Nano), Checkpoint: rec.ID, Files: files}, "", " ")
		err := ms.PutFile(ctx, b+"/"+SuccessFile, append(data, '\n'))
		if err != nil && !errors.Is(err, committer.ErrAlreadyExists) {
			return fmt.Errorf("filesink: marker of bucket %s: %w", b, err)
		}
		m.marked[b] = true
		m.log().Info("bucket complete: _SUCCESS written", "bucket", b, "files", len(files))
	}
	return nil
}

func (m *Markers) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// parseManifestName reads "manifests/<id>-<writer>.json".
func parseManifestName(name string) (uint64, string, bool) {
	base, ok := strings.CutSuffix(path.Base(name), ".json")
	if !ok || len(base) < 22 || base[20] != '-' {
		return 0, "", false
	}
	id, err := strconv.ParseUint(base[:20], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return id, base[21:], true
}

// openBuckets returns the buckets with an open part in rec (every file sink
// participant's state).
func openBuckets(rec *recovery.Checkpoint) (map[string]bool, error) {
	open := map[string]bool{}
	for _, p := range rec.Participants {
		if !strings.HasPrefix(p.Name, "filesink/") || p.State == nil {
			continue
		}
		var st state
		if err := json.Unmarshal(p.State, &st); err != nil {
			return nil, fmt.Errorf("filesink: bad state of %s in checkpoint %d: %w", p.Name, rec.ID, err)
		}
		for _, e := range st.Parts {
			if !e.DeadLetter {
				open[e.Bucket] = true
			}
		}
	}
	return open, nil
}
