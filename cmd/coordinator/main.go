// Command coordinator serves a run authority over HTTP. See package
// coordinator for the API, backup and restore.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/riakauthority"
	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/coordinator"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

func main() { cli.Main("coordinator", program.Run) }

var program = cli.Commands{Program: "coordinator", Text: serveUsage, Default: "serve", List: []cli.Command{
	{Name: "serve", Run: serve}, {Name: "backup", Run: backup}, {Name: "bump", Run: bump},
	{Name: "migrate", Run: migrate},
}}

const serveUsage = `
Usage: coordinator [serve] (--db runs.db | --authority URL) [--listen ADDR]
                   --token-file TOKEN [--scheme mix|bits] [--tls-cert F --tls-key F]
       coordinator backup (--db runs.db | --coordinator URL --token-file F) OUT
       coordinator bump --db runs.db --to N
       coordinator migrate --db runs.db --to riak://host:port[,host:port...][/ARCHIVE]

Serves a run authority over HTTP, so that importers and watchers on other
machines can take runs from it (--coordinator URL): the one in runs.db
(--db PATH, short for --authority bolt:PATH), or the one in a Riak
cluster's consistent buckets (--authority riak://...), which any number of
coordinators may serve at once. Creates the authority (with --scheme: mix
unless told bits) and the token file (random, mode 0600) if they are
missing, once it holds the address it listens on. --scheme for an existing
authority must be its own. An existing token file must be readable by its
owner only (chmod 600) and hold at least 32 characters of a random secret
(openssl rand -hex 16). Listens on loopback unless told otherwise. SIGINT
or SIGTERM stops it after requests in flight.

Endpoints: POST /v1/runs, GET /v1/runs/{run}, GET /v1/backup (token
required; runs.db only), GET /healthz, GET /api/v1/version, GET /metrics.

Examples:
  coordinator --db /var/lib/chibrary/runs.db --token-file /etc/chibrary/token
  coordinator --authority riak://r1:8087,r2:8087,r3:8087/lists \
      --listen 0.0.0.0:7070 --token-file /etc/chibrary/token
  coordinator --db runs.db --listen 0.0.0.0:7070 --token-file token \
      --tls-cert cert.pem --tls-key key.pem
  CHIBRARY_RUNS_DB=runs.db CHIBRARY_TOKEN_FILE=token coordinator
  curl -H "Authorization: Bearer $(cat token)" -d '{"program":"test"}' \
      http://127.0.0.1:7070/v1/runs
`

func serve(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		cfg     coordinator.Config
		scheme  string
		authURL string
		logs    cli.LogOptions
	)
	fs := cli.NewFlagSet("coordinator", serveUsage)
	fs.String(&cfg.DB, "db", "", "CHIBRARY_RUNS_DB", "the run authority database `FILE` (created if missing): short for --authority bolt:FILE")
	fs.String(&authURL, "authority", "", "CHIBRARY_AUTHORITY", "the run authority `URL`: bolt:PATH or riak://host:port[,host:port...][/ARCHIVE]\n(created if missing; see docs/authority.md)")
	fs.String(&cfg.Listen, "listen", coordinator.DefaultListen, "CHIBRARY_LISTEN", "`ADDR` to listen on (host:port; port 0 picks a free one)")
	fs.String(&cfg.TokenFile, "token-file", "", "CHIBRARY_TOKEN_FILE", "`FILE` holding the bearer token (created if missing);\n$CHIBRARY_TOKEN holds the token itself otherwise")
	fs.String(&scheme, "scheme", "", "CHIBRARY_SCHEME", "shuffle scheme of a new authority: `mix|bits` (mix by default);\nan existing authority keeps its own, and asking it for another is an error")
	fs.String(&cfg.TLSCert, "tls-cert", "", "CHIBRARY_TLS_CERT", "TLS certificate `FILE` (PEM), with --tls-key")
	fs.String(&cfg.TLSKey, "tls-key", "", "CHIBRARY_TLS_KEY", "TLS private key `FILE` (PEM), with --tls-cert")
	logs.AddFlags(fs)
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	switch {
	case cfg.DB != "" && authURL != "":
		return cli.Usagef("give --db or --authority, not both")
	case authURL != "":
		u, err := setup.ParseAuthorityURL(authURL)
		if err != nil {
			return err
		}
		if u.Bolt != "" {
			cfg.DB = u.Bolt
		} else {
			cfg.Riak = &riakauthority.Options{Nodes: u.Riak, Archive: u.Archive}
		}
	case cfg.DB == "":
		return cli.Usagef("--db is required (or --authority)")
	}
	if scheme != "" {
		if cfg.Scheme, err = shuffle.ParseScheme(scheme); err != nil {
			return cli.Usagef("--scheme %q: want mix or bits", scheme)
		}
	}
	if cfg.TokenFile == "" {
		if cfg.Token, err = cli.Secret("", "CHIBRARY_TOKEN", "token-file", true); err != nil {
			return cli.Usagef("--token-file is required (or $CHIBRARY_TOKEN)")
		}
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return cli.Usagef("--tls-cert and --tls-key go together")
	}
	if cfg.Logger, err = logs.Logger(stderr); err != nil {
		return err
	}
	// Serve returns nil on SIGINT or SIGTERM once serving; before, while
	// it opens the authority (a Riak cluster slow to answer), a signal is
	// a stop all the same.
	return cli.StoppedStarting(ctx, cfg.Logger, coordinator.Serve(ctx, cfg))
}

const backupUsage = `
Usage: coordinator backup --db runs.db OUT
       coordinator backup --coordinator URL --token-file F OUT

Writes a consistent copy of the run authority database to OUT (replacing
OUT only once the copy is complete and opens as the same authority).
While a coordinator runs, it holds runs.db locked: back up through it with
--coordinator. Restore: stop the coordinator, copy the backup over runs.db,
run 'coordinator bump' past every run the stores have seen, start it.

Examples:
  coordinator backup --db runs.db runs-$(date +%F).db
  coordinator backup --coordinator http://127.0.0.1:7070 --token-file token runs.bak
`

func backup(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		db, url, tokenFile string
		logs               cli.LogOptions
	)
	fs := cli.NewFlagSet("coordinator backup", backupUsage)
	fs.String(&db, "db", "", "CHIBRARY_RUNS_DB", "the run authority database `FILE`, when no coordinator holds it")
	fs.String(&url, "coordinator", "", "CHIBRARY_COORDINATOR", "`URL` of the running coordinator to back up through")
	fs.String(&tokenFile, "token-file", "", "CHIBRARY_TOKEN_FILE", "`FILE` holding the coordinator's token (or $CHIBRARY_TOKEN)")
	logs.AddFlags(fs)
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return cli.Usagef("backup wants one output file")
	}
	out := rest[0]
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	if url == "" {
		if db == "" {
			return cli.Usagef("backup wants --db or --coordinator")
		}
		id, err := coordinator.BackupFile(ctx, db, out, 2*time.Second)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "backed up authority %s from %s to %s\n", id, db, out)
		return nil
	}
	token, err := cli.Secret(tokenFile, "CHIBRARY_TOKEN", "token-file", true)
	if err != nil {
		return err
	}
	c, err := coordinator.NewClient(url, token, authority.Holder{}, coordinator.ClientOptions{Logger: log})
	if err != nil {
		return cli.Usagef("%v", err)
	}
	id, err := c.BackupTo(ctx, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up authority %s from %s to %s\n", id, url, out)
	return nil
}

const bumpUsage = `
Usage: coordinator bump --db runs.db --to N

Moves the authority's next run forward to N, so that no run below N is
ever issued. Run it after restoring a backup, with N above the highest run
any store has seen. It never moves backwards. Stop the coordinator first.

Example:
  coordinator bump --db runs.db --to 250000
`

func bump(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var db, to string
	fs := cli.NewFlagSet("coordinator bump", bumpUsage)
	fs.String(&db, "db", "", "CHIBRARY_RUNS_DB", "the run authority database `FILE`")
	fs.String(&to, "to", "", "", "the new next run, `N`")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	if db == "" || to == "" {
		return cli.Usagef("bump wants --db and --to")
	}
	n, err := strconv.ParseUint(to, 10, 64)
	if err != nil {
		return cli.Usagef("--to %q: want a run number", to)
	}
	from, err := coordinator.BumpFile(ctx, db, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "next run of %s: %d (was %d)\n", db, n, from)
	return nil
}

const migrateUsage = `
Usage: coordinator migrate --db runs.db --to riak://host:port[,host:port...][/ARCHIVE]

Moves the run authority in runs.db into the Riak cluster's strongly
consistent buckets, beside the archive ARCHIVE: the same ID, scheme and
key, every lease, and a next run no lower than the file's, so that no
message is renumbered and no run issued twice. runs.db is marked as moved
first: from then on it refuses to issue runs, naming the URL, so that a
forgotten coordinator or program on it cannot number again.

Stop the coordinator serving runs.db (and any program taking runs from it)
first: migrate holds the file for its whole run. Until migrate has
finished, no run is issued anywhere; if it is interrupted (killed, a
network failure), run it again: it carries on where it stopped. It
refuses to move the file into an archive that holds another authority.
Then serve the authority with coordinator --authority riak://..., or
let programs take runs from it directly with --authority riak://...
(docs/authority.md).

Example:
  coordinator migrate --db /var/lib/chibrary/runs.db --to riak://r1:8087,r2:8087,r3:8087/lists
`

func migrate(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		db, to string
		logs   cli.LogOptions
	)
	fs := cli.NewFlagSet("coordinator migrate", migrateUsage)
	fs.String(&db, "db", "", "CHIBRARY_RUNS_DB", "the run authority database `FILE` to move")
	fs.String(&to, "to", "", "", "the Riak cluster and archive to move it to, `riak://host:port[,host:port...][/ARCHIVE]`")
	logs.AddFlags(fs)
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	if db == "" || to == "" {
		return cli.Usagef("migrate wants --db and --to")
	}
	u, err := setup.ParseAuthorityURL(to)
	if err != nil {
		return err
	}
	if u.Bolt != "" {
		return cli.Usagef("--to %q: want riak://host:port[,host:port...][/ARCHIVE]", to)
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	opts := riakauthority.Options{Nodes: u.Riak, Archive: u.Archive, Logger: log}
	if err := checkBinding(ctx, db, to, log); err != nil {
		return err
	}
	rep, err := coordinator.MigrateFile(ctx, db, opts.URL(), opts, 2*time.Second)
	if err != nil {
		return err
	}
	if rep.Done {
		fmt.Fprintf(stdout, "authority %s was moved already from %s to %s (%d leases, next run %d)\n", rep.ID, db, opts.URL(), rep.Leases, rep.Next)
		return nil
	}
	fmt.Fprintf(stdout, "moved authority %s from %s to %s: %d leases (%d copied now), next run %d; %s now refuses to issue runs\n",
		rep.ID, db, opts.URL(), rep.Leases, rep.Copied, rep.Next, db)
	return nil
}

// checkBinding refuses to move the authority in db into a Riak archive
// whose store is bound to another authority: its runs would all be
// refused there. A cluster without the archive's store (an authority kept
// apart from its messages) is not checked.
func checkBinding(ctx context.Context, db, url string, log *slog.Logger) error {
	a, err := authority.Open(ctx, db, authority.Options{ReadOnly: true, LockTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	id := a.ID()
	a.Close()
	st, err := setup.OpenStore(ctx, url, log)
	if err != nil {
		log.Warn("cannot open the archive's store to check its authority; migrating all the same", "err", err)
		return nil
	}
	defer st.Close()
	b, err := st.Binding(ctx)
	switch {
	case errors.Is(err, store.ErrUnbound):
		return nil
	case err != nil:
		return fmt.Errorf("cannot read the archive's binding: %w", err)
	case b.Authority != id:
		return fmt.Errorf("cannot move %s into %s: the archive there is bound to the authority %s, and %s is the authority %s, whose runs it would refuse", db, url, b.Authority, db, id)
	}
	return nil
}
