package cpuview

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Loader says how a program will load the preload library.
type Loader string

const (
	// LoaderGlibc: a dynamic program run by glibc's loader (ld-linux*):
	// LD_PRELOAD works.
	LoaderGlibc Loader = "glibc"
	// LoaderMusl: musl's loader (Alpine); it treats a preload it cannot
	// load (the library is built against glibc) as fatal.
	LoaderMusl Loader = "musl"
	// LoaderStatic: no interpreter; LD_PRELOAD is ignored.
	LoaderStatic Loader = "static"
	// LoaderOther: a script or anything that is not a native ELF program;
	// its interpreter decides.
	LoaderOther Loader = "other"
)

// ProgramLoader reads the ELF program header of path: which loader will
// run it.
func ProgramLoader(path string) (Loader, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return LoaderOther, "", err
	}
	defer f.Close()
	return programLoader(f)
}

func programLoader(r io.ReaderAt) (Loader, string, error) {
	ef, err := elf.NewFile(r)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return LoaderOther, "", nil // a script, or not ELF at all
		}
		return LoaderOther, "", err
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return LoaderOther, "", err
		}
		interp := strings.TrimRight(string(b), "\x00")
		if strings.Contains(interp, "musl") {
			return LoaderMusl, interp, nil
		}
		return LoaderGlibc, interp, nil
	}
	return LoaderStatic, "", nil
}

// ForProgram adapts the plan to the program about to run (path): a musl
// program must not get the glibc library in LD_PRELOAD (its loader would
// refuse to start it), and a static one cannot use it. It returns what to
// tell the user.
func (p *ExecPlan) ForProgram(path string) []string {
	if p.Library == "" {
		return nil
	}
	kind, interp, err := ProgramLoader(path)
	switch {
	case err != nil:
		return nil // the exec itself will say what is wrong
	case kind == LoaderMusl:
		s := p.Settings
		s.Library = ""
		p.Settings, p.Library = s, ""
		p.Env, p.Changes = Merge(p.environ, s)
		return []string{fmt.Sprintf("%s is a musl program (loader %s): the preload library is built for glibc and is not loaded; it gets the variables only", path, interp)}
	case kind == LoaderStatic:
		return []string{fmt.Sprintf("%s is statically linked: it does not load the preload library and gets the variables only (docs/cpuview.md says what else to do); programs it starts do load it", path)}
	}
	return nil
}
