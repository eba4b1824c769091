package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newFlags() (*flag.FlagSet, *string, *int) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	s := fs.String("name", "default", "a name")
	n := fs.Int("count", 1, "a count")
	return fs, s, n
}

func TestParseEnvFallbacks(t *testing.T) {
	env := map[string]string{"name": "TEST_CLI_NAME", "count": "TEST_CLI_COUNT"}
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantName  string
		wantCount int
		wantErr   error
	}{
		{name: "defaults", wantName: "default", wantCount: 1},
		{name: "environment over default", env: map[string]string{"TEST_CLI_NAME": "env", "TEST_CLI_COUNT": "7"}, wantName: "env", wantCount: 7},
		{name: "command line over environment", args: []string{"--name", "flag"}, env: map[string]string{"TEST_CLI_NAME": "env"}, wantName: "flag", wantCount: 1},
		{name: "empty variable is unset", env: map[string]string{"TEST_CLI_NAME": ""}, wantName: "default", wantCount: 1},
		{name: "bad variable is a usage error", env: map[string]string{"TEST_CLI_COUNT": "many"}, wantErr: ErrUsage},
		{name: "unknown flag is a usage error", args: []string{"--nope"}, wantErr: ErrUsage},
		{name: "help", args: []string{"--help"}, wantErr: flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs, name, count := newFlags()
			var out bytes.Buffer
			fs.SetOutput(&out)
			fs.Usage = Usage(fs, "Usage: prog [flags]\n\nExamples:\n  prog --name x", env)
			err := Parse(fs, tt.args, env)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse(%q) error = %v, want %v", tt.args, err, tt.wantErr)
			}
			if tt.wantErr == flag.ErrHelp {
				if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "[$TEST_CLI_COUNT]") {
					t.Errorf("help output = %q, want the text and the env variables", out.String())
				}
				return
			}
			if tt.wantErr != nil {
				if out.Len() != 0 {
					t.Errorf("Parse printed %q on error; errors are reported once, by ExitStatus", out.String())
				}
				return
			}
			if *name != tt.wantName || *count != tt.wantCount {
				t.Errorf("Parse(%q) = name %q count %d, want %q %d", tt.args, *name, *count, tt.wantName, tt.wantCount)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	tests := []struct {
		err  error
		want int
		out  string
	}{
		{nil, ExitOK, ""},
		{flag.ErrHelp, ExitOK, ""},
		{Usagef("no PATH"), ExitUsage, "prog: no PATH\nRun 'prog --help' for usage.\n"},
		{fmt.Errorf("cannot open: %w", os.ErrNotExist), ExitFailure, "prog: cannot open: file does not exist\n"},
	}
	for _, tt := range tests {
		var w bytes.Buffer
		if got := ExitStatus(&w, "prog", tt.err); got != tt.want || w.String() != tt.out {
			t.Errorf("ExitStatus(%v) = %d, %q; want %d, %q", tt.err, got, w.String(), tt.want, tt.out)
		}
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := ReadSecret(write("ok", "  s3cret \nsecond line\n")); err != nil || got != "s3cret" {
		t.Errorf("ReadSecret = %q, %v; want the trimmed first line", got, err)
	}
	if _, err := ReadSecret(write("empty", "\n\n")); err == nil {
		t.Error("ReadSecret of an empty file: nil error, want one")
	}
	_, err := ReadSecret(filepath.Join(dir, "missing"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadSecret of a missing file = %v, want ErrNotExist", err)
	}
	p := write("blank-first", "\nhunter2\n")
	if _, err := ReadSecret(p); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ReadSecret error = %v, want an error that does not show the content", err)
	}
}

func TestLogger(t *testing.T) {
	var w bytes.Buffer
	log, err := LogOptions{Format: "json", Level: "warn"}.Logger(&w)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if got := w.String(); strings.Contains(got, "hidden") || !strings.HasPrefix(got, "{") || !strings.Contains(got, `"msg":"shown"`) {
		t.Errorf("json/warn logger wrote %q", got)
	}
	for _, bad := range []LogOptions{{Format: "xml"}, {Level: "loud"}} {
		if _, err := bad.Logger(&w); !errors.Is(err, ErrUsage) {
			t.Errorf("Logger(%+v) error = %v, want ErrUsage", bad, err)
		}
	}
}
