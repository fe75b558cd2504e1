package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// envPrefix starts the environment variable of every run flag:
// --checkpoint-interval is FILESINK_CHECKPOINT_INTERVAL.
const envPrefix = "FILESINK_"

// envName is the environment variable of flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// configHelp is the part of run's help on settings from a file and the
// environment.
const configHelp = `Settings (flags, environment, config file):
  Every flag may also come from the environment, as FILESINK_<NAME> (upper
  case, dashes as underscores: FILESINK_CHECKPOINT_INTERVAL=30s), and from a
  YAML file given with --config FILE (or FILESINK_CONFIG), whose keys are the
  flag names without dashes in front:
      source: kafka://broker:9092/orders
      sink: s3://bucket/orders
      checkpoint-interval: 30s
      s3:                        # a section: s3-endpoint, s3-path-style
        endpoint: http://minio:9000
        path-style: true
  Precedence: command line > environment > config file > defaults. An unknown
  key or a value of the wrong type in the file is an error naming the key and
  the file. Values from the file and the environment count as given (the
  checks that refuse a flag for a sink apply to them), and are never logged.`

// applySettings fills the flags of fs that the command line did not set
// (cmdline) from the environment (FILESINK_<NAME>) and, below that, from
// the YAML config file named by the --config flag (or FILESINK_CONFIG).
// A nil error means every value given was valid for its flag.
func applySettings(fs *flag.FlagSet, cmdline map[string]bool, configPath string) error {
	if configPath == "" && !cmdline["config"] {
		configPath = os.Getenv(envName("config"))
	}
	fromEnv := map[string]bool{}
	var err error
	fs.VisitAll(func(fl *flag.Flag) {
		if err != nil || cmdline[fl.Name] || fl.Name == "config" {
			return
		}
		v, ok := os.LookupEnv(envName(fl.Name))
		if !ok {
			return
		}
		fromEnv[fl.Name] = true
		if e := setFlag(fs, fl.Name, v); e != nil {
			err = usageError("run: environment %s: %v", envName(fl.Name), e)
		}
	})
	if err != nil || configPath == "" {
		return err
	}
	settings, err := readConfig(configPath, fs)
	if err != nil {
		return err
	}
	for _, s := range settings {
		if cmdline[s.flag] || fromEnv[s.flag] {
			continue
		}
		if e := setFlag(fs, s.flag, s.value); e != nil {
			return usageError("run: config %s: line %d: key %s: %v", configPath, s.line, s.key, e)
		}
	}
	return nil
}

// setFlag sets flag name to value, with an error that says what the flag
// wants. (The value of a flag that can fail to parse is a number, a
// duration, a boolean or one of a list of words, never a credential: it
// may be shown.)
func setFlag(fs *flag.FlagSet, name, value string) error {
	err := fs.Set(name, value)
	if err == nil {
		return nil
	}
	return fmt.Errorf("invalid value %q for --%s: want %s", value, name, wants(fs, name, err.Error()))
}

// wants says what flag name accepts, for the error of a value it refused
// with the message why.
func wants(fs *flag.FlagSet, name, why string) string {
	fl := fs.Lookup(name)
	if fl == nil {
		return why
	}
	if e, ok := fl.Value.(*enumValue); ok {
		return e.allowedText()
	}
	if g, ok := fl.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return "true or false"
		case time.Duration:
			return "a duration such as 500ms, 10s or 1m30s"
		case int, int64, uint, uint64:
			return "an integer"
		case float64:
			return "a number"
		}
	}
	return why
}

// setting is one value of a config file.
type setting struct {
	flag  string // the flag it sets
	key   string // as written, with sections: "s3.endpoint"
	value string
	line  int
}

// readConfig reads the YAML config file path and returns its settings,
// each checked to name a flag of fs. Sections nest: key k of section s
// sets flag s-k. A sequence is joined with commas (--csv-columns,
// --mysql-key...).
func readConfig(path string, fs *flag.FlagSet) ([]setting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("run: --config: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, usageError("run: config %s: %v", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 { // empty file
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, usageError("run: config %s: line %d: want a mapping of flag names to values", path, root.Line)
	}
	var out []setting
	seen := map[string]int{} // flag -> line
	var walk func(n *yaml.Node, prefix, keyPrefix string) error
	walk = func(n *yaml.Node, prefix, keyPrefix string) error {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return usageError("run: config %s: line %d: a key must be a flag name", path, k.Line)
			}
			name, key := prefix+k.Value, keyPrefix+k.Value
			if name == "config" {
				return usageError("run: config %s: line %d: key config: a config file cannot name another one", path, k.Line)
			}
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			fl := fs.Lookup(name)
			if v.Kind == yaml.MappingNode {
				if fl != nil {
					return usageError("run: config %s: line %d: key %s: want a value, not a section", path, k.Line, key)
				}
				if err := walk(v, name+"-", key+"."); err != nil {
					return err
				}
				continue
			}
			if fl == nil {
				return usageError("run: config %s: line %d: unknown key %q: not a flag of filesink run%s", path, k.Line, key, suggest(name, fs))
			}
			if line, dup := seen[name]; dup {
				return usageError("run: config %s: line %d: key %s sets --%s, already set on line %d", path, k.Line, key, name, line)
			}
			seen[name] = k.Line
			val, err := scalar(v)
			if err != nil {
				return usageError("run: config %s: line %d: key %s: %v", path, k.Line, key, err)
			}
			if val == nil { // "key:" with no value: not set
				continue
			}
			out = append(out, setting{flag: name, key: key, value: *val, line: k.Line})
		}
		return nil
	}
	if err := walk(root, "", ""); err != nil {
		return nil, err
	}
	return out, nil
}

// scalar returns the text of a value node: a scalar, or a sequence of
// scalars joined with commas; nil for null.
func scalar(v *yaml.Node) (*string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil, nil
		}
		return &v.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return nil, errors.New("want a list of plain values")
			}
			parts = append(parts, e.Value)
		}
		s := strings.Join(parts, ",")
		return &s, nil
	}
	return nil, errors.New("want a value")
}

// suggest names the flag closest to name, if one is close.
func suggest(name string, fs *flag.FlagSet) string {
	best, bestD := "", 3
	var names []string
	fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	sort.Strings(names)
	for _, n := range names {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// suggestFlag is suggest for a flag given on the command line: " (did you
// mean --NAME?)" or "".
func suggestFlag(name string, fs *flag.FlagSet) string {
	if s := suggest(name, fs); s != "" {
		return strings.Replace(s, "mean ", "mean --", 1)
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
