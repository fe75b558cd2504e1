package kafka

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/source"
)

func TestParseURI(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := []struct {
		uri  string
		want Config
	}{
		{"kafka://localhost:9092/events", Config{Brokers: []string{"localhost:9092"}, Topics: []string{"events"}}},
		{"KAFKA://a:1,b:2,[::1]:3/t1,t.2?partitions=0,3&start=latest&bounded=true&monitor_group=g&client_id=me&connect_timeout=3s&fetch_max_bytes=1000&fetch_max_partition_bytes=500",
			Config{Brokers: []string{"a:1", "b:2", "[::1]:3"}, Topics: []string{"t1", "t.2"}, Partitions: []int32{0, 3}, Start: "latest",
				Bounded: true, Group: "g", ClientID: "me", ConnectTimeout: 3 * time.Second, FetchMaxBytes: 1000, FetchMaxPartitionBytes: 500}},
		{"kafka://h:1/t?start=2026-01-02T03:04:05Z", Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, Start: "2026-01-02T03:04:05Z"}},
		{"kafka://h:1/t?start=1700000000000&bounded=false", Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, Start: "1700000000000"}},
		{"kafka://h:1/t?tls=true", Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, TLS: &TLSConfig{}}},
		{"kafka://h:1/t?tls_ca=/ca.pem&tls_cert=/c.pem&tls_key=/k.pem&tls_insecure=true&tls_server_name=kafka",
			Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, TLS: &TLSConfig{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", InsecureSkipVerify: true, ServerName: "kafka"}}},
		{"kafka://alice:p%40ss%2Fw@h:1/t?sasl=scram-sha-512",
			Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, SASL: &SASLConfig{Mechanism: SASLScramSHA512, User: "alice", Password: "p@ss/w"}}},
		{"kafka://h:1/t?sasl=plain&sasl_user=bob&sasl_password_file=" + pwFile,
			Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, SASL: &SASLConfig{Mechanism: SASLPlain, User: "bob", Password: "file-secret"}}},
	}
	for _, tc := range good {
		got, err := ParseURI(tc.uri)
		if err != nil {
			t.Errorf("ParseURI(%q): %v", tc.uri, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURI(%q)\n got %#v\nwant %#v", tc.uri, got, tc.want)
		}
	}

	bad := []struct{ uri, inErr string }{
		{"", "not a kafka:// URI"},
		{"http://h:1/t", "not a kafka:// URI"},
		{"kafka://h:1", "no topic"},
		{"kafka://h:1/", "no topic"},
		{"kafka:///t", "no brokers"},
		{"kafka://h/t", `broker "h": want host:port`},
		{"kafka://h:99999/t", `port "99999"`},
		{"kafka://h:1/a/b", "one path segment"},
		{"kafka://h:1/bad topic", `topic "bad topic"`},
		{"kafka://h:1/t?fetch_max_partition_bytes=0", `fetch_max_partition_bytes "0"`},
		{"kafka://h:1/t,t", `topic "t" given twice`},
		{"kafka://h:1/t?partitions=x", `partitions "x"`},
		{"kafka://h:1/t?partitions=1,1", "partition 1 given twice"},
		{"kafka://h:1/t?start=yesterday", `start "yesterday"`},
		{"kafka://h:1/t?bounded=maybe", `bounded "maybe"`},
		{"kafka://h:1/t?bogus=1", `unknown parameter "bogus"`},
		{"kafka://h:1/t?monitor_group=a&monitor_group=b", `parameter "monitor_group" given 2 times`},
		{"kafka://h:1/t?connect_timeout=-1s", "connect_timeout"},
		{"kafka://h:1/t?sasl=gssapi&sasl_user=u", `sasl mechanism "GSSAPI"`},
		{"kafka://h:1/t?sasl=plain", "needs a user"},
		{"kafka://u:hunter2@h:1/t", "credentials given without sasl"},
		{"kafka://h:1/t?tls_cert=/c.pem", "both a certificate file and a key file"},
		{"kafka://h:1/t?tls=false&tls_ca=/ca", "tls=false contradicts"},
		{"kafka://h:1/t?sasl=plain&sasl_user=u&sasl_password_file=/nonexistent/pw", "/nonexistent/pw"},
		{"kafka://h:1/t#frag", "fragments"},
	}
	for _, tc := range bad {
		_, err := ParseURI(tc.uri)
		if err == nil {
			t.Errorf("ParseURI(%q) succeeded", tc.uri)
			continue
		}
		if !errors.Is(err, source.ErrBadURI) {
			t.Errorf("ParseURI(%q): %v does not match source.ErrBadURI", tc.uri, err)
		}
		if !strings.Contains(err.Error(), tc.inErr) {
			t.Errorf("ParseURI(%q) = %q, want it to contain %q", tc.uri, err, tc.inErr)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURI(%q) leaks the password: %q", tc.uri, err)
		}
	}
}

// TestParseURIGroupParameter: group= is refused with one line that names
// its new name and the flag that shares partitions, whatever else the URI
// holds.
func TestParseURIGroupParameter(t *testing.T) {
	const want = "the URI parameter group= is now monitor_group= (offsets mirrored for lag dashboards); to share a topic's partitions among processes use --group NAME"
	for _, uri := range []string{
		"kafka://h:1/t?group=g",
		"kafka://u:hunter2@h:1/t?sasl=plain&group=g",
		"kafka://h:1/t?bogus=1&group=",
	} {
		_, err := ParseURI(uri)
		if err == nil {
			t.Fatalf("ParseURI(%q) succeeded", uri)
		}
		if !errors.Is(err, source.ErrBadURI) {
			t.Errorf("ParseURI(%q): %v does not match source.ErrBadURI", uri, err)
		}
		msg := err.Error()
		if !strings.HasSuffix(msg, ": "+want) || strings.Contains(msg, "\n") || strings.Contains(msg, "hunter2") {
			t.Errorf("ParseURI(%q) = %q, want one line ending in %q, without the password", uri, msg, want)
		}
	}
	cfg, err := ParseURI("kafka://h:1/t?monitor_group=dash")
	if err != nil || cfg.Group != "dash" {
		t.Fatalf("monitor_group=dash: %+v, %v", cfg, err)
	}
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"kafka://h:1/t":                   "kafka://h:1/t",
		"kafka://u@h:1/t":                 "kafka://u@h:1/t",
		"kafka://u:pw@h:1/t":              "kafka://u:REDACTED@h:1/t",
		"kafka://u:p/w?x@h:1/t":           "kafka://u:REDACTED@h:1/t",
		"kafka://u:p@w@h:1/t?sasl=plain":  "kafka://u:REDACTED@h:1/t?sasl=plain",
		"kafka://h:1/t?monitor_group=a@b": "kafka://h:REDACTED@b",
		"not a uri with : and @ anywhere": "not a uri with :REDACTED@ anywhere",
		"no at sign: here":                "no at sign: here",
	} {
		if got := RedactURI(in); got != want {
			t.Errorf("RedactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSecretsDoNotPrint: a Config with a password, formatted or encoded
// every usual way, does not show it.
func TestSecretsDoNotPrint(t *testing.T) {
	cfg := Config{Brokers: []string{"h:1"}, Topics: []string{"t"}, SASL: &SASLConfig{Mechanism: SASLPlain, User: "u", Password: "hunter2"}}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		fmt.Sprintf("%v %+v %#v %s %q %x", cfg.SASL, cfg.SASL, cfg.SASL, cfg.SASL.Password, cfg.SASL.Password, cfg.SASL.Password),
		fmt.Sprint(*cfg.SASL), string(j),
	} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, fmt.Sprintf("%x", "hunter2")) {
			t.Errorf("password in %q", s)
		}
		if !strings.Contains(s, "REDACTED") {
			t.Errorf("no REDACTED in %q", s)
		}
	}
}

// FuzzParseURI: ParseURI never panics, a URI it accepts gives a Config
// that validates, and an error never holds the password of the user info.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{
		"kafka://localhost:9092/events",
		"kafka://a:1,b:2/t1,t2?partitions=0,1&start=latest&bounded=true&monitor_group=g",
		"kafka://h:1/t?group=g",
		"kafka://u:secretpw@h:1/t?sasl=plain",
		"kafka://u:secretpw@h:1/t",
		"kafka://h:1/t?start=2026-01-02T03:04:05Z&tls=true",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		cfg, err := ParseURI(uri)
		if err != nil {
			if strings.Contains(uri, ":secretpw@") && strings.Contains(err.Error(), "secretpw") {
				t.Fatalf("ParseURI(%q) leaks the password: %v", uri, err)
			}
			return
		}
		if _, err := cfg.validate(); err != nil {
			t.Fatalf("ParseURI(%q) accepted a config that does not validate: %v", uri, err)
		}
	})
}
