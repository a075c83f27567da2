package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// maxTreeEntries bounds one tree walk so a huge directory cannot make the
// probe's one result line unbounded; datasets the scenarios build are tiny.
const maxTreeEntries = 4096

// tree walks <dir> with lstat (symlinks are listed, never followed) and
// reports every entry with its type, permission bits, size, content
// SHA-256 and symlink target, sorted by path. A walk error (for example a
// missing root) is the result's outcome.
func tree(args []string) (any, error) {
	if err := arity(args, 1, 1); err != nil {
		return nil, err
	}
	root := args[0]
	start := time.Now()
	r := &facts.Result{Action: "tree", Path: root}
	var entries []facts.TreeEntry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if len(entries) >= maxTreeEntries {
			return fmt.Errorf("more than %d entries", maxTreeEntries)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := facts.TreeEntry{Path: filepath.ToSlash(rel), Mode: fmt.Sprintf("%04o", info.Mode().Perm())}
		switch {
		case info.Mode().IsDir():
			e.Type = "dir"
		case info.Mode().IsRegular():
			e.Type = "file"
			e.Size = info.Size()
			if e.SHA256, err = fileDigest(p); err != nil {
				return err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			e.Type = "symlink"
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			e.Type = "other"
		}
		entries = append(entries, e)
		return nil
	})
	if err == nil {
		sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
		r.Tree = entries
		r.Done = int64(len(entries))
	}
	return finish(r, start, err), nil
}

func fileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
