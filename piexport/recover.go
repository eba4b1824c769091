package piexport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
)

// recover takes into the state the commits git holds past the heads the
// state records: those of a run stopped after git fast-import moved a
// branch and before the state was written. Each names its message in
// its commit message (trailers); an add's Message-ID is picked again
// from its blob, as it was when written.
func (r *listRun) recover(ctx context.Context) error {
	for e := r.m.Epoch; ; e++ {
		gd := epochDir(r.dir, e)
		if _, err := os.Stat(filepath.Join(gd, "config")); err != nil {
			return nil
		}
		head, err := r.x.head(ctx, gd)
		if err != nil {
			return err
		}
		if e > r.m.Epoch {
			if head == "" {
				return nil
			}
			// A new epoch the state had not recorded yet.
			r.m.Epoch, r.m.Bytes = e, 0
		}
		if head == r.m.Heads[e] {
			continue
		}
		if head == "" {
			return fmt.Errorf("%w: the branch of %s is gone: export this list into a new directory", ErrForeign, gd)
		}
		rng := head
		if old := r.m.Heads[e]; old != "" {
			// The history must go on from where the export left it, not
			// be rewritten (public-inbox-purge) or replaced.
			if _, err := r.x.git(ctx, gd, "merge-base", "--is-ancestor", old, head); err != nil {
				return fmt.Errorf("%w: the history of %s no longer holds commit %s the export wrote last (rewritten?): export this list into a new directory", ErrForeign, gd, old)
			}
			rng = old + ".." + head
		}
		out, err := r.x.git(ctx, gd, "rev-list", "--reverse", "--first-parent", rng)
		if err != nil {
			return fmt.Errorf("%w: epoch %s does not follow on from the commit the export recorded (%v)", ErrForeign, gd, err)
		}
		commits := strings.Fields(string(out))
		// In chunks, so that a whole history (a state file lost) takes
		// the memory of one chunk: the records are written as they come,
		// the head once all are in.
		const chunk = 1000
		var ops []pendingOp
		last := r.m.Last
		r.pmids = map[string]bool{}
		r.precs = map[uint32]record{}
		for _, c := range commits {
			op, err := r.recoverCommit(ctx, gd, c)
			if err != nil {
				return err
			}
			if !op.remove {
				op.rec.Epoch = e
				r.precs[op.num] = op.rec
				r.m.Bytes += op.size
				last = max(last, op.num)
			} else {
				delete(r.precs, op.num)
			}
			r.pmids[op.rec.MID] = !op.remove
			ops = append(ops, op)
			if len(ops) == chunk {
				if err := r.saveRecords(ops); err != nil {
					return err
				}
				ops, r.pmids, r.precs = ops[:0], map[string]bool{}, map[uint32]record{}
			}
		}
		r.pmids, r.precs = nil, nil
		r.m.Last = last
		r.res.Recovered += len(commits)
		r.m.Heads[e] = head
		if err := r.save(ops); err != nil {
			return err
		}
		r.x.log.Info("took into the state the commits of a run cut short", "list", r.list, "epoch", e, "commits", len(commits))
	}
}

func (r *listRun) recoverCommit(ctx context.Context, gd, c string) (pendingOp, error) {
	body, err := r.x.git(ctx, gd, "cat-file", "commit", c)
	if err != nil {
		return pendingOp{}, err
	}
	cn, num, ok := parseTrailers(body)
	if !ok {
		return pendingOp{}, fmt.Errorf("%w: commit %s of %s names no message of the archive", ErrForeign, c, gd)
	}
	names, err := r.x.git(ctx, gd, "ls-tree", "--name-only", c)
	if err != nil {
		return pendingOp{}, err
	}
	switch strings.TrimSpace(string(names)) {
	case "d":
		if rec, ok := r.precs[num]; ok {
			return pendingOp{num: num, rec: rec, remove: true}, nil
		}
		var rec record
		if err := r.db.View(func(tx *bolt.Tx) error {
			var err error
			rec, err = decodeRecord(tx.Bucket(numsBucket).Get(numKey(num)))
			return err
		}); err != nil {
			return pendingOp{}, fmt.Errorf("a removal of %s in %s: %w", cn, gd, err)
		}
		return pendingOp{num: num, rec: rec, remove: true}, nil
	case "m":
		raw, err := r.x.git(ctx, gd, "cat-file", "blob", c+":m")
		if err != nil {
			return pendingOp{}, err
		}
		mid, fresh, err := r.choose(mids(parseHeader(raw)), num)
		if err != nil {
			return pendingOp{}, err
		}
		if fresh {
			return pendingOp{}, fmt.Errorf("%w: commit %s of %s holds a message public-inbox cannot index (no free Message-ID)", ErrForeign, c, gd)
		}
		return pendingOp{num: num, rec: record{CallNumber: cn, Blob: blobID(raw), MID: mid}, size: int64(len(raw))}, nil
	}
	return pendingOp{}, fmt.Errorf("%w: commit %s of %s holds neither m nor d", ErrForeign, c, gd)
}

// parseTrailers reads the call number and list number a commit message
// names (trailers), from a commit object as git cat-file prints it.
func parseTrailers(commit []byte) (cn string, num uint32, ok bool) {
	var gotCN, gotNum bool
	sc := bufio.NewScanner(bytes.NewReader(commit))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, found := strings.CutPrefix(line, "Call-Number: "); found {
			if _, err := callnumber.Parse(v); err == nil {
				cn, gotCN = v, true
			}
		}
		if v, found := strings.CutPrefix(line, "List-Number: "); found {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				num, gotNum = uint32(n), true
			}
		}
	}
	return cn, num, gotCN && gotNum
}
