package main

// The black-box kill -9 chaos test of chaos_test.go against MinIO: sink and
// checkpoint store on S3 (s3://BUCKET/out, state s3://BUCKET/out/_filesink).
// The finished objects are mirrored into a local directory as they appear,
// so that the local test's checks (chaosOutput: whole generated records,
// names, buckets, no duplicate, nothing visible before it is decided) run
// unchanged on them; the S3 side adds: a finished object never changes or
// disappears (size and ETag), nothing but checkpoint records, the state's
// lease and staging objects is hidden under the prefix, and at the end no
// incomplete multipart upload and no unreferenced staging object is left.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// minio is the package's MinIO server, started by the first S3 test.
var minio miniotest.Pool

func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }

const s3ChaosPrefix = "out"

// s3ChildEnv makes the CLI processes this test starts (they inherit the
// environment) use the MinIO server's credentials and nothing from the
// machine's AWS configuration.
func s3ChildEnv(t *testing.T, srv *miniotest.Server) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "no-aws-config")
	if err := os.WriteFile(none, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": srv.AccessKey(), "AWS_SECRET_ACCESS_KEY": srv.SecretKey(), "AWS_REGION": srv.Region(),
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

func chaosSeedFromEnv(t *testing.T) uint64 {
	seed := chaosSeed(t)
	return seed
}

// TestChaosKill9S3 kills `filesink run` with SIGKILL at random moments, at
// least chaosKills times per configuration, with sink and state on MinIO,
// restarting it each time until a run exits 0; then every generated record
// must be in the finished objects exactly once, `filesink verify` must pass,
// no multipart upload and no unreferenced staging object of the sink may be
// left, and a further run must publish nothing.
func TestChaosKill9S3(t *testing.T) {
	configs := []chaosConfig{
		{
			name: "jsonl", ext: ".jsonl", parallelism: 1,
			bucket: func(genRecord) (string, error) { return "", nil },
		},
		{
			// Parts roll at 256 KiB: many part files are opened and
			// committed while the kills land.
			name: "zstd-field-p2",
			args: []string{"--bucket", "field:key", "--compression", "zstd", "--parallelism", "2", "--part-size", "256KiB"},
			ext:  ".jsonl.zst", parallelism: 2,
			bucket: func(r genRecord) (string, error) { return r.Key, nil },
		},
		{
			// At-least-once: parts of 256 KiB completed as they roll,
			// before their checkpoint; a kill may duplicate records,
			// never lose one, and leaves no upload behind.
			name: "at-least-once", args: []string{"--guarantee", "at-least-once", "--part-size", "256KiB"},
			ext: ".jsonl", parallelism: 1, atLeastOnce: true,
			bucket: func(genRecord) (string, error) { return "", nil },
		},
		{
			// Part files roll every 200 ms: Completes are in flight at
			// most kills. Fast integrity mode, 2 part uploads at once.
			name: "gzip-eventtime-rolling-fast",
			args: []string{"--compression", "gzip", "--bucket", "eventtime:ts:2006-01-02--15-04", "--rollover", "200ms", "--inactivity", "100ms",
				"--s3-integrity", "fast", "--s3-concurrency", "2"},
			ext: ".jsonl.gz", parallelism: 1,
			bucket: func(r genRecord) (string, error) {
				ts, err := time.Parse(time.RFC3339Nano, r.TS)
				if err != nil {
					return "", err
				}
				return ts.UTC().Format("2006-01-02--15-04"), nil
			},
		},
	}
	runChaosS3Configs(t, configs, 100)
}

// runChaosS3Configs runs runChaosS3 for each of configs on the package's
// MinIO, the k-th with the random stream seedBase+k of the chaos seed.
func runChaosS3Configs(t *testing.T, configs []chaosConfig, seedBase uint64) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	seed := chaosSeedFromEnv(t)
	count := int64(chaosCount)
	if testing.Short() {
		count = chaosShortCount
	}
	want := generated(t, count)
	for i, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seedBase+uint64(i)))
			runChaosS3(t, bin, srv, c, rng, count, want)
		})
	}
}

// TestChaosKill9S3Lifecycle is TestChaosKill9S3 with the staged data of
// the killed runs lost before some restarts: every multipart upload is
// aborted and half of the staging objects are deleted, as a bucket's
// AbortIncompleteMultipartUpload rule would do while the job is down.
// Every record must still be published exactly once, with no run failing:
// the parts whose staged data is gone are rebuilt from the source.
func TestChaosKill9S3Lifecycle(t *testing.T) {
	configs := []chaosConfig{
		{
			name: "gen-field-zstd", lifecycle: true, kills: 40,
			args: []string{"--bucket", "field:key", "--compression", "zstd", "--part-size", "512KiB"},
			ext:  ".jsonl.zst", parallelism: 1,
			bucket: func(r genRecord) (string, error) { return r.Key, nil },
		},
		{
			name: "dir", lifecycle: true, kills: 40, dirSource: true,
			args: []string{"--part-size", "1MiB"},
			ext:  ".jsonl", parallelism: 1,
			bucket: func(genRecord) (string, error) { return "", nil },
		},
	}
	runChaosS3Configs(t, configs, 200)
}

// writeInput writes the generator's records to one file of a new
// directory, for a chaos run over the directory source, and returns the
// directory.
func writeInput(t *testing.T, count int64) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	cfg, err := source.ParseGenQuery(fmt.Sprintf("count=%d&seed=%d", count, chaosGenSeed))
	if err != nil {
		t.Fatal(err)
	}
	err = source.GenReplayer(cfg).Replay(t.Context(), "gen", [][2]int64{{0, count - 1}}, func(r source.Record) error {
		bw.Write(r.Value)
		return bw.WriteByte('\n')
	})
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// loseStaging aborts every multipart upload of the bucket and deletes
// about half of the staging objects, as a lifecycle rule could, and
// returns how many uploads and objects it removed.
func (c *s3Chaos) loseStaging(rng *rand.Rand) (uploads, objects int) {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	out, err := c.client.ListMultipartUploads(ctx, &s3api.ListMultipartUploadsInput{Bucket: &c.bucket})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range out.Uploads {
		_, err := c.client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &c.bucket, Key: u.Key, UploadId: u.UploadId})
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" {
			continue // listed from MinIO's memory only (see uploadsLeft)
		}
		if err != nil {
			t.Fatal(err)
		}
		uploads++
	}
	_, hidden := c.list()
	for rel := range hidden {
		if strings.Contains(rel, ".tail-") && rng.IntN(2) == 0 {
			key := s3ChaosPrefix + "/" + rel
			if _, err := c.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &c.bucket, Key: &key}); err != nil {
				t.Fatal(err)
			}
			objects++
		}
	}
	return uploads, objects
}

// s3Chaos is the S3 side of one chaos configuration.
type s3Chaos struct {
	t      *testing.T
	bin    string
	srv    *miniotest.Server
	client *s3api.Client
	bucket string
	sink   string   // s3://BUCKET/out
	flags  []string // --s3-endpoint URL --s3-path-style
	store  *s3sink.Store
	mirror string // local copy of the finished objects
	etags  map[string]string
	check  *chaosOutput
}

func newS3Chaos(t *testing.T, bin string, srv *miniotest.Server, cfg chaosConfig, want []uint64) *s3Chaos {
	bucket := srv.NewBucket(t)
	client := srv.Client(t)
	mirror := filepath.Join(t.TempDir(), "mirror")
	if err := os.MkdirAll(mirror, 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := s3sink.NewStore(client, bucket, s3ChaosPrefix+"/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	return &s3Chaos{
		t: t, bin: bin, srv: srv, client: client, bucket: bucket,
		sink:   "s3://" + bucket + "/" + s3ChaosPrefix,
		flags:  []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"},
		store:  store,
		mirror: mirror, etags: map[string]string{},
		check: newChaosOutput(t, mirror, cfg, want),
	}
}

// decidedNext returns the "next" id of the newest checkpoint record (0 if
// there is none), read without opening the store through the CLI.
func (c *s3Chaos) decidedNext() int64 {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	ids, err := c.store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		return 0
	}
	ck, err := c.store.Get(ctx, ids[len(ids)-1])
	if err != nil {
		t.Fatalf("newest checkpoint record after a kill: %v", err)
	}
	var pos struct {
		Next *int64 `json:"next"`
		Line *int64 `json:"line"` // the directory source of one file: its line N is gen:N-1
	}
	if err := json.Unmarshal(ck.Source, &pos); err != nil || (pos.Next == nil && pos.Line == nil) {
		t.Fatalf("checkpoint %d: source position %s: want {\"next\":N} or {\"line\":N} (%v)", ck.ID, ck.Source, err)
	}
	if pos.Line != nil {
		return *pos.Line
	}
	return *pos.Next
}

type s3Object struct {
	size int64
	etag string
}

// list returns the objects under the sink's prefix, by key relative to it,
// split into finished output and hidden objects (a path component starting
// with '_' or '.').
func (c *s3Chaos) list() (finished, hidden map[string]s3Object) {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	finished, hidden = map[string]s3Object{}, map[string]s3Object{}
	p := s3api.NewListObjectsV2Paginator(c.client, &s3api.ListObjectsV2Input{Bucket: &c.bucket, Prefix: aws.String(s3ChaosPrefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			rel := strings.TrimPrefix(aws.ToString(o.Key), s3ChaosPrefix+"/")
			obj := s3Object{size: aws.ToInt64(o.Size), etag: aws.ToString(o.ETag)}
			if s3HiddenKey(rel) {
				hidden[rel] = obj
			} else {
				finished[rel] = obj
			}
		}
	}
	return finished, hidden
}

func s3HiddenKey(rel string) bool {
	for _, comp := range strings.Split(rel, "/") {
		if comp == "" || comp[0] == '_' || comp[0] == '.' {
			return true
		}
	}
	return false
}

var (
	s3RecordName  = regexp.MustCompile(`^_filesink/(ckpt-[0-9]{20}|LEASE|job-[0-9]{8}\.json|claims/[0-9]{8}\.json|manifests/[0-9]{20}-[a-z]+-[0-9]+\.json)$`)
	s3NoUploads   = regexp.MustCompile(`(?m)^0 upload\(s\)$`)
	s3StagingName = regexp.MustCompile(`^` + s3sink.StagingDir + `/(.+/)?\.[^/]+(\.upload|\.tail-[0-9a-f]{16})$`)
)

// update mirrors the objects published since the last call and runs the
// local chaos checks on them (see chaosOutput.update), after checking what
// only S3 shows: finished objects never change or disappear, and the hidden
// objects are checkpoint records, the state's lease and staging objects
// only.
func (c *s3Chaos) update(run int, decided int64) int {
	t := c.t
	t.Helper()
	finished, hidden := c.list()
	for rel, etag := range c.etags {
		o, ok := finished[rel]
		switch {
		case !ok:
			t.Errorf("after run %d: finished object %s disappeared", run, rel)
		case o.etag != etag:
			t.Errorf("after run %d: finished object %s changed (ETag %s -> %s, %d bytes): clobbered", run, rel, etag, o.etag, o.size)
		}
	}
	for rel, o := range finished {
		if _, ok := c.etags[rel]; ok {
			continue
		}
		b, etag := c.get(rel)
		if int64(len(b)) != o.size || etag != o.etag {
			t.Errorf("after run %d: finished object %s changed between LIST and GET", run, rel)
		}
		name := filepath.Join(c.mirror, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c.etags[rel] = o.etag
	}
	var odd []string
	for rel := range hidden {
		if !s3RecordName.MatchString(rel) && !s3StagingName.MatchString(rel) {
			odd = append(odd, rel)
		}
	}
	if len(odd) > 0 {
		slices.Sort(odd)
		t.Errorf("after run %d: hidden objects that are not checkpoint records, the lease or staging objects: %v", run, odd[:min(10, len(odd))])
	}
	return c.check.update(run, decided)
}

// get returns the bytes and the ETag of the object rel of the sink.
func (c *s3Chaos) get(rel string) ([]byte, string) {
	t := c.t
	t.Helper()
	key := s3ChaosPrefix + "/" + rel
	out, err := c.client.GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &c.bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, aws.ToString(out.ETag)
}

// keepLog writes the stderr of a run to $FILESINK_CHAOS_LOG_DIR, if set,
// for the post-mortem of a failure (the runs then log at debug level).
func (c *s3Chaos) keepLog(config string, run int, r runResult) {
	dir := os.Getenv("FILESINK_CHAOS_LOG_DIR")
	if dir == "" {
		return
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%s-run%03d.log", c.bucket, config, run))
	if err := os.WriteFile(name, []byte(r.stderr+"\n-- "+r.state+"\n"), 0o644); err != nil {
		c.t.Errorf("keep log: %v", err)
	}
}

// lossRE finds the part file and upload a data-loss error names.
var lossRE = regexp.MustCompile(`"key":"([^"]+)","upload_id":"([^"]+)".*data loss`)

// diagnoseLoss looks, after a run failed with a data-loss error, at the
// upload and the object it names. An upload that exists with fewer parts
// than recorded (or is gone) while the object was never created, right after
// a kill, is MinIO's doing: its CompleteMultipartUpload deletes the parts'
// metadata before it renames the parts into the object, with the request's
// context, so a client that disconnects in between (a kill -9 during the
// commit) leaves an upload whose parts are lost (cmd/erasure-multipart.go,
// cleanupMultipartPath before renameData, at the pinned MinIO version).
func (c *s3Chaos) diagnoseLoss(stderr string) {
	t, ctx := c.t, c.t.Context()
	m := lossRE.FindStringSubmatch(stderr)
	if m == nil {
		return
	}
	key, id := m[1], m[2]
	parts := "gone"
	if lp, err := c.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &c.bucket, Key: &key, UploadId: &id}); err == nil {
		parts = fmt.Sprintf("exists with %d part(s)", len(lp.Parts))
	}
	obj := "exists"
	if _, err := c.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &c.bucket, Key: &key}); err != nil {
		obj = "does not exist"
	}
	t.Errorf("data loss on %s: the upload %s, the object %s. If the previous run was killed while it committed this part file, "+
		"MinIO lost the parts: its CompleteMultipartUpload deletes the part metadata before the final rename and gives up when the client disconnects",
		key, parts, obj)
}

// cli runs a short CLI command (verify, uploads) against the sink.
func (c *s3Chaos) cli(args ...string) (string, error) {
	cmd := exec.Command(c.bin, append(args, c.flags...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// uploadsLeft lists every incomplete multipart upload in the bucket (MinIO
// lists them all when asked without a prefix; the bucket is the sink's).
func (c *s3Chaos) uploadsLeft() []string {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	var left []string
	p := s3api.NewListMultipartUploadsPaginator(c.client, &s3api.ListMultipartUploadsInput{Bucket: &c.bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range page.Uploads {
			// MinIO lists, bucket-wide, uploads whose completion a killed
			// client cut short from its memory, after their data is gone:
			// ListParts tells those from real ones.
			_, err := c.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &c.bucket, Key: u.Key, UploadId: u.UploadId, MaxParts: aws.Int32(1)})
			var api smithy.APIError
			if errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" {
				t.Logf("the store lists upload %s of %s, which no longer exists (not counted)", aws.ToString(u.UploadId), aws.ToString(u.Key))
				continue
			}
			left = append(left, aws.ToString(u.Key)+" (upload "+aws.ToString(u.UploadId)+")")
		}
	}
	return left
}

// s3Refs is what the retained checkpoint records reference: tail objects
// and part files (object keys).
type s3Refs struct {
	tails, targets map[string]bool
}

func (c *s3Chaos) retainedRefs() s3Refs {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	refs := s3Refs{tails: map[string]bool{}, targets: map[string]bool{}}
	retained, err := recovery.Retained(ctx, c.store)
	if err != nil {
		t.Fatal(err)
	}
	// A resumable names its tail objects in "tail" (a list of objects) or,
	// in the first record format, "tail_key".
	type part struct {
		Key     string `json:"key"`
		TailKey string `json:"tail_key"`
		Tail    []struct {
			Key string `json:"key"`
		} `json:"tail"`
	}
	add := func(raw json.RawMessage) {
		var e struct {
			Part part `json:"part"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("checkpoint entry %s: %v", raw, err)
		}
		refs.targets[e.Part.Key] = true
		if e.Part.TailKey != "" {
			refs.tails[e.Part.TailKey] = true
		}
		for _, tl := range e.Part.Tail {
			refs.tails[tl.Key] = true
		}
	}
	for _, ck := range retained {
		for _, p := range ck.Participants {
			if p.State != nil {
				var st struct {
					Parts []json.RawMessage `json:"parts"`
				}
				if err := json.Unmarshal(p.State, &st); err != nil {
					t.Fatalf("checkpoint %d: state of %s: %v", ck.ID, p.Name, err)
				}
				for _, e := range st.Parts {
					add(e)
				}
			}
			for _, pc := range p.Pending {
				add(pc.Data)
			}
		}
	}
	return refs
}

// stagingTarget returns the object key of the part file a staging object
// (key relative to the prefix) belongs to.
func stagingTarget(rel string) string {
	rest := strings.TrimPrefix(rel, s3sink.StagingDir+"/")
	dir, base := path.Split(rest)
	base = strings.TrimPrefix(base, ".")
	if i := strings.LastIndex(base, ".tail-"); i >= 0 {
		base = base[:i]
	} else {
		base = strings.TrimSuffix(base, ".upload")
	}
	return s3ChaosPrefix + "/" + dir + base
}

// checkClean checks the sink after a run that exited 0: `filesink verify`
// passes, no multipart upload is left (`filesink uploads list` and the
// bucket's listing), and every staging object left is referenced by a
// retained checkpoint record (tail objects by their key, upload markers by
// their part file).
func (c *s3Chaos) checkClean(when string) {
	t := c.t
	t.Helper()
	vargs := []string{"verify", "--deep", "--sink", c.sink}
	if c.check.cfg.atLeastOnce {
		// Parts published before a kill and not in a checkpoint are in no
		// manifest (their records came again): check against the records.
		vargs = []string{"verify", "--no-manifests", "--sink", c.sink}
	}
	if out, err := c.cli(vargs...); err != nil {
		t.Errorf("%s: filesink verify --sink %s: %v\n%s", when, c.sink, err, lastLines(out, 20))
	}
	out, err := c.cli("uploads", "list", "--sink", c.sink)
	if err != nil {
		t.Errorf("%s: filesink uploads list: %v\n%s", when, err, out)
	} else if !s3NoUploads.MatchString(out) {
		t.Errorf("%s: filesink uploads list shows uploads:\n%s", when, lastLines(out, 20))
	}
	if left := c.uploadsLeft(); len(left) > 0 {
		t.Errorf("%s: %d incomplete multipart upload(s) left in the bucket: %v", when, len(left), left[:min(10, len(left))])
	}
	refs := c.retainedRefs()
	_, hidden := c.list()
	var orphans []string
	tails := 0
	for rel := range hidden {
		if !strings.HasPrefix(rel, s3sink.StagingDir+"/") {
			continue
		}
		key := s3ChaosPrefix + "/" + rel
		if strings.HasSuffix(rel, ".upload") {
			if !refs.targets[stagingTarget(rel)] {
				orphans = append(orphans, rel+" (upload marker)")
			}
			continue
		}
		tails++
		if !refs.tails[key] {
			orphans = append(orphans, rel)
		}
	}
	if len(orphans) > 0 {
		slices.Sort(orphans)
		t.Errorf("%s: %d of %d staging objects under %s/ are referenced by no retained checkpoint record (orphans left behind), e.g. %v",
			when, len(orphans), tails, s3sink.StagingDir, orphans[:min(5, len(orphans))])
	}
}

// finishedSnapshot returns the finished objects with their ETags.
func (c *s3Chaos) finishedSnapshot() map[string]string {
	finished, _ := c.list()
	m := map[string]string{}
	for rel, o := range finished {
		m[rel] = fmt.Sprintf("%s %d", o.etag, o.size)
	}
	return m
}

func runChaosS3(t *testing.T, bin string, srv *miniotest.Server, cfg chaosConfig, rng *rand.Rand, count int64, want []uint64) {
	c := newS3Chaos(t, bin, srv, cfg, want)
	src := fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed)
	if cfg.dirSource {
		src = writeInput(t, count)
	}
	wantKills := chaosKills
	if cfg.kills > 0 {
		wantKills = cfg.kills
	}
	var lostUploads, lostObjects, rebuilt int
	args := append([]string{"run", "--source", src,
		"--sink", c.sink, "--checkpoint-interval", "100ms", "--s3-part-size", "5MiB"}, c.flags...)
	args = append(args, cfg.args...)
	if os.Getenv("FILESINK_CHAOS_LOG_DIR") != "" {
		args = append(args, "--log-level", "debug")
	}
	t.Logf("filesink %s", strings.Join(args, " "))
	timeout := 5 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-30*time.Second)
	}

	// The kill schedule of runChaos (chaos_test.go): the first kill
	// uniformly in [chaosKillMin, chaosKillMax], later windows adapted so
	// that wantKills kills land while records are still being written.
	lo, hi := chaosKillMin, chaosKillMax
	kills, failures := 0, 0
	var prevNext int64
	var finished time.Duration
	start := time.Now()
runs:
	for run := 1; ; run++ {
		if run > chaosMaxRuns {
			t.Fatalf("no run exited 0 on its own within %d runs (%d kills)", chaosMaxRuns, kills)
		}
		var killAt time.Duration
		switch {
		case kills >= wantKills:
		case finished > 0:
			killAt = time.Millisecond + time.Duration(rng.Int64N(int64(finished)))
		default:
			killAt = lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		}
		r := startRun(t, bin, args, killAt, timeout)
		c.keepLog(cfg.name, run, r)
		rebuilt += strings.Count(r.stderr, "rebuilt a part from the source")
		next := c.decidedNext()
		fresh := c.update(run, next)
		what := map[runOutcome]string{exitedOK: "exited 0", wasKilled: "killed", failed: "FAILED (" + r.state + ")"}[r.outcome]
		t.Logf("run %d: kill at %v: %s after %v; decided next=%d (+%d), %d new objects", run, killAt.Round(time.Millisecond), what, r.dur.Round(time.Millisecond), next, next-prevNext, fresh)
		if t.Failed() {
			t.Logf("stderr of run %d:\n%s", run, lastLines(r.stderr, 20))
			c.check.report(false)
			t.FailNow()
		}
		switch r.outcome {
		case exitedOK:
			if next != count {
				t.Fatalf("run %d exited 0, but its last checkpoint covers %d of %d records; stderr:\n%s", run, next, count, lastLines(r.stderr, 20))
			}
			if kills >= wantKills {
				t.Logf("%d runs, %d kills, %v", run, kills, time.Since(start).Round(time.Millisecond))
				break runs
			}
			finished = max(r.dur, 2*time.Millisecond)
		case wasKilled:
			kills++
			if cfg.lifecycle && kills%2 == 0 {
				u, o := c.loseStaging(rng)
				lostUploads, lostObjects = lostUploads+u, lostObjects+o
			}
			if finished > 0 {
				break
			}
			gain := next - prevNext
			if rk := wantKills - kills; rk > 0 {
				hi = widenKillWindow(lo, hi, killAt, gain, int64(count-next), rk)
			}
		case failed:
			failures++
			t.Errorf("run %d failed on its own (%s); stderr:\n%s", run, r.state, lastLines(r.stderr, 20))
			c.diagnoseLoss(r.stderr)
			if failures >= 3 {
				t.FailNow()
			}
		}
		prevNext = next
	}
	c.check.report(true)
	if cfg.lifecycle {
		t.Logf("lost %d upload(s) and %d staging object(s); %d part(s) rebuilt", lostUploads, lostObjects, rebuilt)
		// Whether a lost upload was referenced depends on where the kills
		// land: the rebuild tests (rebuild_test.go) assert it; here no run
		// may fail and every record must be there once.
	}
	if len(c.etags) == 0 {
		t.Errorf("no output objects")
	}
	c.checkClean("after the run that exited 0")

	// A further run of the finished job publishes nothing.
	before := c.finishedSnapshot()
	r := startRun(t, bin, args, 0, timeout)
	if r.outcome != exitedOK {
		t.Fatalf("a further run of the same command: %s; stderr:\n%s", r.state, lastLines(r.stderr, 20))
	}
	after := c.finishedSnapshot()
	var diff []string
	for k, v := range after {
		if w, ok := before[k]; !ok {
			diff = append(diff, "new object "+k)
		} else if w != v {
			diff = append(diff, k+" changed")
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diff = append(diff, "object disappeared: "+k)
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Errorf("a further run of the finished job changed the output: %s", strings.Join(diff, "; "))
	}
	if left := c.uploadsLeft(); len(left) > 0 {
		t.Errorf("after a further run: %d incomplete multipart upload(s) left: %v", len(left), left)
	}
}

// TestS3CleanRunLeavesNoOrphanedStaging runs the CLI once, without kills,
// on a job whose part files roll (and are committed) while later
// checkpoints are taken: after it exits 0, `filesink verify` must pass and
// no staging object may be left that no retained checkpoint references.
// Every Persist of an in-progress part writes a new tail object, which
// outlives the checkpoints that reference it and the commit of its part
// file: the run itself must delete them, not only the recovery sweep of
// the next start.
func TestS3CleanRunLeavesNoOrphanedStaging(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	cfg := chaosConfig{name: "rolling", ext: ".jsonl", parallelism: 1, bucket: func(genRecord) (string, error) { return "", nil }}
	const count = 100000
	want := generated(t, count)
	c := newS3Chaos(t, bin, srv, cfg, want)
	// A checkpoint every 5,000 records (500 KB) and parts of 1 MiB: every
	// part file is persisted (a tail object) at one or two checkpoints,
	// then rolls and is committed, and 10 more checkpoints follow.
	args := append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed),
		"--sink", c.sink, "--checkpoint-records", "5000", "--checkpoint-interval", "1h", "--part-size", "1MiB",
		"--s3-part-size", "5MiB"}, c.flags...)
	r := startRun(t, bin, args, 0, 2*time.Minute)
	if r.outcome != exitedOK {
		t.Fatalf("filesink run: %s\n%s", r.state, lastLines(r.stderr, 20))
	}
	if n := c.update(1, c.decidedNext()); n < 5 {
		t.Errorf("%d part files published, want at least 5 (parts roll at 1 MiB)", n)
	}
	c.check.report(true)
	c.checkClean("after a clean run")
}
