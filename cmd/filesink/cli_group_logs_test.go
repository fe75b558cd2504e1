package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// logCounts counts the lines of a log by level, and those of the Kafka
// client (source=kafka) above Debug.
type logCounts struct {
	byLevel map[string]int
	client  []string // the client's lines at Info and above
	errors  []string
}

var (
	logLevelRE = regexp.MustCompile(`^time=\S+ level=(\w+) `)
	assignedRE = regexp.MustCompile(`msg="kafka: lanes assigned" .*\bgeneration=(\d+)`)
)

func countLog(log string) logCounts {
	c := logCounts{byLevel: map[string]int{}}
	for _, line := range strings.Split(log, "\n") {
		m := logLevelRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		c.byLevel[m[1]]++
		if m[1] == "DEBUG" {
			continue
		}
		if strings.Contains(line, " source=kafka") {
			c.client = append(c.client, line)
		}
		if m[1] == "ERROR" {
			c.errors = append(c.errors, line)
		}
	}
	return c
}

// TestGroupLogScaleUp: the log of a normal group run (a member joins and
// takes every lane, a second joins and the group rebalances, both stop
// with SIGTERM) has no ERROR line and none of the Kafka client's internals
// above Debug: the members say in their own words, once per rebalance,
// which lanes they were assigned and which they handed off.
func TestGroupLogScaleUp(t *testing.T) {
	j := newGroupJob(t, 4, 500)
	args := j.args(j.srv.Endpoint(), "--checkpoint-interval", "100ms", "--progress", "off")
	a := startMember(args...)
	a.waitFor(t, regexp.MustCompile(`msg="kafka: lanes assigned" .*taken="\[orders/0 orders/1 orders/2 orders/3\]"`))
	b := startMember(args...)
	b.waitFor(t, regexp.MustCompile(`msg="lane taken over"`))
	a.waitFor(t, regexp.MustCompile(`msg="lane released"`))
	a.sig <- os.Interrupt
	b.sig <- os.Interrupt
	for _, m := range []*member{a, b} {
		if code := m.wait(t); code != 0 {
			t.Fatalf("exit %d:\n%s", code, lastLines(m.stderr.String(), 40))
		}
	}
	if n := j.outputRecords(t); n != j.total {
		t.Errorf("%d records in the output, want %d", n, j.total)
	}
	for name, m := range map[string]*member{"first": a, "second": b} {
		log := m.stderr.String()
		c := countLog(log)
		t.Logf("%s member: %d lines by level %v", name, strings.Count(log, "\n"), c.byLevel)
		if len(c.errors) > 0 {
			t.Errorf("%s member: %d ERROR line(s) in a normal run:\n%s", name, len(c.errors), strings.Join(c.errors, "\n"))
		}
		if len(c.client) > 0 {
			t.Errorf("%s member: %d line(s) of the Kafka client's internals above DEBUG, e.g.:\n%s", name, len(c.client), strings.Join(c.client[:min(5, len(c.client))], "\n"))
		}
		gens := assignedRE.FindAllStringSubmatch(log, -1)
		seen := map[string]bool{}
		for _, g := range gens {
			if seen[g[1]] {
				t.Errorf("%s member: more than one \"lanes assigned\" line for generation %s", name, g[1])
			}
			seen[g[1]] = true
		}
		if len(gens) == 0 {
			t.Errorf("%s member: no \"lanes assigned\" line", name)
		}
		if strings.Contains(log, "group=g group=g") {
			t.Errorf("%s member: a line names the group twice", name)
		}
	}
	if n := strings.Count(a.stderr.String(), `msg="kafka: lanes revoked"`); n < 2 {
		t.Errorf("the first member logged %d \"lanes revoked\" lines, want the rebalance's and the stop's", n)
	}
}
