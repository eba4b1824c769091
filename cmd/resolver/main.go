// Command resolver serves an archive's messages by call number over HTTP,
// and prints one message or what its call number says from the command
// line. See package resolver for the routes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/setup"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store"
)

func main() { cli.Main("resolver", run) }

const usage = `
Usage: resolver serve [--data DIR | --store URL] [--listen 127.0.0.1:8080]
       resolver get [--data DIR | --store URL] CALLNUMBER
       resolver inspect [--json] [--data DIR | --store URL] CALLNUMBER
       resolver compact [--data DIR | --store URL] [--to URL]

Serves an archive's messages by call number over HTTP (serve), writes one
stored message to standard output (get), shows a call number's
version, run and sequence and the lease of its run (inspect), or writes
the store anew, compressed, into a new file (compact).
Run 'resolver COMMAND --help' for the flags of a command.

Examples:
  resolver serve --data /var/lib/chibrary
  resolver get --data ./archive 3kTMd2xB > message.eml
  resolver inspect --json --store bolt:/srv/archive/messages.db 3kTMd2xB
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cli.Usagef("missing command: serve, get, inspect or compact")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "get":
		return get(ctx, args[1:], stdout, stderr)
	case "inspect":
		return inspect(ctx, args[1:], stdout, stderr)
	case "compact":
		return compact(ctx, args[1:], stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stderr, usage[1:])
		return flag.ErrHelp
	}
	return cli.Usagef("unknown command %q: want serve, get, inspect or compact", args[0])
}

// common are the flags of every command.
type common struct {
	store setup.StoreFlags
	logs  cli.LogOptions
	env   map[string]string
}

func newFlagSet(name string, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet("resolver "+name, flag.ContinueOnError)
	c.store.AddFlags(fs)
	c.logs.AddFlags(fs)
	c.env = map[string]string{"log-format": "CHIBRARY_LOG_FORMAT", "log-level": "CHIBRARY_LOG_LEVEL"}
	maps.Copy(c.env, c.store.Env())
	return fs
}

// usageTo is cli.Usage writing the help to w (the command's stderr)
// rather than os.Stderr. cli.Parse silences the usage a parse error would
// print (the error says it in one line), and so does this.
func usageTo(w io.Writer, fs *flag.FlagSet, text string, env map[string]string) func() {
	usage := cli.Usage(fs, text, env)
	return func() {
		if fs.Output() == io.Discard {
			return
		}
		fs.SetOutput(w)
		usage()
	}
}

// openExisting opens the store of an archive that must exist: get and
// inspect only read, and must not create an empty store by mistake.
func (c *common) openExisting(ctx context.Context, log *slog.Logger) (store.Store, error) {
	if c.store.Store == "" {
		path := filepath.Join(c.store.Data, setup.MessagesFile)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no archive in %s: %w", c.store.Data, err)
		}
	}
	return c.store.Open(ctx, log)
}

const serveUsage = `
Usage: resolver serve [--data DIR | --store URL] [--listen 127.0.0.1:8080]

Serves the archive over HTTP until SIGINT or SIGTERM, then finishes the
requests in flight. Listens on loopback unless told otherwise: put a
reverse proxy (TLS, access control) in front of it for the world.

Routes: GET /{callnumber} (HTML), /{callnumber}/raw (message/rfc822),
/api/v1/messages/{callnumber} (JSON), /m/{message-id}, /api/v1/stats,
/healthz, /metrics.

Examples:
  resolver serve --data /var/lib/chibrary
  resolver serve --store bolt:/srv/archive/messages.db --listen 127.0.0.1:9000
  CHIBRARY_DATA=/var/lib/chibrary CHIBRARY_LISTEN=127.0.0.1:8080 resolver serve
`

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	var (
		c      common
		listen string
	)
	fs := newFlagSet("serve", &c)
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	c.env["listen"] = "CHIBRARY_LISTEN"
	fs.Usage = usageTo(stderr, fs, serveUsage, c.env)
	if err := cli.Parse(fs, args, c.env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	log, err := c.logs.Logger(stderr)
	if err != nil {
		return err
	}
	st, err := c.store.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	return resolver.New(st, resolver.Options{Logger: log}).Serve(ctx, ln)
}

const getUsage = `
Usage: resolver get [--data DIR | --store URL] CALLNUMBER

Writes the message stored under CALLNUMBER to standard output, byte for
byte as archived. Exits 1 if the archive has no such message, 2 if
CALLNUMBER is not a call number.

Examples:
  resolver get --data /var/lib/chibrary 3kTMd2xB > message.eml
  resolver get 3kTMd2xB | less
`

func get(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("get", &c)
	fs.Usage = usageTo(stderr, fs, getUsage, c.env)
	text, err := parseOne(fs, args, c.env)
	if err != nil {
		return err
	}
	log, err := c.logs.Logger(stderr)
	if err != nil {
		return err
	}
	st, err := c.openExisting(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	n, _, err := resolver.Resolve(ctx, st, text)
	if err != nil {
		return lookupError(text, err)
	}
	m, err := st.Get(ctx, n)
	if err != nil {
		return lookupError(text, err)
	}
	if _, err := stdout.Write(m.Raw); err != nil {
		return fmt.Errorf("cannot write the message: %w", err)
	}
	return nil
}

const inspectUsage = `
Usage: resolver inspect [--json] [--data DIR | --store URL] CALLNUMBER

Shows what a stored message's call number says: its version, run and
sequence, the lease of its run as the store recorded it (authority,
nonce, program, host, pid, note, issued-at; never the key), and the
message's Message-ID, list, digest, size and time of archiving.
With --json, one JSON object:
{"callnumber":..,"version":..,"run":..,"sequence":..,"lease":{..},...}

Examples:
  resolver inspect --data /var/lib/chibrary 3kTMd2xB
  resolver inspect --json 3kTMd2xB | jq .lease
`

func inspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		c      common
		asJSON bool
	)
	fs := newFlagSet("inspect", &c)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.Usage = usageTo(stderr, fs, inspectUsage, c.env)
	text, err := parseOne(fs, args, c.env)
	if err != nil {
		return err
	}
	log, err := c.logs.Logger(stderr)
	if err != nil {
		return err
	}
	st, err := c.openExisting(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := resolver.Inspect(ctx, st, text)
	if err != nil {
		return lookupError(text, err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(in)
	}
	return in.WriteText(stdout)
}

// parseOne parses flags and the one CALLNUMBER argument, and checks its
// syntax before anything is opened.
func parseOne(fs *flag.FlagSet, args []string, env map[string]string) (string, error) {
	if err := cli.Parse(fs, args, env); err != nil {
		return "", err
	}
	switch fs.NArg() {
	case 0:
		return "", cli.Usagef("missing CALLNUMBER")
	case 1:
	default:
		return "", cli.Usagef("one CALLNUMBER only, got %d arguments", fs.NArg())
	}
	text := fs.Arg(0)
	if _, err := callnumber.Parse(text); err != nil {
		return "", cli.Usagef("%v", err)
	}
	return text, nil
}

// lookupError turns a lookup's error into the command's: a malformed call
// number is bad usage (exit 2), an unknown one "not found" (exit 1).
func lookupError(text string, err error) error {
	switch {
	case errors.Is(err, resolver.ErrMalformed):
		var pe *callnumber.ParseError
		if errors.As(err, &pe) {
			return cli.Usagef("%v", pe)
		}
		return cli.Usagef("%v", err)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%s: not found", text)
	}
	return err
}
