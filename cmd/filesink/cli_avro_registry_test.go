package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/source/avro"
)

// The Schema Registry (srfake, basic auth, behind a fault proxy, its URL
// with the password in FILESINK_SCHEMA_REGISTRY) refuses connections when
// a run starts and comes back once the run has warned: with --schema the
// first record's schema is waited for while the records are read, without
// it the schema of the topic at the start. Each run completes, every
// record is in the Parquet output once, none went to the dead letters,
// and stderr has the warning and the line for the registry back, never
// the password.
func TestAvroRegistryOutage(t *testing.T) {
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("user:secret"))))
	t.Cleanup(reg.Close)
	id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: avroOrder, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	s := hamba.MustParse(avroOrder)
	kc := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 2})
	const per = 200
	for p := range int32(2) {
		var vals []string
		for i := range per {
			n := int64(p)*per + int64(i)
			vals = append(vals, string(avroFrame(t, id, s, avroOrderOf(n))))
		}
		kc.MustProduce(t, "orders", p, vals...)
	}
	proxy := faultproxy.New(t, reg.URL())
	t.Setenv(envName("schema-registry"), strings.Replace(proxy.URL(), "http://", "http://user:secret@", 1))
	dir := t.TempDir()
	doc, err := avro.SchemaDoc(s, "")
	if err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(dir, "orders.schema.json")
	if err := os.WriteFile(schemaFile, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, schema string }{{"while reading", schemaFile}, {"at the start", ""}} {
		out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		args := []string{"run", "--source", "kafka://" + kc.Bootstrap() + "/orders", "--bounded", "--sink", out, "--format", "parquet",
			"--value-format", "avro", "--on-bad-record", "skip"}
		if tc.schema != "" {
			args = append(args, "--schema", tc.schema)
		}
		stderr := runThroughOutage(t, proxy, args)
		got, err := duckDB(t)(fmt.Sprintf(`SELECT count(*) AS n, count(DISTINCT id) AS ids FROM read_parquet('%s/*.parquet')`, out))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint(map[string]string{"n": "400", "ids": "400"}); fmt.Sprint(got) != want {
			t.Errorf("%s: DuckDB reads %v, want %v", tc.name, got, want)
		}
		if dead, _ := filepath.Glob(filepath.Join(out, "_dead-letter", "*")); len(dead) > 0 {
			t.Errorf("%s: dead letters %v, want none", tc.name, dead)
		}
		if strings.Count(stderr, "schema registry unreachable, retrying") != 1 || strings.Count(stderr, "schema registry answers again") != 1 ||
			strings.Contains(stderr, "secret") {
			t.Errorf("%s: want one warning, one line for the registry back, no password; stderr:\n%s", tc.name, stderr)
		}
	}
}

// runThroughOutage runs filesink with args while the proxy is down, brings
// it up once the run has warned that the registry is unreachable, and
// returns the run's stderr after it exited 0.
func runThroughOutage(t *testing.T, proxy *faultproxy.Proxy, args []string) string {
	t.Helper()
	proxy.Down()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(context.Background(), args, strings.NewReader(""), &stdout, &stderr, make(chan os.Signal))
	}()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(stderr.String(), "schema registry unreachable, retrying") {
		select {
		case code := <-done:
			proxy.Up(t)
			t.Fatalf("the run ended (exit %d) before it warned of the registry down:\n%s", code, stderr.String())
		case <-deadline:
			proxy.Up(t)
			t.Fatalf("no warning of the registry down:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	proxy.Up(t)
	if code := <-done; code != 0 {
		t.Fatalf("filesink %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stderr.String()
}

// A refused login and the mistakes of --schema-registry's parameters are
// each one error that never shows the password.
func TestAvroRegistryRefusals(t *testing.T) {
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("user:right"))))
	t.Cleanup(reg.Close)
	if _, _, err := reg.RegisterSchema("t-value", sr.Schema{Schema: avroOrder, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	withSecret := strings.Replace(reg.URL(), "http://", "http://user:secret@", 1)
	for _, tc := range []struct {
		registry string
		code     int
		want     string
	}{
		{withSecret, 1, "403 Forbidden"},
		{withSecret + "?color=red", 2, "unknown parameter color"},
		{withSecret + "?tls_ca=" + filepath.Join(dir, "none.pem"), 2, "need an https:// URL"},
		{strings.Replace(withSecret, "http:", "https:", 1) + "?tls_ca=" + filepath.Join(dir, "none.pem"), 2, "tls_ca: open"},
		{withSecret + "?password_file=" + filepath.Join(dir, "pw"), 2, "both in the user info and in password_file"},
		{reg.URL() + "?password_file=" + filepath.Join(dir, "pw"), 2, "password_file needs a user"},
	} {
		t.Setenv(envName("schema-registry"), tc.registry)
		r := cli(t, "run", "--source", "kafka://127.0.0.1:1/t", "--sink", filepath.Join(dir, "o"), "--format", "parquet", "--value-format", "avro")
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "secret") {
			t.Errorf("%s: want exit %d with %q and no password: %v", kafkaRedact(tc.registry), tc.code, tc.want, r)
		}
	}
}

func kafkaRedact(s string) string { return redactURI(s) }
