// Package cli is the plumbing the programs share: flags with environment
// fallbacks, structured logging, secrets read from files, signal handling
// and exit statuses (0 success, 1 some work failed, 2 bad usage).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"
)

// Exit statuses of every program.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// ErrUsage marks an error as bad usage (exit status 2).
var ErrUsage = errors.New("bad usage")

// Usagef returns a usage error with a message.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// Main runs a program's run function with a context cancelled on SIGINT or
// SIGTERM, prints its error as one line on stderr and exits with the
// matching status. -h/--help exits 0.
func Main(name string, run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(ExitStatus(os.Stderr, name, err))
}

// ExitStatus prints err (if any) as "name: err" on w and returns the exit
// status it calls for.
func ExitStatus(w io.Writer, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(w, "%s: %v\nRun '%s --help' for usage.\n", name, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "), name)
		return ExitUsage
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return ExitFailure
}

// Parse parses args into fs, then fills every flag not given on the command
// line from its environment variable in env (flag name -> variable), so
// that the command line wins over the environment, which wins over the
// default. Parse errors are usage errors; --help prints fs.Usage to fs's
// output (set it with fs.SetOutput; os.Stderr by default).
func Parse(fs *flag.FlagSet, args []string, env map[string]string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // errors are reported once, by ExitStatus
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.Usage()
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, variable := range env {
		if set[name] {
			continue
		}
		v, ok := os.LookupEnv(variable)
		if !ok || v == "" {
			continue
		}
		if fs.Lookup(name) == nil {
			panic("cli: env fallback for unknown flag " + name) // programming error
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%w: $%s: %v", ErrUsage, variable, err)
		}
	}
	fs.SetOutput(out)
	return nil
}

// Usage returns a flag.FlagSet Usage function that prints text (the
// synopsis, a description and examples), then the flags and their
// environment variables.
func Usage(fs *flag.FlagSet, text string, env map[string]string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintln(w, strings.TrimSpace(text))
		fmt.Fprintln(w, "\nFlags:")
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  --%s", f.Name)
			if name != "" {
				fmt.Fprintf(w, " %s", name)
			}
			fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
			if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			}
			for flagName, variable := range env {
				if flagName == f.Name {
					fmt.Fprintf(w, " [$%s]", variable)
				}
			}
			fmt.Fprintln(w)
		})
	}
}

// LogOptions are the logging flags every program has.
type LogOptions struct {
	Format string // "text", "json" or "" (text)
	Level  string // "debug", "info", "warn", "error" or "" (info)
}

// AddFlags registers --log-format and --log-level.
func (o *LogOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&o.Level, "log-level", "info", "least severe level logged: debug, info, warn or error")
}

// Logger returns a structured logger writing to w.
func (o LogOptions) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if o.Level != "" {
		if err := level.UnmarshalText([]byte(o.Level)); err != nil {
			return nil, Usagef("--log-level %q: want debug, info, warn or error", o.Level)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.Format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, Usagef("--log-format %q: want text or json", o.Format)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ReadSecret reads a secret (token, password) from a file: the first line,
// without surrounding white space. It refuses an empty secret. The error
// names the file, never the content.
func ReadSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read secret: %w", err)
	}
	s, _, _ := strings.Cut(string(b), "\n")
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return s, nil
}

// Hostname returns the host name for lease records, or "unknown".
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}
