package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store"
)

const moveUsage = `
Usage: resolver move [--data DIR | --store URL] --list NAME CALLNUMBER...
       resolver move [--data DIR | --store URL] --list NAME --message-id ID...

Puts messages in another list: the fix for an import made without
--list, or under the wrong name (importing the same messages again with
the right --list changes nothing: they are duplicates, and the importer
says which list they are in). The bytes and the call numbers stay; the
move is recorded in the store, so it holds across ` + "`resolver reindex`" + `,
reaches mirrors through the change feed, and a running resolver shows the
messages in their new list, threaded with its messages, within 2 seconds
(IMAP and NNTP readers see them leave the old list and arrive, with new
numbers, in the new one). Moving them back is another move.

NAME is a list name as URLs show it: lower-case letters, digits, '.',
'_' and '-' ("Linux-MIPS" is taken as linux-mips). It prints one line
per message. Exits 1 if a message could not be moved (none has that call
number or Message-ID, or it was removed), 2 on bad usage.

Examples:
  resolver move --data /var/lib/chibrary --list linux-mips 2UrKPuW8 3kTMd2xB
  resolver move --list fetchmail-users --message-id 20040712.1234@example.org
  importer --manifest m.jsonl old.mbox && jq -r .callnumber m.jsonl | xargs resolver move --list old-list
`

func move(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st   setup.StoreFlags
		logs cli.LogOptions
		list string
		ids  stringList
	)
	fs := cli.NewFlagSet("resolver move", moveUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	fs.String(&list, "list", "", "CHIBRARY_LIST", "the list `NAME` to move the messages to")
	fs.Var(&ids, "message-id", "", "move the messages with this Message-`ID` (with or without <>; may be given several times)")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if list == "" {
		return cli.Usagef("--list: name the list to move the messages to")
	}
	name := catalog.ListName(list)
	if err := store.CheckList(name); err != nil {
		return cli.Usagef("--list %q: %v", list, err)
	}
	if len(rest) == 0 && len(ids) == 0 {
		return cli.Usagef("name the messages to move: CALLNUMBER... or --message-id ID")
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

	numbers, failed, err := named(ctx, db, "resolver move", rest, ids, stderr)
	if err != nil {
		return err
	}
	moved := 0
	for _, n := range numbers {
		old := ""
		if m, err := db.Get(ctx, n); err == nil {
			old = m.List
		}
		mv, err := db.Move(ctx, n, name)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = lookupError(n.String(), err)
			}
			fmt.Fprintf(stderr, "resolver move: %v\n", err)
			failed++
			continue
		}
		moved++
		switch {
		case old == name:
			fmt.Fprintf(stdout, "%s is in %s already: %s\n", n, name, describe(ctx, db, n))
		case old == "":
			fmt.Fprintf(stdout, "moved %s to %s on %s (archived without a list): %s\n", n, name, mv.Moved.UTC().Format(time.RFC3339), describe(ctx, db, n))
		default:
			fmt.Fprintf(stdout, "moved %s from %s to %s on %s: %s\n", n, old, name, mv.Moved.UTC().Format(time.RFC3339), describe(ctx, db, n))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d messages not moved", failed, failed+moved)
	}
	return nil
}
