package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store"
)

const removeUsage = `
Usage: resolver remove [--data DIR | --store URL] [--reason TEXT] [--yes] CALLNUMBER...
       resolver remove [--data DIR | --store URL] [--reason TEXT] [--yes] --message-id ID...

Takes messages down for good: a poster's request, a leaked password or
address, spam that passed the list, a court order. Each message leaves a
removal record in the store (its call number, digest, date and the
reason, never its content): its page, raw bytes, attachments and JSON
answer 410 Gone with the date and the reason; its thread keeps its place
("a message removed on DATE") so that replies stay where they were; lists,
months, search, feeds, downloads and /m/ drop it within 2 seconds of a
running resolver; importing the same bytes again, or the watcher fetching
them again, reports "removed" and never stores them under a new number.
The call number is never given to another message.

The reason is public (resolver removals, /api/v1/removals): keep it short
and free of what was removed ("at the author's request", "spam").

On a bbolt store the bytes leave the disk at the next compaction: run
` + "`resolver compact`" + ` after removing. Copies already downloaded or
mirrored elsewhere are out of reach of any removal.

On a terminal, remove shows the messages and asks before removing them;
--yes, or standard input that is not a terminal, does not ask. It prints
one line per message removed. Exits 1 if a message could not be removed
(none has that call number or Message-ID), 2 on bad usage.

Examples:
  resolver remove --data /var/lib/chibrary --reason "at the author's request" 2UrKPuW8
  resolver remove --message-id 20040712.1234@example.org --reason spam
  resolver remove --yes 2UrKPuW8 3kTMd2xB < /dev/null
`

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// named returns the messages that call numbers (texts) and Message-IDs
// name, in the order named, each once; what names none is said on stderr
// under the command's name and counted as failed.
func named(ctx context.Context, db store.Store, command string, texts, ids []string, stderr io.Writer) ([]callnumber.Number, int, error) {
	var (
		numbers []callnumber.Number
		failed  int
	)
	seen := map[callnumber.Number]bool{}
	add := func(n callnumber.Number) {
		if !seen[n] {
			seen[n] = true
			numbers = append(numbers, n)
		}
	}
	for _, text := range texts {
		n, _, err := resolver.Resolve(ctx, db, text)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", command, lookupError(text, err))
			failed++
			continue
		}
		add(n)
	}
	for _, id := range ids {
		id = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(id), "<"), ">")
		found, err := db.ByMessageID(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if len(found) == 0 {
			fmt.Fprintf(stderr, "%s: no message in this archive has Message-ID <%s>\n", command, id)
			failed++
		}
		for _, n := range found {
			add(n)
		}
	}
	return numbers, failed, nil
}

func remove(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		st     setup.StoreFlags
		logs   cli.LogOptions
		reason string
		yes    bool
		ids    stringList
	)
	fs := cli.NewFlagSet("resolver remove", removeUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	fs.String(&reason, "reason", "", "", "the public `TEXT` of why (one line, at most 300 bytes)")
	fs.Bool(&yes, "yes", false, "", "do not ask, even on a terminal")
	fs.Var(&ids, "message-id", "", "remove the messages with this Message-`ID` (with or without <>; may be given several times)")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if len(rest) == 0 && len(ids) == 0 {
		return cli.Usagef("name the messages to remove: CALLNUMBER... or --message-id ID")
	}
	if err := store.CheckReason(reason); err != nil {
		return cli.Usagef("--reason: %v", err)
	}
	for _, text := range rest {
		if err := resolver.CheckSyntax(text); err != nil {
			return lookupError(text, err)
		}
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	db, err := st.OpenReader(ctx, log, true)
	if err != nil {
		return err
	}
	defer db.Close()
	rm := db

	numbers, failed, err := named(ctx, db, "resolver remove", rest, ids, stderr)
	if err != nil {
		return err
	}

	if len(numbers) > 0 && !yes && isTerminal(stdin) {
		fmt.Fprintf(stderr, "These %d messages will be removed for good", len(numbers))
		if reason != "" {
			fmt.Fprintf(stderr, " (reason, public: %q)", reason)
		}
		fmt.Fprintln(stderr, ":")
		for _, n := range numbers {
			fmt.Fprintf(stderr, "  %s\n", describe(ctx, db, n))
		}
		fmt.Fprint(stderr, "Remove them? [y/N] ")
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return errors.New("nothing removed")
		}
	}
	removed := 0
	for _, n := range numbers {
		what := describe(ctx, db, n)
		r, err := rm.Remove(ctx, n, reason)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = lookupError(n.String(), err)
			}
			fmt.Fprintf(stderr, "resolver remove: %v\n", err)
			failed++
			continue
		}
		removed++
		fmt.Fprintf(stdout, "removed %s on %s: %s\n", n, r.Removed.UTC().Format(time.RFC3339), what)
	}
	if removed > 0 && strings.HasPrefix(st.URL(), "bolt:") {
		fmt.Fprintln(stderr, "The removed bytes leave the disk at the next compaction: run `resolver compact` with the same --data or --store.")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d messages not removed", failed, failed+removed)
	}
	return nil
}

// describe says which message n is, in one line of printable text: its
// date, sender and subject (or that it was removed already).
func describe(ctx context.Context, db store.Store, n callnumber.Number) string {
	m, err := db.Get(ctx, n)
	var re *store.RemovedError
	switch {
	case errors.As(err, &re):
		return fmt.Sprintf("%s, removed already on %s", n, re.Removal.Removed.UTC().Format(time.RFC3339))
	case err != nil:
		return fmt.Sprintf("%s (%v)", n, err)
	}
	meta, _ := mailmsg.Parse(m.Raw)
	line := fmt.Sprintf("%s  %s  %s  %s", n, meta.Date, meta.From, meta.Subject)
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, line)
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

const removalsUsage = `
Usage: resolver removals [--data DIR | --store URL] [--json]

Lists the messages removed from the archive (resolver remove): call
number, when and why, oldest first; with --json, as a JSON array of
{"callnumber", "removed_at", "reason"}, as GET /api/v1/removals answers.

Examples:
  resolver removals --data /var/lib/chibrary
  resolver removals --json | jq -r '.[].callnumber'
`

func removals(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st     setup.StoreFlags
		logs   cli.LogOptions
		asJSON bool
	)
	fs := cli.NewFlagSet("resolver removals", removalsUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	fs.Bool(&asJSON, "json", false, "", "print a JSON array")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	db, err := st.OpenReader(ctx, log, true)
	if err != nil {
		return err
	}
	defer db.Close()
	list, err := db.Removals(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		type removal struct {
			CallNumber string    `json:"callnumber"`
			RemovedAt  time.Time `json:"removed_at"`
			Reason     string    `json:"reason"`
		}
		out := make([]removal, 0, len(list))
		for _, r := range list {
			out = append(out, removal{r.Number.String(), r.Removed.UTC(), r.Reason})
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if len(list) == 0 {
		fmt.Fprintln(stderr, "No message was removed from this archive.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CALLNUMBER\tREMOVED\tREASON")
	for _, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Number, r.Removed.UTC().Format(time.RFC3339), r.Reason)
	}
	return tw.Flush()
}
