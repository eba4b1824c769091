// Command coordinator serves a run authority over HTTP. See package
// coordinator for the API, backup and restore.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/coordinator"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/shuffle"
)

func main() { cli.Main("coordinator", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			return serve(ctx, args[1:], stderr)
		case "backup":
			return backup(ctx, args[1:], stdout, stderr)
		case "bump":
			return bump(ctx, args[1:], stdout, stderr)
		}
	}
	return serve(ctx, args, stderr)
}

const serveUsage = `
Usage: coordinator [serve] --db runs.db [--listen ADDR] --token-file TOKEN
                   [--scheme bits|mix] [--tls-cert F --tls-key F]
       coordinator backup (--db runs.db | --coordinator URL --token-file F) OUT
       coordinator bump --db runs.db --to N

Serves the run authority in runs.db over HTTP, so that importers and
watchers on other machines can take runs from it (--coordinator URL).
Creates runs.db (a new authority; --scheme applies only then) and the token
file (random, mode 0600) if they are missing. Listens on loopback unless
told otherwise. SIGINT or SIGTERM stops it after requests in flight.

Endpoints: POST /v1/runs, GET /v1/runs/{run}, GET /v1/backup (token
required), GET /healthz, GET /metrics.

Examples:
  coordinator --db /var/lib/chibrary/runs.db --token-file /etc/chibrary/token
  coordinator --db runs.db --listen 0.0.0.0:7070 --token-file token \
      --tls-cert cert.pem --tls-key key.pem
  CHIBRARY_RUNS_DB=runs.db CHIBRARY_TOKEN_FILE=token coordinator
  curl -H "Authorization: Bearer $(cat token)" -d '{"program":"test"}' \
      http://127.0.0.1:7070/v1/runs
`

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	var (
		cfg    coordinator.Config
		scheme string
		logs   cli.LogOptions
	)
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.StringVar(&cfg.DB, "db", "", "the run authority database (created if missing)")
	fs.StringVar(&cfg.Listen, "listen", coordinator.DefaultListen, "address to listen on")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token (created if missing);\n$CHIBRARY_TOKEN holds the token itself otherwise")
	fs.StringVar(&scheme, "scheme", "", "shuffle scheme of a new authority: bits (default) or mix")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate file (PEM), with --tls-key")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "TLS private key file (PEM), with --tls-cert")
	logs.AddFlags(fs)
	env := map[string]string{
		"db": "CHIBRARY_RUNS_DB", "listen": "CHIBRARY_LISTEN", "token-file": "CHIBRARY_TOKEN_FILE",
		"scheme": "CHIBRARY_SCHEME", "tls-cert": "CHIBRARY_TLS_CERT", "tls-key": "CHIBRARY_TLS_KEY",
		"log-format": "CHIBRARY_LOG_FORMAT", "log-level": "CHIBRARY_LOG_LEVEL",
	}
	fs.Usage = cli.Usage(fs, serveUsage, env)
	if err := cli.Parse(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if cfg.DB == "" {
		return cli.Usagef("--db is required")
	}
	if scheme != "" {
		s, err := shuffle.ParseScheme(scheme)
		if err != nil {
			return cli.Usagef("--scheme %q: want bits or mix", scheme)
		}
		cfg.Scheme = s
	}
	if cfg.TokenFile == "" {
		cfg.Token = os.Getenv("CHIBRARY_TOKEN")
		if cfg.Token == "" {
			return cli.Usagef("--token-file is required (or $CHIBRARY_TOKEN)")
		}
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return cli.Usagef("--tls-cert and --tls-key go together")
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	cfg.Logger = log
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

func backup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var db, url, tokenFile string
	var logs cli.LogOptions
	fs := flag.NewFlagSet("coordinator backup", flag.ContinueOnError)
	fs.StringVar(&db, "db", "", "the run authority database, when no coordinator holds it")
	fs.StringVar(&url, "coordinator", "", "URL of the running coordinator to back up through")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the coordinator's token (or $CHIBRARY_TOKEN)")
	logs.AddFlags(fs)
	env := map[string]string{
		"db": "CHIBRARY_RUNS_DB", "coordinator": "CHIBRARY_COORDINATOR", "token-file": "CHIBRARY_TOKEN_FILE",
		"log-format": "CHIBRARY_LOG_FORMAT", "log-level": "CHIBRARY_LOG_LEVEL",
	}
	fs.Usage = cli.Usage(fs, backupUsage, env)
	if err := cli.Parse(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("backup wants one output file")
	}
	out := fs.Arg(0)
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
	token, err := readToken(tokenFile)
	if err != nil {
		return err
	}
	c, err := coordinator.NewClient(url, token, authority.Holder{}, coordinator.ClientOptions{Logger: log})
	if err != nil {
		return cli.Usagef("%v", err)
	}
	var id string
	err = coordinator.SaveBackup(ctx, out, "", func(w io.Writer) error {
		var err error
		id, err = c.Backup(ctx, w)
		return err
	})
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

func bump(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var db, to string
	fs := flag.NewFlagSet("coordinator bump", flag.ContinueOnError)
	fs.StringVar(&db, "db", "", "the run authority database")
	fs.StringVar(&to, "to", "", "the new next run")
	env := map[string]string{"db": "CHIBRARY_RUNS_DB"}
	fs.Usage = cli.Usage(fs, bumpUsage, env)
	if err := cli.Parse(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
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

func readToken(path string) (string, error) {
	if path != "" {
		return cli.ReadSecret(path)
	}
	if t := os.Getenv("CHIBRARY_TOKEN"); t != "" {
		return t, nil
	}
	return "", cli.Usagef("--token-file is required with --coordinator (or $CHIBRARY_TOKEN)")
}
