// Package cache writes files cfsprobe carries embedded (the workloads' C
// engine, the cpuview preload library) to a private cache directory, so
// that they can be executed or preloaded.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Dirs are the directories Write tries, in order: the user's cache
// ($XDG_CACHE_HOME/cfsprobe or ~/.cache/cfsprobe), then /tmp/cfsprobe-<uid>.
func Dirs(getenv func(string) string) []string {
	var dirs []string
	if x := getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "cfsprobe"))
	} else if h := getenv("HOME"); filepath.IsAbs(h) {
		dirs = append(dirs, filepath.Join(h, ".cache", "cfsprobe"))
	}
	return append(dirs, filepath.Join(os.TempDir(), fmt.Sprintf("cfsprobe-%d", os.Getuid())))
}

// Write puts content into the first usable directory of dirs as
// prefix<hash>suffix (the hash of the content, so that two cfsprobe
// versions do not overwrite each other's file) with the given mode, and
// returns its path. A file already there with the same content is reused;
// otherwise it is written to a temporary file and renamed, so that a
// concurrent user never sees half a file. Directories are created with
// mode 0700 and must belong to the caller and be writable by nobody else:
// a file another user could replace would run in place of cfsprobe's.
func Write(content []byte, dirs []string, prefix, suffix string, mode os.FileMode) (string, error) {
	sum := sha256.Sum256(content)
	name := prefix + hex.EncodeToString(sum[:8]) + suffix
	var errs []error
	for _, d := range dirs {
		p, err := writeInto(content, d, name, mode)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no cache directory"))
	}
	return "", errors.Join(errs...)
}

func writeInto(content []byte, dir, name string, mode os.FileMode) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := checkPrivate(dir); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() == mode {
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, content) {
			return p, nil
		}
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// checkPrivate refuses a directory that is a symbolic link, belongs to
// another user, or that others may write to.
func checkPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to uid %d", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s may be written by others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}
