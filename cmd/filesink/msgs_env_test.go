package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// TestS3PrintsNoSDKLines: the AWS SDK's own messages ("SDK 2026/01/02 ...
// WARN Skipped validation of multipart checksum." when verify --deep reads
// a multipart object back) never reach the output: the CLI's stderr of a
// small S3 job holds no SDK or WARN line. The SDK writes its default log
// to the process's stderr, so the commands run as processes.
func TestS3PrintsNoSDKLines(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	sink := "s3://" + srv.NewBucket(t) + "/out"
	s3 := []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	for _, args := range [][]string{
		{"run", "--source", "gen://?count=3000", "--sink", sink},
		{"verify", "--deep", "--sink", sink},
		{"state", "--state", sink + "/_filesink"},
		{"uploads", "list", "--sink", sink},
		{"run", "--source", "gen://?count=3000", "--sink", sink}, // publishes nothing new
	} {
		cmd := exec.Command(bin, append(args, s3...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("filesink %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(line, "SDK ") || strings.Contains(line, "WARN") {
				t.Errorf("filesink %s printed %q", strings.Join(args, " "), line)
			}
		}
	}
}

// warnings returns the warning lines of stderr.
func warnings(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "filesink: warning: ") {
			out = append(out, l)
		}
	}
	return out
}

// TestPasswordOnCommandLineWarned: a password in a flag on the command
// line gets one warning line, which never shows it and names where to put
// it instead; the same value from a config file gets none.
func TestPasswordOnCommandLineWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	my := "mysql://app:" + secret + "@tcp(127.0.0.1:1)/shop"
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ok.Close()
	hook := strings.Replace(ok.URL, "http://", "http://bob:"+secret+"@", 1) + "/in"
	cases := []struct {
		name string
		args []string
		want []string // in the one warning line; nil: no warning
	}{
		{"mysql run", []string{"run", "--source", "gen://?count=1", "--sink", my, "--mysql-table", "t", "--state", filepath.Join(dir, "s1")},
			[]string{"run: --sink has a password on the command line", mysqlPasswordEnv, "FILESINK_SINK", "--config"}},
		{"mysql xa", []string{"xa", "list", "--sink", my}, []string{"xa list: --sink has a password", mysqlPasswordEnv}},
		{"http run", []string{"run", "--source", "gen://?count=5", "--sink", hook, "--state", filepath.Join(dir, "s2")},
			[]string{"run: --sink has a password", "FILESINK_SINK"}},
		{"mysql from a config file", []string{"run", "--source", "gen://?count=1", "--config",
			writeConfig(t, "sink: '"+my+"'\nmysql-table: t\nstate: "+filepath.Join(dir, "s3")+"\n")}, nil},
		{"mysql without password", []string{"xa", "list", "--sink", "mysql://app@tcp(127.0.0.1:1)/shop"}, nil},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("%s: the password shows: %v", c.name, r)
		}
		ws := warnings(r.stderr)
		if c.want == nil {
			if len(ws) != 0 {
				t.Errorf("%s: want no warning, got %q", c.name, ws)
			}
			continue
		}
		if len(ws) != 1 {
			t.Errorf("%s: want one warning line, got %v", c.name, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(ws[0], w) {
				t.Errorf("%s: warning %q does not say %q", c.name, ws[0], w)
			}
		}
	}
}

// TestMySQLPasswordFromEnvironment: a DSN without a password takes the one
// of FILESINK_MYSQL_PASSWORD, so it need not be on the command line.
func TestMySQLPasswordFromEnvironment(t *testing.T) {
	srv := mariadbtest.Shared(t)
	admin := srv.Admin(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	user, pass := "fs_pw_"+hex.EncodeToString(rnd[:]), "pw-"+hex.EncodeToString(rnd[:])
	dbName := srv.NewDatabase(t)
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + pass + "'",
		"GRANT ALL ON `" + dbName + "`.* TO '" + user + "'@'%'",
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER '" + user + "'@'%'") })
	sink := "mysql://" + user + "@tcp(" + srv.Addr() + ")/" + dbName
	t.Setenv(mysqlPasswordEnv, pass)
	r := cli(t, "xa", "list", "--sink", sink)
	if r.code != 0 || !strings.Contains(r.stdout, "0 prepared branch(es)") || len(warnings(r.stderr)) != 0 {
		t.Errorf("xa list with the password in %s: want exit 0 and no warning, got %v", mysqlPasswordEnv, r)
	}
	t.Setenv(mysqlPasswordEnv, "")
	if r := cli(t, "xa", "list", "--sink", sink); r.code != 1 || !strings.Contains(r.stderr, "Access denied") {
		t.Errorf("xa list without a password: want exit 1, access denied, got %v", r)
	}
}
