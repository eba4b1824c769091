package piexport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// branch is the branch public-inbox writes each epoch's history on.
const branch = "refs/heads/master"

// epochDir is the git directory of epoch n of the inbox at dir.
func epochDir(dir string, n int) string {
	return filepath.Join(dir, "git", strconv.Itoa(n)+".git")
}

// git runs the git binary in gitDir and returns its standard output.
func (x *exporter) git(ctx context.Context, gitDir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, x.opts.Git, append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = gitEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), gitDir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// gitEnv is the environment of git: the user's and system's
// configuration left out, so that no setting of theirs changes what is
// written.
func gitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
}

// head returns the commit of an epoch's branch, "" when it has none.
func (x *exporter) head(ctx context.Context, gitDir string) (string, error) {
	out, err := x.git(ctx, gitDir, "for-each-ref", "--format=%(objectname)", branch)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// initInbox makes dir a v2 inbox if it is not one yet: all.git, the
// description (left as it is when present: an operator's words) and
// inbox.lock, by which public-inbox tells a v2 inbox from a v1 one.
func (x *exporter) initInbox(dir, description string) error {
	if err := initBare(filepath.Join(dir, "all.git")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "git"), 0o755); err != nil {
		return err
	}
	desc := filepath.Join(dir, "description")
	if _, err := os.Stat(desc); errors.Is(err, os.ErrNotExist) {
		if err := writeAtomic(desc, []byte(description+"\n")); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "inbox.lock"), os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// initEpoch makes epoch n of the inbox at dir, as public-inbox's
// MultiGit.add_epoch does: a bare repository whose configuration
// includes all.git's, and whose objects all.git borrows (its
// objects/info/alternates lists every epoch, newest first).
func (x *exporter) initEpoch(dir string, n int) error {
	gd := epochDir(dir, n)
	if err := initBare(gd); err != nil {
		return err
	}
	cfg := filepath.Join(gd, "config")
	b, err := os.ReadFile(cfg)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("../../all.git/config")) {
		b = append(b, "[include]\n\tpath = ../../all.git/config\n"...)
		if err := writeAtomic(cfg, b); err != nil {
			return err
		}
	}
	var alt strings.Builder
	for i := n; i >= 0; i-- {
		if _, err := os.Stat(epochDir(dir, i)); err == nil {
			fmt.Fprintf(&alt, "../../git/%d.git/objects\n", i)
		}
	}
	return writeAtomic(filepath.Join(dir, "all.git", "objects", "info", "alternates"), []byte(alt.String()))
}

// initBare makes a bare repository as public-inbox does (Import.pm,
// init_bare): HEAD on master, bitmaps written at repack.
func initBare(gd string) error {
	if _, err := os.Stat(filepath.Join(gd, "config")); err == nil {
		return nil
	}
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gd, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(gd, "HEAD"), []byte("ref: "+branch+"\n"), 0o644); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(gd, "config"), []byte("[core]\n\trepositoryFormatVersion = 0\n\tfilemode = true\n\tbare = true\n[repack]\n\twriteBitmaps = true\n"))
}

// writeAtomic writes a file whole or not at all: a temporary file beside
// it, synced, then renamed over it.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// blobID is the git object name of a blob of data.
func blobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// fastImport writes commits on an epoch's branch through one git
// fast-import process (git-fast-import(1)), as public-inbox does: the
// branch moves only when the process ends well, all at once.
type fastImport struct {
	cmd    *exec.Cmd
	w      *bufio.Writer
	in     io.WriteCloser
	stderr bytes.Buffer
	from   string // the commit the next one follows ("" for the first)
	mark   int
}

func (x *exporter) startImport(ctx context.Context, gitDir, tip string) (*fastImport, error) {
	cmd := exec.CommandContext(ctx, x.opts.Git, "--git-dir="+gitDir, "fast-import", "--quiet", "--done", "--date-format=raw")
	cmd.Env = gitEnv()
	fi := &fastImport{cmd: cmd, from: tip}
	cmd.Stderr = &fi.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start git fast-import: %w", err)
	}
	fi.in, fi.w = in, bufio.NewWriterSize(in, 1<<16)
	return fi, nil
}

// commit writes one commit: the blob data (or the existing blob oid when
// data is nil) at path, alone in the tree.
func (fi *fastImport) commit(path string, data []byte, oid, author, committer, msg string) {
	ref := oid
	if data != nil {
		fi.mark++
		fmt.Fprintf(fi.w, "blob\nmark :%d\ndata %d\n", fi.mark, len(data))
		fi.w.Write(data)
		fi.w.WriteString("\n")
		ref = ":" + strconv.Itoa(fi.mark)
	}
	fi.mark++
	fmt.Fprintf(fi.w, "commit %s\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s\n", branch, fi.mark, author, committer, len(msg), msg)
	if fi.from != "" {
		fmt.Fprintf(fi.w, "from %s\n", fi.from)
	}
	// The tree holds the one file, as public-inbox's clean_tree_v2
	// leaves it.
	fmt.Fprintf(fi.w, "deleteall\nM 100644 %s %s\n\n", ref, path)
	fi.from = ":" + strconv.Itoa(fi.mark)
}

// finish ends the stream and waits for git to write the pack and move
// the branch.
func (fi *fastImport) finish() error {
	fi.w.WriteString("done\n")
	err := fi.w.Flush()
	if cerr := fi.in.Close(); err == nil {
		err = cerr
	}
	if werr := fi.cmd.Wait(); werr != nil {
		return fmt.Errorf("git fast-import: %w: %s", werr, strings.TrimSpace(fi.stderr.String()))
	}
	if err != nil {
		return fmt.Errorf("cannot write to git fast-import: %w", err)
	}
	return nil
}

// abort stops the process without moving the branch.
func (fi *fastImport) abort() {
	fi.in.Close()
	if fi.cmd.Process != nil {
		fi.cmd.Process.Kill()
	}
	fi.cmd.Wait()
}
