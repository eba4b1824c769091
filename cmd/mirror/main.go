// Command mirror keeps a copy of another archive that serves every one of
// its URLs: it follows the origin's change feed into a store of its own,
// with the origin's call numbers, leases and removals. See package mirror.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mirror"
)

const usage = `
Usage: mirror --from URL [--data DIR | --store URL] [--once]
              [--token-file F] [--state FILE] [--metrics-listen ADDR]
              [--read-timeout DURATION] [--accept-mass-removal]

Keeps a copy of the archive at URL (its resolver: https://lists.example.org/)
in this store, under the same call numbers with the same leases, so that a
resolver serving this store answers every URL of the origin: change the
host name, and every link still works. The origin's removals are applied
here too. A mirror's own resolver serves the same change feed, so a mirror
of a mirror works as well.

mirror reads the origin's change feed (GET /api/v1/changes), page by page,
and once it has caught up, keeps following it (a request that waits at
the origin until something new is stored: a message is here seconds after
the origin stored it). --once catches up and exits. Where it stands is
kept in a state file (by default DATA/mirror/HOST-HASH.json), saved once
what came before is durably stored: a mirror killed at any moment, or
stopped with SIGINT or SIGTERM, carries on where it stood when run again.

The origin is not trusted: every message's digest is checked, its size
bounded (64 MiB), its call number and its run's lease checked against the
origin's run authority, and the store refuses a number it holds with other
bytes. Anything of that kind stops the mirror with exit status 1 and says
what; nothing wrong is stored. An answer may hold no more records than
the mirror asked for (1,000), and what it holds is stored as it arrives:
an origin sending without end cannot grow the mirror's memory. A URL that
answers a web page rather than a change feed is said so at once. Passing
failures (the network, the origin restarting, an origin that sends
nothing for --read-timeout in the middle of an answer) are tried again
with backoff; with --once, 8 times (a stalled origin, twice), then it
exits 1 saying why.

Removals are the origin's to make, within bounds: a removal dated in the
future is refused, and so is an answer that removes more than 100
messages this mirror holds: none of them is removed, the mirror stops
(exit status 1) and says so. If the origin did remove them on purpose (a wave of spam), run
once with --accept-mass-removal to apply them; a mirror run with it
applies every removal it is sent, however many.

The store is bound to the origin's run authority: a local importer cannot
number messages into a mirror. To make a mirror the new origin (the
origin's disk lost), see "Restore from a mirror" in docs/mirrors.md.

On a terminal it shows its progress; --metrics-listen serves Prometheus
metrics (messages, bytes, removals, errors, the time of the last sync).
Exit status: 0 when done (--once) or stopped, 1 on an error, 2 on bad
usage.

Examples:
  mirror --from https://lists.example.org/ --data /var/lib/chibrary-mirror
  mirror --from https://lists.example.org/ --data ./copy --once
  mirror --from https://lists.example.org/ --data ./copy --once --accept-mass-removal
  mirror --from http://127.0.0.1:8080/ --store riak://r1:8087/mirror --state /var/lib/mirror.json
`

func main() { cli.Main("mirror", run) }

func run(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		readTimeout                           time.Duration
		st                                    setup.StoreFlags
		logs                                  cli.LogOptions
		o                                     mirror.Options
		once                                  bool
		tokenFile, metrics, state, waitString string
	)
	fs := cli.NewFlagSet("mirror", usage)
	fs.String(&o.From, "from", "", "CHIBRARY_MIRROR_FROM", "the origin's `URL` (its resolver, http:// or https://) (required)")
	fs.Bool(&once, "once", false, "", "catch up with the origin, then exit")
	fs.String(&tokenFile, "token-file", "", "CHIBRARY_MIRROR_TOKEN_FILE", "`FILE` holding the origin's change feed token, if it asks for one ($CHIBRARY_MIRROR_TOKEN holds the token itself)")
	fs.String(&state, "state", "", "CHIBRARY_MIRROR_STATE", "state `FILE` (the cursor); default DATA/mirror/HOST-HASH.json (beside a bolt: store), required with a Riak --store without --data")
	fs.String(&metrics, "metrics-listen", "", "CHIBRARY_METRICS_LISTEN", "serve Prometheus metrics on `ADDR`/metrics (off by default)")
	fs.String(&waitString, "wait", "30s", "", "how long (`DURATION`, at most 60s) one request waits at the origin for something new, once caught up")
	fs.Duration(&readTimeout, "read-timeout", mirror.DefaultReadTimeout, "CHIBRARY_MIRROR_READ_TIMEOUT", "give an answer up (and ask again) when the origin sends nothing for `DURATION` in the middle of it")
	fs.Bool(&o.AcceptMassRemoval, "accept-mass-removal", false, "CHIBRARY_MIRROR_ACCEPT_MASS_REMOVAL", fmt.Sprintf("apply every removal the origin sends, even of more than %d messages held here in one answer (refused otherwise, none applied)", mirror.DefaultMaxRemovals))
	st.AddFlags(fs)
	logs.AddFlags(fs)
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	if metrics != "" {
		if err := cli.CheckListen("metrics-listen", metrics); err != nil {
			return err
		}
	}
	if o.From == "" {
		return cli.Usagef("--from is required: the origin's URL")
	}
	if _, err := mirror.ParseOrigin(o.From); err != nil {
		return cli.Usagef("--from: %v", err)
	}
	if o.Wait, err = time.ParseDuration(waitString); err != nil || o.Wait <= 0 || o.Wait > mirror.MaxWait {
		return cli.Usagef("--wait %q: want a duration up to %v", waitString, mirror.MaxWait)
	}
	if readTimeout <= 0 {
		return cli.Usagef("--read-timeout %v: want a positive duration", readTimeout)
	}
	o.ReadTimeout = readTimeout
	files, err := st.Files()
	if err != nil {
		return err
	}
	if state == "" {
		if err := files.Need("--state FILE", "the default state file"); err != nil {
			return err
		}
	}
	if o.Token, err = cli.Secret(tokenFile, "CHIBRARY_MIRROR_TOKEN", "token-file", false); err != nil {
		return err
	}
	o.StatePath = state
	if o.StatePath == "" {
		o.StatePath = mirror.StatePathFor(files.Dir, o.From)
	}
	if o.Logger, err = logs.Logger(stderr); err != nil {
		return err
	}
	db, err := st.Open(ctx, o.Logger)
	if err != nil {
		if once {
			return err
		}
		// Following, a signal while the store is still being opened (a
		// Riak node slow to answer) is a stop like one later.
		return cli.StoppedStarting(ctx, o.Logger, err)
	}
	defer db.Close()
	o.Store = db
	if metrics != "" {
		reg := prometheus.NewRegistry()
		o.Metrics = mirror.NewMetrics(reg)
		srv, err := httpserve.ServeMetrics(metrics, reg, o.Logger)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	progress := cli.NewCountProgress(stderr, o.Logger, "msgs")
	defer progress.Finish()
	total := originTotal(ctx, o.From)
	start := time.Now()
	o.Progress = func(s mirror.Stats) {
		progress.Update("mirror", fmt.Sprintf("%d new, %d removals", s.New, s.Removals), s.Messages, total,
			"messages", s.Messages, "new", s.New, "removals", s.Removals, "bytes", s.Bytes)
	}
	m, err := mirror.New(o)
	if err != nil {
		return err
	}
	o.Logger.Info("mirroring", "from", o.From, "state", o.StatePath, "cursor", string(m.State().Cursor), "once", once)
	if once {
		s, err := m.CatchUp(ctx)
		progress.Finish()
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return fmt.Errorf("stopped before catching up with %s, after %d messages; its position is saved: run it again to continue", o.From, s.Messages)
		}
		if err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		fmt.Fprintf(stderr, "mirrored %d messages (%d new), %d removals in %.1f s (%.0f msg/s); caught up with %s; highest run %d\n",
			s.Messages, s.New, s.Removals, secs, float64(s.Messages)/max(secs, 1e-9), o.From, m.State().HighestRun)
		return nil
	}
	return m.Run(ctx)
}

// originTotal asks the origin how many messages it holds, for the
// progress bar; 0 when it cannot say.
func originTotal(ctx context.Context, from string) int64 {
	u, err := mirror.ParseOrigin(from)
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("api/v1/stats").String(), nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var s struct{ Messages int64 }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&s) != nil {
		return 0
	}
	return s.Messages
}
