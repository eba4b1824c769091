package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type testFlags struct {
	name  string
	count int
	loud  bool
}

func newFlags() (*FlagSet, *testFlags) {
	var v testFlags
	fs := NewFlagSet("prog", "Usage: prog [flags] PATH...\n\nExamples:\n  prog --name x a b")
	fs.String(&v.name, "name", "default", "TEST_CLI_NAME", "a name")
	fs.Int(&v.count, "count", 1, "TEST_CLI_COUNT", "a count")
	fs.Bool(&v.loud, "loud", false, "", "a switch")
	return fs, &v
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		want     testFlags
		wantArgs []string
		wantErr  error
	}{
		{name: "defaults", want: testFlags{"default", 1, false}},
		{name: "environment over default", env: map[string]string{"TEST_CLI_NAME": "env", "TEST_CLI_COUNT": "7"}, want: testFlags{"env", 7, false}},
		{name: "command line over environment", args: []string{"--name", "flag"}, env: map[string]string{"TEST_CLI_NAME": "env"}, want: testFlags{"flag", 1, false}},
		{name: "empty variable is unset", env: map[string]string{"TEST_CLI_NAME": ""}, want: testFlags{"default", 1, false}},
		{name: "bad variable is a usage error", env: map[string]string{"TEST_CLI_COUNT": "many"}, wantErr: ErrUsage},
		{name: "unknown flag is a usage error", args: []string{"--nope"}, wantErr: ErrUsage},
		{name: "unknown flag after the arguments too", args: []string{"a", "--nope"}, wantErr: ErrUsage},
		{name: "missing value", args: []string{"a", "--count"}, wantErr: ErrUsage},
		{name: "flags before the arguments", args: []string{"--name", "n", "--loud", "a", "b"}, want: testFlags{"n", 1, true}, wantArgs: []string{"a", "b"}},
		{name: "flags after the arguments", args: []string{"a", "b", "--name", "n", "--count=3", "--loud"}, want: testFlags{"n", 3, true}, wantArgs: []string{"a", "b"}},
		{name: "flags between the arguments", args: []string{"a", "-name", "n", "b", "-loud", "c"}, want: testFlags{"n", 1, true}, wantArgs: []string{"a", "b", "c"}},
		{name: "a boolean takes no value", args: []string{"--loud", "a"}, want: testFlags{"default", 1, true}, wantArgs: []string{"a"}},
		{name: "a value may look like a flag", args: []string{"--name", "--loud", "a"}, want: testFlags{"--loud", 1, false}, wantArgs: []string{"a"}},
		{name: "-- ends the flags", args: []string{"--loud", "--", "--name", "-"}, want: testFlags{"default", 1, true}, wantArgs: []string{"--name", "-"}},
		{name: "- is an argument (stdin)", args: []string{"-", "--count", "2"}, want: testFlags{"default", 2, false}, wantArgs: []string{"-"}},
		{name: "help", args: []string{"a", "--help"}, wantErr: flag.ErrHelp},
		{name: "version", args: []string{"--version", "a"}, wantErr: flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs, got := newFlags()
			var out bytes.Buffer
			args, err := fs.Parse(tt.args, &out)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse(%q) error = %v, want %v", tt.args, err, tt.wantErr)
			}
			switch {
			case slices.Contains(tt.args, "--help"):
				if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "[$TEST_CLI_COUNT]") || !strings.Contains(out.String(), "--version") {
					t.Errorf("help output = %q, want the text, the env variables and --version", out.String())
				}
				return
			case slices.Contains(tt.args, "--version"):
				if !strings.HasPrefix(out.String(), "prog ") || !strings.Contains(out.String(), "go1") {
					t.Errorf("--version output = %q, want the program and its build", out.String())
				}
				return
			case tt.wantErr != nil:
				if out.Len() != 0 {
					t.Errorf("Parse printed %q on error; errors are reported once, by ExitStatus", out.String())
				}
				return
			}
			if *got != tt.want || !slices.Equal(args, tt.wantArgs) {
				t.Errorf("Parse(%q) = %+v %q, want %+v %q", tt.args, *got, args, tt.want, tt.wantArgs)
			}
			flags := tt.args
			if i := slices.Index(flags, "--"); i >= 0 {
				flags = flags[:i]
			}
			for _, name := range []string{"name", "count"} {
				if fs.IsSet(name) != (slices.ContainsFunc(flags, func(a string) bool { return strings.Contains(a, "-"+name) }) || tt.env["TEST_CLI_"+strings.ToUpper(name)] != "") {
					t.Errorf("IsSet(%q) = %v after %q with env %v", name, fs.IsSet(name), tt.args, tt.env)
				}
			}
		})
	}
}

// TestUnknownFlag: an unknown flag is named with two dashes, and a flag
// a typo away is suggested.
func TestUnknownFlag(t *testing.T) {
	tests := []struct{ arg, want string }{
		{"--nmae", "unknown flag --nmae (did you mean --name?)"},
		{"--cont", "unknown flag --cont (did you mean --count?)"},
		{"-loudd", "unknown flag --loudd (did you mean --loud?)"},
		{"--verbose", "unknown flag --verbose"},
		{"--x", "unknown flag --x"},
	}
	for _, tt := range tests {
		fs, _ := newFlags()
		_, err := fs.Parse([]string{tt.arg}, io.Discard)
		if !errors.Is(err, ErrUsage) || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want a usage error ending %q", tt.arg, err, tt.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"list", "list", 0}, {"lsit", "list", 1}, {"lis", "list", 1}, {"lists", "list", 1}, {"lust", "list", 1},
		{"data", "store", 5}, {"", "abc", 3}, {"café", "cafe", 1},
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestCommands(t *testing.T) {
	var ran string
	var gotArgs []string
	cmd := func(name string) Command {
		return Command{Name: name, Run: func(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
			ran, gotArgs = name, args
			// A flag set of its own: --file takes a value.
			var file string
			fs := NewFlagSet("prog "+name, "Usage: prog "+name)
			fs.String(&file, "file", "", "", "a file")
			rest, err := fs.Parse(args, stdout)
			if err != nil {
				return err
			}
			return NoArgs(rest)
		}}
	}
	prog := Commands{Program: "prog", Text: "Usage: prog get|put", List: []Command{cmd("get"), cmd("put")}}
	withDefault := prog
	withDefault.Default = "put"
	tests := []struct {
		name     string
		c        Commands
		args     []string
		wantRan  string
		wantArgs []string
		wantErr  error
		wantOut  string // the start of stdout, or of the error
	}{
		{"first argument", prog, []string{"get", "--file", "a"}, "get", []string{"--file", "a"}, nil, ""},
		// A flag's value is never the command: the command comes first.
		{"a value that names a command", withDefault, []string{"--file", "get"}, "put", []string{"--file", "get"}, nil, ""},
		{"a value that names a command, after the command", prog, []string{"put", "--file", "get"}, "put", []string{"--file", "get"}, nil, ""},
		{"flags before the command", prog, []string{"--file", "a", "get"}, "", nil, ErrUsage, "the command comes first, before its flags: prog get --file a"},
		{"flags before a command, with a default", withDefault, []string{"--file", "a", "get"}, "put", []string{"--file", "a", "get"}, ErrUsage,
			`unexpected argument "get" (if "get" is meant as the command, it comes first: prog get --file a)`},
		{"missing", prog, nil, "", nil, ErrUsage, "missing command: get or put"},
		{"unknown", prog, []string{"frob", "get"}, "", nil, ErrUsage, `unknown command "frob"`},
		{"only flags", prog, []string{"--x", "1"}, "", nil, ErrUsage, "missing command (get or put) before --x"},
		{"help", prog, []string{"--help"}, "", nil, flag.ErrHelp, "Usage: prog get|put"},
		{"help command", prog, []string{"help", "get"}, "get", []string{"--help"}, flag.ErrHelp, "Usage: prog get"},
		{"help unknown command", prog, []string{"help", "frob"}, "", nil, ErrUsage, `unknown command "frob"`},
		{"version", prog, []string{"--version"}, "", nil, flag.ErrHelp, "prog "},
		{"default", withDefault, []string{"--file", "1"}, "put", []string{"--file", "1"}, nil, ""},
		{"default's help", withDefault, []string{"help"}, "put", []string{"--help"}, flag.ErrHelp, "Usage: prog put"},
		{"default does not hide a command", withDefault, []string{"get"}, "get", []string{}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran, gotArgs = "", nil
			var out bytes.Buffer
			err := tt.c.Run(context.Background(), tt.args, nil, &out, io.Discard)
			got := out.String()
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				got = strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
			}
			if !errors.Is(err, tt.wantErr) || ran != tt.wantRan || !slices.Equal(gotArgs, tt.wantArgs) || !strings.HasPrefix(got, tt.wantOut) {
				t.Errorf("Run(%q) = %v, ran %q %q, printed %q; want %v, %q %q, %q", tt.args, err, ran, gotArgs, out.String(), tt.wantErr, tt.wantRan, tt.wantArgs, tt.wantOut)
			}
		})
	}
}

// A usage error of a command names the command's help; one of the
// default command, or of no command, the program's.
func TestCommandUsageHint(t *testing.T) {
	bad := func(context.Context, []string, io.Reader, io.Writer, io.Writer) error { return Usagef("missing PATH") }
	prog := Commands{Program: "prog", Default: "serve", List: []Command{{Name: "serve", Run: bad}, {Name: "get", Run: bad}}}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get"}, "prog: missing PATH\nRun 'prog get --help' for usage.\n"},
		{[]string{"serve"}, "prog: missing PATH\nRun 'prog serve --help' for usage.\n"},
		{nil, "prog: missing PATH\nRun 'prog --help' for usage.\n"},
		{[]string{"help", "frob"}, "prog: unknown command \"frob\": want serve or get\nRun 'prog --help' for usage.\n"},
	}
	for _, tt := range tests {
		var w bytes.Buffer
		err := prog.Run(context.Background(), tt.args, nil, io.Discard, io.Discard)
		if status := ExitStatus(&w, "prog", err); status != ExitUsage || w.String() != tt.want {
			t.Errorf("prog %q: exit %d, printed %q; want %d, %q", tt.args, status, w.String(), ExitUsage, tt.want)
		}
		if got := Message("prog", err) + "\n"; got != tt.want {
			t.Errorf("Message(prog %q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_CLI_SECRET", " from-env ")
	if s, err := Secret(file, "TEST_CLI_SECRET", "secret-file", true); s != "from-file" || err != nil {
		t.Errorf("Secret(file) = %q, %v; want the file's", s, err)
	}
	if s, err := Secret("", "TEST_CLI_SECRET", "secret-file", true); s != "from-env" || err != nil {
		t.Errorf("Secret(env) = %q, %v; want the environment's", s, err)
	}
	t.Setenv("TEST_CLI_SECRET", "")
	if _, err := Secret("", "TEST_CLI_SECRET", "secret-file", true); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--secret-file") {
		t.Errorf("Secret(none, required) error = %v, want a usage error naming the flag", err)
	}
	if s, err := Secret("", "TEST_CLI_SECRET", "secret-file", false); s != "" || err != nil {
		t.Errorf("Secret(none) = %q, %v; want nothing", s, err)
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
		{Reported(errors.New("printed already")), ExitFailure, ""},
		{Reported(Usagef("printed already")), ExitUsage, ""},
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

func TestCheckListen(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8080", ":8080", "[::1]:0", "localhost:80"} {
		if err := CheckListen("listen", ok); err != nil {
			t.Errorf("CheckListen(%q) = %v", ok, err)
		}
	}
	for addr, says := range map[string]string{"8080": "127.0.0.1:8080 (loopback), or :8080", "localhost": "want HOST:PORT", "": "want HOST:PORT", "1.2.3.4:": "want HOST:PORT"} {
		if err := CheckListen("listen", addr); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), says) {
			t.Errorf("CheckListen(%q) = %v, want a usage error saying %q", addr, err, says)
		}
	}
}
