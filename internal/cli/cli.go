// Package cli is the plumbing the programs share: flags, subcommands,
// logging, secrets, signals and exit statuses.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
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

// Main runs a program with a context cancelled on SIGINT or SIGTERM, prints
// its error as one line on stderr and exits with the matching status.
func Main(name string, run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(ExitStatus(os.Stderr, name, err))
}

// StoppedStarting reports whether err is only ctx's end: a SIGINT or
// SIGTERM (Main's context) that came while a daemon was still starting
// (opening its store, reaching a node or a server). That is a stop like
// any other, exit status 0, and it is logged as such; the daemon then
// returns nil. Any other error is returned as it is.
func StoppedStarting(ctx context.Context, log *slog.Logger, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		log.Info("stopped while starting", "err", err)
		return nil
	}
	return err
}

// Reported marks err as already printed for the user: ExitStatus then only
// turns it into an exit status.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return reported{err}
}

type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// Message is how ExitStatus prints err: "name: err", and for a usage error
// a hint naming the help of the command that was misused.
func Message(name string, err error) string {
	if !errors.Is(err, ErrUsage) {
		return fmt.Sprintf("%s: %v", name, err)
	}
	help := name
	var cu commandUsage
	if errors.As(err, &cu) {
		help = cu.command
	}
	return fmt.Sprintf("%s: %v\nRun '%s --help' for usage.", name, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "), help)
}

// ExitStatus prints err (unless Reported) as Message does on w and returns
// the exit status it calls for; flag.ErrHelp is success.
func ExitStatus(w io.Writer, name string, err error) int {
	var r reported
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &r):
	default:
		fmt.Fprintln(w, Message(name, err))
	}
	if errors.Is(err, ErrUsage) {
		return ExitUsage
	}
	return ExitFailure
}

// LogOptions are the logging flags every program has.
type LogOptions struct {
	Format string // "text", "json" or "" (text)
	Level  string // "debug", "info", "warn", "error" or "" (info)
}

// AddFlags registers --log-format and --log-level.
func (o *LogOptions) AddFlags(fs *FlagSet) {
	fs.String(&o.Format, "log-format", "text", "CHIBRARY_LOG_FORMAT", "log format on stderr: `text|json`")
	fs.String(&o.Level, "log-level", "info", "CHIBRARY_LOG_LEVEL", "least severe `LEVEL` logged: debug, info, warn or error")
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

// Secret returns a secret from file when one is given, else from the
// environment variable env. Errors never contain the secret.
func Secret(file, env, flag string, required bool) (string, error) {
	if file != "" {
		return ReadSecret(file)
	}
	if s := strings.TrimSpace(os.Getenv(env)); s != "" {
		return s, nil
	}
	if required {
		return "", Usagef("give --%s or set $%s", flag, env)
	}
	return "", nil
}

// ReadSecret reads the first line of a file, trimmed, refusing an empty
// one. Errors name the file, never the content.
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

// CheckListen checks a listening address given to flag: HOST:PORT or :PORT.
func CheckListen(flag, addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		if _, err := strconv.Atoi(addr); err == nil {
			return Usagef("--%s %s: want HOST:PORT: 127.0.0.1:%s (loopback), or :%s (every address)", flag, addr, addr, addr)
		}
		return Usagef("--%s %q: want HOST:PORT, e.g. 127.0.0.1:8080", flag, addr)
	}
	return nil
}
