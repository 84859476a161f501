package workload

import (
	"bytes"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/cfsprobe/cfsprobe/internal/cache"
	"github.com/cfsprobe/cfsprobe/internal/tied"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The C engine (native/engine/engine.c, built by `make engine`): the
// built-in workloads as a static program with nothing but its
// worker threads. A Go process has runtime threads beside its workers;
// with demand exactly at the quota (one busy thread under a 1-CPU quota)
// their bit of CPU makes the kernel throttle a few periods by a
// millisecond or two, which the C programs of the published experiments
// (sysbench cpu) do not see.
//
//go:embed engine
var engineFS embed.FS

const engineFile = "engine/cfsprobe-engine"

// Native is a workload that the C engine can run.
type Native interface {
	// NativeArgs are the engine's arguments for this workload.
	NativeArgs() []string
}

// Engine names the program that runs w's workers in this binary:
// trace.EngineC when w has a C implementation and the binary carries the
// engine, else trace.EngineGo (cfsprobe __workload).
func Engine(w Workload) string {
	if _, ok := w.(Native); ok && EngineEmbedded() {
		return trace.EngineC
	}
	return trace.EngineGo
}

// EngineEmbedded reports whether this binary carries the C engine.
func EngineEmbedded() bool {
	_, err := fs.Stat(engineFS, engineFile)
	return err == nil
}

var (
	engineOnce sync.Once
	enginePath string
	engineErr  error
)

// EnginePath writes the embedded engine to a private cache directory
// (once per process; reused across runs while its content is the same)
// and returns its path.
func EnginePath() (string, error) {
	engineOnce.Do(func() { enginePath, engineErr = extractEngine() })
	return enginePath, engineErr
}

func extractEngine() (string, error) {
	b, err := engineFS.ReadFile(engineFile)
	if err != nil {
		return "", errors.New("this cfsprobe was built without the C engine (build it with make)")
	}
	p, err := cache.Write(b, cache.Dirs(os.Getenv), "engine-", "", 0o755)
	if err != nil {
		return "", fmt.Errorf("write the C engine: %w", err)
	}
	return p, nil
}

// NativeArgs runs the parallel workload in the C engine.
func (p *parallel) NativeArgs() []string {
	pin := "0"
	if p.Pin {
		pin = "1"
	}
	return []string{"parallel", strconv.Itoa(p.Threads), strconv.FormatInt(int64(p.Duration), 10),
		strconv.Itoa(p.MaxPrime), strconv.FormatInt(p.Events, 10), pin}
}

// NativeArgs runs the bursty workload in the C engine. Its jitter draws
// from another generator than the Go workload's: the same distribution,
// not the same sequence (Jitter gives either).
func (b *bursty) NativeArgs() []string {
	pin := "0"
	if b.Pin {
		pin = "1"
	}
	return []string{"bursty", strconv.Itoa(b.Threads), strconv.FormatInt(int64(b.Duration), 10),
		strconv.FormatInt(int64(b.On), 10), strconv.FormatInt(int64(b.OnCPU), 10),
		strconv.FormatInt(int64(b.Off), 10), strconv.FormatInt(int64(b.Jitter), 10),
		strconv.FormatUint(b.Seed, 10), pin, strconv.FormatInt(int64(b.Every), 10)}
}

// NativeArgs runs the periodic workload in the C engine; it prints the
// same line per burn.
func (p *periodic) NativeArgs() []string {
	quiet := "0"
	if p.Quiet {
		quiet = "1"
	}
	return []string{"periodic", strconv.Itoa(p.Threads), strconv.Itoa(p.Iterations),
		strconv.FormatInt(int64(p.Burn), 10), strconv.FormatInt(int64(p.BurnCPU), 10),
		strconv.FormatInt(int64(p.Sleep), 10), quiet}
}

// Command is the process that runs w: the C engine when Engine(w) is
// trace.EngineC, else self (the cfsprobe executable) as `self __workload
// NAME FLAGS...` (Main), FLAGS being Flags(w): w's parameters as they
// were resolved (an event sized by --event is given by its --max-prime,
// so the child times nothing in the measured group). The process
// writes its Result to a pipe, its descriptor 3 (ResultFDEnv): result is
// the end to read, and the end it writes is cmd.ExtraFiles[0], for the
// caller to close once the process started.
func Command(w Workload, self string) (cmd *exec.Cmd, result *os.File, err error) {
	if Engine(w) == trace.EngineC {
		path, err := EnginePath()
		if err != nil {
			return nil, nil, err
		}
		cmd = exec.Command(path, w.(Native).NativeArgs()...)
	} else {
		cmd = exec.Command(self, append([]string{"__workload", w.Name()}, Flags(w)...)...)
	}
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.ExtraFiles = []*os.File{wr}
	cmd.Env = append(os.Environ(), ResultFDEnv+"=3")
	return cmd, r, nil
}

// runNative runs w in the C engine, outside any group, its output to
// stdout (nil: discarded), and decodes its result.
func runNative(w Workload, stdout io.Writer) (*Result, error) {
	cmd, r, err := Command(w, "")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = stdout
	err = tied.Start(cmd)
	cmd.ExtraFiles[0].Close()
	if err != nil {
		return nil, fmt.Errorf("start the C engine: %w", err)
	}
	var out bytes.Buffer
	_, rerr := out.ReadFrom(r)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("the C engine: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if rerr != nil {
		return nil, fmt.Errorf("read the C engine's result: %w", rerr)
	}
	return DecodeResult(out.Bytes(), w)
}

var engineMagic = []byte("CFSPENG3")

// DecodeResult reads what a workload process wrote on its result
// descriptor: a Result as JSON (the Go workloads) or the C engine's
// records, which it turns into the same Result.
func DecodeResult(b []byte, w Workload) (*Result, error) {
	if !bytes.HasPrefix(b, engineMagic) {
		var res Result
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
	r := bytes.NewReader(b[len(engineMagic):])
	var head [6]int64
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, fmt.Errorf("engine result header: %w", err)
	}
	start, end, startCPU, self, threads, dropped := head[0], head[1], head[2], head[3], head[4], head[5] != 0
	if threads < 1 || threads > 4096 {
		return nil, fmt.Errorf("engine result: %d threads", threads)
	}
	rec := &Recorder{op: w.Op(), throughput: countsThroughput(w), startMono: start, startCPU: startCPU}
	for th := 0; th < int(threads); th++ {
		var n int64
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return nil, fmt.Errorf("engine result, thread %d: %w", th, err)
		}
		if n < 0 || n > int64(r.Len())/24 {
			return nil, fmt.Errorf("engine result, thread %d: %d records in %d bytes", th, n, r.Len())
		}
		recs := make([]int64, 3*n)
		if err := binary.Read(r, binary.LittleEndian, recs); err != nil {
			return nil, fmt.Errorf("engine result, thread %d: %w", th, err)
		}
		t := rec.Thread(th)
		t.dropped = dropped
		for i := int64(0); i < n; i++ {
			t.recordMono(recs[3*i], recs[3*i+1], recs[3*i+2])
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("engine result: %d bytes left over", r.Len())
	}
	return rec.result(w.Name(), end, self), nil
}
