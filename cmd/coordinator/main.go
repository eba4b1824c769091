// Command coordinator serves a run authority over HTTP. See package
// coordinator for the API, backup and restore.
package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/coordinator"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/shuffle"
)

func main() { cli.Main("coordinator", program.Run) }

var program = cli.Commands{Program: "coordinator", Text: serveUsage, Default: "serve", List: []cli.Command{
	{Name: "serve", Run: serve}, {Name: "backup", Run: backup}, {Name: "bump", Run: bump},
}}

const serveUsage = `
Usage: coordinator [serve] --db runs.db [--listen ADDR] --token-file TOKEN
                   [--scheme mix|bits] [--tls-cert F --tls-key F]
       coordinator backup (--db runs.db | --coordinator URL --token-file F) OUT
       coordinator bump --db runs.db --to N

Serves the run authority in runs.db over HTTP, so that importers and
watchers on other machines can take runs from it (--coordinator URL).
Creates runs.db (a new authority, with --scheme: mix unless told bits) and
the token file (random, mode 0600) if they are missing, once it holds the
address it listens on. --scheme for an existing authority must be its
own. Listens on loopback unless told otherwise. SIGINT or SIGTERM stops it
after requests in flight.

Endpoints: POST /v1/runs, GET /v1/runs/{run}, GET /v1/backup (token
required), GET /healthz, GET /api/v1/version, GET /metrics.

Examples:
  coordinator --db /var/lib/chibrary/runs.db --token-file /etc/chibrary/token
  coordinator --db runs.db --listen 0.0.0.0:7070 --token-file token \
      --tls-cert cert.pem --tls-key key.pem
  CHIBRARY_RUNS_DB=runs.db CHIBRARY_TOKEN_FILE=token coordinator
  curl -H "Authorization: Bearer $(cat token)" -d '{"program":"test"}' \
      http://127.0.0.1:7070/v1/runs
`

func serve(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		cfg    coordinator.Config
		scheme string
		logs   cli.LogOptions
	)
	fs := cli.NewFlagSet("coordinator", serveUsage)
	fs.String(&cfg.DB, "db", "", "CHIBRARY_RUNS_DB", "the run authority database `FILE` (created if missing)")
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
	if cfg.DB == "" {
		return cli.Usagef("--db is required")
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
	return coordinator.Serve(ctx, cfg)
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
