package cpuview

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LibraryName is the file `make preload` builds into preload/.
const LibraryName = "libcfsprobe-cpuview.so"

// The preload directory always holds a README, so this compiles whether
// or not the library was built before the binary.
//
//go:embed preload
var preloadFS embed.FS

// Library returns the embedded LD_PRELOAD library, or nil when the binary
// was built without it.
func Library() []byte {
	b, err := preloadFS.ReadFile("preload/" + LibraryName)
	if err != nil {
		return nil
	}
	return b
}

// ErrNoLibrary: the binary was built without the library.
var ErrNoLibrary = errors.New("this cfsprobe was built without the cpuview library, so programs that ask libc (nproc, getconf, Python, C++, nginx, /sys/devices/system/cpu/online) still see every CPU: build it with `make build` (which runs `make preload`)")

// CacheDirs are the directories ExtractLibrary tries, in order: the
// user's cache ($XDG_CACHE_HOME/cfsprobe or ~/.cache/cfsprobe), then
// /tmp/cfsprobe-<uid>.
func CacheDirs(getenv func(string) string) []string {
	var dirs []string
	if x := getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "cfsprobe"))
	} else if h := getenv("HOME"); filepath.IsAbs(h) {
		dirs = append(dirs, filepath.Join(h, ".cache", "cfsprobe"))
	}
	return append(dirs, filepath.Join(os.TempDir(), fmt.Sprintf("cfsprobe-%d", os.Getuid())))
}

// ExtractLibrary writes lib into the first usable directory of dirs, as
// libcfsprobe-cpuview-<hash>.so, and returns its path. A file already
// there with the same content is reused; otherwise it is written to a
// temporary file and renamed, so a concurrent exec never sees half a
// library. Directories are created with mode 0700 and must belong to the
// caller and be writable by nobody else (a library another user could
// replace would run in every program started under the view).
func ExtractLibrary(lib []byte, dirs []string) (string, error) {
	if len(lib) == 0 {
		return "", ErrNoLibrary
	}
	sum := sha256.Sum256(lib)
	name := fmt.Sprintf("libcfsprobe-cpuview-%s.so", hex.EncodeToString(sum[:8]))
	var errs []error
	for _, d := range dirs {
		p, err := extractInto(lib, d, name)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("cannot write the cpuview library: %w", errors.Join(errs...))
}

func extractInto(lib []byte, dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := checkPrivate(dir); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, lib) {
		return p, nil
	}
	f, err := os.CreateTemp(dir, ".lib-*.tmp")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(lib)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
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
