// Command resolver serves an archive's messages by call number over HTTP,
// and prints one message or what its call number says from the command
// line. See package resolver for the routes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store"
)

func main() { cli.Main("resolver", program.Run) }

var program = cli.Commands{Program: "resolver", Text: usage, List: []cli.Command{
	{Name: "serve", Run: serve}, {Name: "get", Run: get}, {Name: "inspect", Run: inspect},
	{Name: "reindex", Run: reindexCommand}, {Name: "compact", Run: compact},
	{Name: "remove", Run: remove}, {Name: "removals", Run: removals},
	{Name: "move", Run: move}, {Name: "export", Run: export},
}}

// run is the program, for tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return program.Run(ctx, args, stdin, stdout, stderr)
}

const usage = `
Usage: resolver serve [--data DIR | --store URL] [--catalog PATH] [--listen 127.0.0.1:8080]
       resolver get [--data DIR | --store URL] CALLNUMBER
       resolver inspect [--json] [--data DIR | --store URL] CALLNUMBER
       resolver reindex [--data DIR | --store URL] [--catalog PATH]
       resolver compact [--data DIR | --store URL] [--to URL]
       resolver remove [--data DIR | --store URL] [--reason TEXT] CALLNUMBER...
       resolver removals [--data DIR | --store URL] [--json]
       resolver move [--data DIR | --store URL] --list NAME CALLNUMBER...
       resolver export [--data DIR | --store URL] --public-inbox OUT

Serves an archive over HTTP, its lists, months and threads and each
message by call number (serve), writes one stored message to standard
output (get), shows a call number's version, run and sequence and the
lease of its run (inspect), builds the catalog of lists and threads
anew from the store (reindex), writes the store anew, compressed, into
a new file (compact), takes messages down for good (remove), or lists
those taken down (removals), or puts messages in another list (move),
or writes the lists as public-inbox inboxes (export).
An archive on a read-only file system (a
snapshot, a backup) is read read-only.
Run 'resolver COMMAND --help' for the flags of a command; --version prints
the version.

Examples:
  resolver serve --data /var/lib/chibrary
  resolver reindex --data /var/lib/chibrary
  resolver get --data ./archive 2UrKPuW8 > message.eml
  resolver inspect --json --store bolt:/srv/archive/messages.db 2UrKPuW8
`

var serveUsage = `
Usage: resolver serve [--data DIR | --store URL] [--catalog PATH]
                      [--listen 127.0.0.1:8080] [--base-url URL]
                      [--imap ADDR] [--nntp ADDR] [--nntp-prefix PREFIX]
                      [--imaps ADDR] [--nntps ADDR] [--tls-cert FILE --tls-key FILE]
                      [--nntp-own-numbers] [--public-inbox OUT]
                      [--list-descriptions FILE]

Serves the archive over HTTP until SIGINT or SIGTERM, then finishes the
requests in flight. The archive must exist (import into it first): serve
never creates one, so a mistyped --data is an error, not an empty
archive. Listens on loopback unless told otherwise: put a reverse proxy
(TLS, access control) in front of it for the world. An
archive this process cannot write (a read-only file system: a snapshot, a
backup) is served read-only, without the lock file; the log says so.

A list's page shows what the list is about: the line of
--list-descriptions FILE that names it ("linux-mips  The Linux port to
MIPS processors"), else the phrase of its mail's List-Id; and where to
subscribe (List-Subscribe) and post (List-Post), and a chart of its
messages per month.

Lists, months and threads come from the catalog: DATA/catalog.db with
--data, the catalog.db beside the bbolt file with --store bolt:PATH,
--catalog PATH for a Riak store. serve creates it if missing (its pages
answer 503 while it is first built), and follows the store into it: a
message stored by an importer or the watcher is on its pages within
2 seconds. When another resolver follows the catalog, it is served
read-only; when it cannot be opened at all (a read-only archive without
one), message pages still work and the catalog's pages answer 503.

Routes:
` + routesHelp() + `
With --public-inbox OUT (a directory that resolver export --public-inbox
writes: OUT/LIST/git/N.git), the export is served to public-inbox's and
grokmirror's own mirroring tools (docs/public-inbox.md): each epoch to
git clone over git's smart HTTP (read-only; at most --max-git-processes
at once, others 503), /LIST/manifest.js.gz and /manifest.js.gz to
public-inbox-clone and grok-pull:
  public-inbox-clone http://HOST/LIST/ LIST

Mail and news readers (read-only; docs/imap-nntp.md):
  --imap ADDR   IMAP: every list is a mailbox named as the list; any user
                name and password log in, or AUTHENTICATE ANONYMOUS. UIDs
                survive restarts and reindex; messages removed or moved
                are expunged, new ones announced (IDLE).
  --nntp ADDR   NNTP: every list is the newsgroup PREFIX.LIST
                (--nntp-prefix); article numbers are the IMAP UIDs.
                On a mirror's data directory NNTP is refused: its numbers
                are not the origin's (--nntp-own-numbers serves them).
  Plain text is for loopback: off it, give --tls-cert and --tls-key
  (STARTTLS), or use --imaps and --nntps (TLS from the first byte).
  Connections are bounded (--max-connections, --max-connections-per-ip)
  and closed after --idle-timeout of silence; their metrics are on
  /metrics (chibrary_imap_*, chibrary_nntp_*).

Examples:
  resolver serve --data /var/lib/chibrary
  resolver serve --data /var/lib/chibrary --base-url https://lists.example.org
  resolver serve --store bolt:/srv/archive/messages.db --listen 127.0.0.1:9000
  resolver serve --store riak://r1:8087/lists --catalog /var/lib/chibrary/catalog.db
  CHIBRARY_DATA=/var/lib/chibrary CHIBRARY_LISTEN=127.0.0.1:8080 resolver serve
  resolver serve --data /var/lib/chibrary --imap 127.0.0.1:1143 --nntp 127.0.0.1:1119
  resolver serve --data /var/lib/chibrary --public-inbox /var/lib/chibrary/public-inbox
  resolver serve --data /var/lib/chibrary --imaps :993 --nntps :563 --nntp-prefix org.example \
      --tls-cert /etc/chibrary/fullchain.pem --tls-key /etc/chibrary/key.pem
`

func serve(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st                                 setup.StoreFlags
		logs                               cli.LogOptions
		listen, cat, baseURL, changesToken string
		spoolDir, descriptionsFile         string
		pi                                 piFlags
		changesPublic                      bool
		rf                                 readerFlags
	)
	fs := cli.NewFlagSet("resolver serve", serveUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	rf.AddFlags(fs)
	fs.String(&listen, "listen", "127.0.0.1:8080", "CHIBRARY_LISTEN", "`ADDR` to listen on (host:port; port 0 picks a free one)")
	fs.String(&cat, "catalog", "", "CHIBRARY_CATALOG", "the catalog file `PATH` (default: DATA/catalog.db, or beside a bolt: store)")
	fs.String(&baseURL, "base-url", "", "CHIBRARY_BASE_URL", "the archive's public `URL`, for the links of Atom feeds (default: from each request)")
	fs.String(&changesToken, "changes-token-file", "", "CHIBRARY_CHANGES_TOKEN_FILE", "`FILE` holding a token the change feed (/api/v1/changes) asks of mirrors (default: the feed is public)")
	fs.Bool(&changesPublic, "changes-public", false, "CHIBRARY_CHANGES_PUBLIC", "with --changes-token-file, serve the change feed to anyone all the same: the token's holders get slots of their own that anonymous readers cannot take")
	fs.String(&spoolDir, "spool-dir", "", "CHIBRARY_SPOOL_DIR", "`DIR` for the files mbox downloads, large messages and attachments are served from while read, over HTTP, IMAP and NNTP (default: the system's temporary directory)")
	fs.String(&pi.out, "public-inbox", "", "CHIBRARY_PUBLIC_INBOX", "serve the public-inbox export in `OUT` (OUT/LIST/git/N.git) to git clone, public-inbox-clone and grok-pull (default: none)")
	fs.Int(&pi.processes, "max-git-processes", resolver.DefaultGitProcesses, "CHIBRARY_MAX_GIT_PROCESSES", "with --public-inbox, the git processes run at once for clones and fetches; more wait briefly, then get 503")
	fs.String(&descriptionsFile, "list-descriptions", "", "CHIBRARY_LIST_DESCRIPTIONS", "`FILE` of list descriptions, a line each: the list's name, then what it is about (default: what the lists' mail says in List-Id)")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	if err := pi.check(); err != nil {
		return err
	}
	var descriptions map[string]string
	if descriptionsFile != "" {
		if descriptions, err = resolver.ReadListDescriptions(descriptionsFile); err != nil {
			return err
		}
	}
	if err := cli.CheckListen("listen", listen); err != nil {
		return err
	}
	if changesPublic && changesToken == "" {
		return cli.Usagef("--changes-public goes with --changes-token-file: without a token the change feed is public already")
	}
	if err := rf.check(); err != nil {
		return err
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	// A signal while the store or the catalog is still being opened (a
	// Riak node slow to answer) is a stop like one while serving.
	return cli.StoppedStarting(ctx, log, serveArchive(ctx, log, st, &rf, listen, cat, baseURL, changesToken, changesPublic, spoolDir, pi, descriptions))
}

// piFlags are serve's flags of the public-inbox export.
type piFlags struct {
	out       string
	processes int
}

func (f piFlags) check() error {
	if f.processes < 1 {
		return cli.Usagef("--max-git-processes must be at least 1")
	}
	if f.out == "" {
		return nil
	}
	fi, err := os.Stat(f.out)
	if err != nil {
		return fmt.Errorf("cannot serve --public-inbox %s: %w (resolver export --public-inbox writes it)", f.out, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cannot serve --public-inbox %s: not a directory", f.out)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("cannot serve --public-inbox: git is not installed (it serves the clones)")
	}
	return nil
}

// serveArchive opens the archive and serves it until ctx is done.
func serveArchive(ctx context.Context, log *slog.Logger, st setup.StoreFlags, rf *readerFlags, listen, cat, baseURL, changesToken string, changesPublic bool, spoolDir string, pi piFlags, descriptions map[string]string) error {
	files, err := st.Files()
	if err != nil {
		return err
	}
	catPath, err := catalogPath(&st, cat)
	if err != nil {
		return err
	}
	// A mirror's state is beside its store (see mirror).
	if err := rf.checkMirror(files.Dir); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	defer ln.Close()
	var rd *readers
	if rf.any() {
		if rd, err = rf.listen(ctx); err != nil {
			return err
		}
		defer rd.close()
	}
	// A reader never creates an archive: a typo in --data is said, not
	// served as an empty archive.
	db, err := st.OpenReader(ctx, log, true)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := resolver.Options{Logger: log, BaseURL: baseURL, SpoolDir: spoolDir, ChangesPublic: changesPublic,
		PublicInbox: pi.out, MaxGitProcesses: pi.processes, ListDescriptions: descriptions}
	if changesToken != "" {
		if opts.ChangesToken, err = cli.ReadSecret(changesToken); err != nil {
			return err
		}
	}
	// The keeper keeps the catalog for HTTP, IMAP and NNTP alike: it
	// follows the store into it, rebuilds it when damaged or deleted,
	// and opens a new one another resolver made. It stops once they
	// have: requests in flight may read the catalog.
	k := keeper.Open(ctx, db, keeper.Options{Logger: log, Path: catPath, Follow: &catalog.FollowOptions{}})
	defer k.Start(ctx)()
	opts.Catalogs = k
	srv := resolver.New(db, opts)
	if rd == nil {
		return srv.Serve(ctx, ln)
	}
	return runAll(ctx,
		func(ctx context.Context) error { return srv.Serve(ctx, ln) },
		func(ctx context.Context) error {
			return rd.serve(ctx, rf, k, db, srv.Registerer(), log, opts.SpoolDir)
		})
}

const getUsage = `
Usage: resolver get [--data DIR | --store URL] CALLNUMBER

Writes the message stored under CALLNUMBER to standard output, byte for
byte as archived. Exits 1 if the archive has no such message (or it was
removed: the error says when and why), 2 if CALLNUMBER is not 8 letters
and digits.

Examples:
  resolver get --data /var/lib/chibrary 2UrKPuW8 > message.eml
  resolver get 2UrKPuW8 | less
`

func get(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	db, text, err := openOne(ctx, "resolver get", getUsage, args, nil, stdout, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	n, _, err := resolver.Resolve(ctx, db, text)
	if err != nil {
		return lookupError(text, err)
	}
	m, err := db.Get(ctx, n)
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
  resolver inspect --data /var/lib/chibrary 2UrKPuW8
  resolver inspect --json 2UrKPuW8 | jq .lease
`

func inspect(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var asJSON bool
	db, text, err := openOne(ctx, "resolver inspect", inspectUsage, args, func(fs *cli.FlagSet) {
		fs.Bool(&asJSON, "json", false, "", "print one JSON object")
	}, stdout, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	in, err := resolver.Inspect(ctx, db, text)
	if err != nil {
		return lookupError(text, err)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(in)
	}
	return in.WriteText(stdout)
}

// openOne parses the flags (the store's, the logs' and those more adds)
// and the one CALLNUMBER argument, checks its syntax, then opens the
// archive, which must exist.
func openOne(ctx context.Context, name, usage string, args []string, more func(*cli.FlagSet), stdout, stderr io.Writer) (store.Store, string, error) {
	var (
		st   setup.StoreFlags
		logs cli.LogOptions
	)
	fs := cli.NewFlagSet(name, usage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	if more != nil {
		more(fs)
	}
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return nil, "", err
	}
	switch len(rest) {
	case 0:
		return nil, "", cli.Usagef("missing CALLNUMBER")
	case 1:
	default:
		return nil, "", cli.Usagef("one CALLNUMBER only, got %d arguments", len(rest))
	}
	if err := resolver.CheckSyntax(rest[0]); err != nil {
		return nil, "", lookupError(rest[0], err)
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return nil, "", err
	}
	db, err := st.OpenReader(ctx, log, true)
	return db, rest[0], err
}

// lookupError turns a lookup's error into the command's: a malformed call
// number is bad usage (exit 2), an unknown one "no such message" (exit 1).
func lookupError(text string, err error) error {
	var removed *store.RemovedError
	switch {
	case errors.Is(err, resolver.ErrMalformed):
		var pe *callnumber.ParseError
		if errors.As(err, &pe) {
			return cli.Usagef("%s", pe.Explain())
		}
		return cli.Usagef("%v", err)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no message in this archive has call number %s", text)
	case errors.As(err, &removed):
		r := removed.Removal
		msg := fmt.Sprintf("message %s was removed from this archive on %s", text, r.Removed.UTC().Format(time.RFC3339))
		if r.Reason != "" {
			msg += ": " + r.Reason
		}
		return errors.New(msg)
	}
	return err
}

// routesHelp lists the resolver's routes, two columns.
func routesHelp() string {
	var b strings.Builder
	for _, r := range resolver.Routes() {
		fmt.Fprintf(&b, "  %-34s%s\n", r.Path, r.Doc)
	}
	return b.String()
}
