package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs http://addr/metrics and parses it with the Prometheus text
// parser: metric name (plus {labels} when it has some) to value;
// histograms give NAME_count.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out, err := scrapeErr(addr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scrapeErr is scrape, returning what went wrong.
func scrapeErr(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("/metrics does not parse: %w", err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out, nil
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var metricsAddrRE = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)

// TestMetricsDuringRun scrapes /metrics while a job reads stdin, checks
// that the counters move with the records fed and match them, that
// /healthz and /readyz answer, and that the output has every record once.
func TestMetricsDuringRun(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	pr, pw := io.Pipe()
	defer pw.Close()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(context.Background(), []string{"run", "--source", "-", "--sink", out,
			"--metrics-addr", "127.0.0.1:0", "--checkpoint-interval", "50ms", "--roll-on-checkpoint", "--progress", "off"},
			pr, &stdout, &stderr, make(chan os.Signal))
	}()
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; {
		if m := metricsAddrRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("run exited %d before serving metrics:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics address logged:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := httpGet(t, "http://"+addr+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}

	var want []string
	var inBytes float64
	feed := func(from, to int) {
		var b bytes.Buffer
		for i := from; i < to; i++ {
			l := fmt.Sprintf(`{"id":%d,"v":"metrics"}`, i)
			want = append(want, l)
			inBytes += float64(len(l))
			b.WriteString(l + "\n")
		}
		// io.Pipe: Write returns when the run has read every line.
		if _, err := pw.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	// settled waits until the sinks took n records and two more
	// checkpoints completed (the second one's barrier came after them: they
	// are committed), and returns that scrape.
	settled := func(n int) map[string]float64 {
		t.Helper()
		var base float64 = -1
		var v map[string]float64
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			v = scrape(t, addr)
			if v["filesink_sink_records_total"] != float64(n) {
				continue
			}
			if base < 0 {
				base = v["filesink_checkpoints_total"]
			}
			if v["filesink_checkpoints_total"] >= base+2 {
				return v
			}
		}
		t.Fatalf("the sinks did not take %d records and checkpoint them within a minute; last scrape: %v\nstderr:\n%s", n, v, stderr.String())
		return nil
	}
	check := func(v map[string]float64, n int) {
		t.Helper()
		for name, w := range map[string]float64{
			"filesink_source_records_total": float64(n),
			"filesink_sink_records_total":   float64(n),
			"filesink_source_bytes_total":   inBytes,
			"filesink_sink_bytes_total":     inBytes,
			"filesink_bad_records_total":    0,
			"filesink_commit_retries_total": 0,
		} {
			if v[name] != w {
				t.Errorf("after %d records: %s = %v, want %v", n, name, v[name], w)
			}
		}
		ckpts := v["filesink_checkpoints_total"]
		if ckpts < 2 || v["filesink_last_checkpoint_id"] != ckpts ||
			v["filesink_checkpoint_duration_seconds_count"] < ckpts-1 ||
			v[`filesink_checkpoint_phase_duration_seconds{phase="phase1"}_count`] < ckpts-1 ||
			v[`filesink_checkpoint_phase_duration_seconds{phase="decide"}_count`] < ckpts-1 ||
			v[`filesink_checkpoint_phase_duration_seconds{phase="phase2"}_count`] < ckpts-1 {
			t.Errorf("after %d records: checkpoint metrics do not follow the %v checkpoints: %v", n, ckpts, v)
		}
		if v["filesink_files_committed_total"] < 1 {
			t.Errorf("after %d records: no file committed: %v", n, v)
		}
		for _, name := range []string{"filesink_open_part_files", "filesink_pending_committables", "filesink_last_checkpoint_age_seconds",
			`filesink_orphans_swept_total{kind="staging_file"}`, "go_goroutines"} {
			if _, ok := v[name]; !ok {
				t.Errorf("%s is not exported", name)
			}
		}
		// Every record the metrics count as checkpointed is visible.
		checkExactlyOnce(t, outputLines(t, out), want)
	}

	feed(0, 300)
	v1 := settled(300)
	check(v1, 300)
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 || !strings.HasPrefix(body, "ready: checkpoint ") {
		t.Errorf("/readyz while checkpointing: %d %q", code, body)
	}
	feed(300, 1000)
	v2 := settled(1000)
	check(v2, 1000)
	if v2["filesink_checkpoints_total"] <= v1["filesink_checkpoints_total"] || v2["filesink_files_committed_total"] <= v1["filesink_files_committed_total"] {
		t.Errorf("counters did not move: checkpoints %v -> %v, files %v -> %v", v1["filesink_checkpoints_total"], v2["filesink_checkpoints_total"],
			v1["filesink_files_committed_total"], v2["filesink_files_committed_total"])
	}

	pw.Close() // end of input: a final checkpoint, then exit 0
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the run did not end after the end of stdin:\n%s", stderr.String())
	}
	checkExactlyOnce(t, outputLines(t, out), want)
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Errorf("the metrics server still answers after the run")
	}
}

// TestMetricsAddrInUse: a port that cannot be bound is a one-line error
// naming the flag, before anything runs.
func TestMetricsAddrInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out := filepath.Join(t.TempDir(), "out")
	r := cli(t, "run", "--source", "gen://?count=10", "--sink", out, "--metrics-addr", ln.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "filesink: run: --metrics-addr "+ln.Addr().String()+": listen tcp") {
		t.Fatalf("want exit 1 naming --metrics-addr: %v", r)
	}
	if ids := outputIDs(t, out); len(ids) != 0 {
		t.Errorf("the run wrote %d records", len(ids))
	}
}
