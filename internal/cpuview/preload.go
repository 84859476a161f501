package cpuview

import (
	"embed"
	"errors"
	"fmt"

	"github.com/cfsprobe/cfsprobe/internal/cache"
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

// CacheDirs are the directories ExtractLibrary tries (cache.Dirs).
func CacheDirs(getenv func(string) string) []string { return cache.Dirs(getenv) }

// ExtractLibrary writes lib into the first usable directory of dirs, as
// libcfsprobe-cpuview-<hash>.so, and returns its path (cache.Write: reused
// when unchanged, written atomically, in a directory only the caller may
// write to: a library another user could replace would run in every
// program started under the view).
func ExtractLibrary(lib []byte, dirs []string) (string, error) {
	if len(lib) == 0 {
		return "", ErrNoLibrary
	}
	p, err := cache.Write(lib, dirs, "libcfsprobe-cpuview-", ".so", 0o644)
	if err != nil {
		return "", fmt.Errorf("cannot write the cpuview library: %w", err)
	}
	return p, nil
}
