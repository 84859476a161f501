package top

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// fakeScreen records frames and hands keys to the view.
type fakeScreen struct {
	mu     sync.Mutex
	w, h   int
	frames chan string
	keys   chan Key
	redraw chan struct{}
}

func newFakeScreen(w, h int) *fakeScreen {
	return &fakeScreen{w: w, h: h, frames: make(chan string, 1000), keys: make(chan Key), redraw: make(chan struct{})}
}

func (s *fakeScreen) Size() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w, s.h
}

func (s *fakeScreen) resize(w, h int) {
	s.mu.Lock()
	s.w, s.h = w, h
	s.mu.Unlock()
	s.redraw <- struct{}{}
}

func (s *fakeScreen) Write(p []byte) (int, error) {
	s.frames <- string(p)
	return len(p), nil
}
func (s *fakeScreen) Keys() <-chan Key        { return s.keys }
func (s *fakeScreen) Redraw() <-chan struct{} { return s.redraw }

var escRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// screenLines is what a frame shows, without escapes.
func screenLines(frame string) []string {
	return strings.Split(escRE.ReplaceAllString(frame, ""), "\r\n")
}

// next waits for a frame for which ok holds.
func (s *fakeScreen) next(t *testing.T, what string, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	var last []string
	for {
		select {
		case f := <-s.frames:
			last = screenLines(f)
			if ok(last) {
				return last
			}
		case <-deadline:
			t.Fatalf("no frame with %s; last:\n%s", what, strings.Join(last, "\n"))
		}
	}
}

// fakeSource serves n groups, "/g00" ..., whose counters advance a second
// per reading: group i uses i/10 CPU under a 1-CPU limit and is throttled
// in i of 10 periods for 10 ms each. Groups listed in gone stop appearing
// from the reading numbered by the map's value.
type fakeSource struct {
	mu    sync.Mutex
	n     int
	reads int
	gone  map[string]int
}

func (f *fakeSource) Read() (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := int64(f.reads)
	at := time.Duration(k) * time.Second
	s := Snapshot{Total: f.n + 1, At: t0.Add(at)}
	for i := 0; i < f.n; i++ {
		p := fmt.Sprintf("/g%02d", i)
		if r, ok := f.gone[p]; ok && f.reads >= r {
			continue
		}
		st := cgroup.Stat{UsageNs: k * int64(i) * 100 * ms, NrPeriods: k * 10, NrThrottled: k * int64(i%11), ThrottledNs: k * int64(i%11) * 10 * ms}
		r := reading(p, monitor1CPU, at, st)
		stall := int64(i%11) * 10 * ms / max(int64(i%11), 1) * min(int64(i%11), 1) // 10 ms when throttled
		r.MaxStallNs = &stall
		s.Readings = append(s.Readings, r)
	}
	f.reads++
	return s, nil
}

func names(lines []string) []string {
	var out []string
	for _, l := range lines[2 : len(lines)-1] {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

func startLive(t *testing.T, src Source, scr Screen) (cancel func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() {
		ch <- Live(ctx, src, scr, Options{Interval: 20 * time.Millisecond, Sort: SortThrottled, Host: testHost, Highlight: true})
	}()
	t.Cleanup(cancel)
	return cancel, ch
}

func TestLiveRowsSortAndQuit(t *testing.T) {
	scr := newFakeScreen(100, 8) // 5 rows
	src := &fakeSource{n: 10, gone: map[string]int{"/g09": 3}}
	_, done := startLive(t, src, scr)

	first := scr.next(t, "the first frame", func([]string) bool { return true })
	if !strings.Contains(first[0], "cfsprobe top") || !strings.Contains(first[1], "NAME") {
		t.Errorf("first frame lacks the header or titles:\n%s", strings.Join(first, "\n"))
	}
	if !strings.Contains(first[2], " - ") {
		t.Errorf("after one reading a row shows figures: %q", first[2])
	}
	// After two readings, most throttled first.
	lines := scr.next(t, "figures", func(l []string) bool { return !strings.Contains(l[2], " - ") })
	if got := names(lines); strings.Join(got, " ") != "/g09 /g08 /g07 /g06 /g05" {
		t.Errorf("sorted by throttled: %v", got)
	}
	if !strings.Contains(lines[7], "5 more (sorted by throttled)") {
		t.Errorf("footer %q", lines[7])
	}
	// /g09 vanishes at the fourth reading.
	scr.next(t, "/g09 gone", func(l []string) bool { return names(l)[0] == "/g08" })

	scr.keys <- "n"
	lines = scr.next(t, "sorted by name", func(l []string) bool { return strings.Contains(l[1], "NAME ▲") })
	if got := names(lines); strings.Join(got, " ") != "/g00 /g01 /g02 /g03 /g04" {
		t.Errorf("sorted by name: %v", got)
	}
	scr.keys <- "n"
	lines = scr.next(t, "reversed", func(l []string) bool { return strings.Contains(l[len(l)-1], "name, reversed") })
	if got := names(lines); got[0] != "/g08" {
		t.Errorf("sorted by name, reversed: %v", got)
	}

	// Scrolling: down one, End, Home.
	scr.keys <- "n"
	scr.keys <- KeyDown
	scr.next(t, "scrolled by one", func(l []string) bool { return names(l)[0] == "/g01" })
	scr.keys <- KeyEnd
	lines = scr.next(t, "the end", func(l []string) bool { return names(l)[0] == "/g04" })
	if !strings.HasPrefix(lines[7], "rows 5-9 of 9") {
		t.Errorf("footer at the end: %q", lines[7])
	}
	scr.keys <- KeyPgUp
	scr.next(t, "page up", func(l []string) bool { return names(l)[0] == "/g00" })

	// A resize redraws at once.
	scr.resize(60, 12)
	scr.next(t, "the new size", func(l []string) bool { return len(l) == 12 && len(names(l)) == 9 })

	scr.keys <- "q"
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("q: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("q did not end the view")
	}
}

func TestLiveEndsWithTheContext(t *testing.T) {
	scr := newFakeScreen(80, 24)
	cancel, done := startLive(t, &fakeSource{n: 3}, scr)
	scr.next(t, "a frame", func([]string) bool { return true })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not end the view")
	}
}

// A failing reading keeps the last rows and says why in the header.
type failingSource struct {
	fakeSource
	fail bool
}

func (f *failingSource) Read() (Snapshot, error) {
	f.mu.Lock()
	fail := f.fail && f.reads > 0
	f.mu.Unlock()
	if fail {
		return Snapshot{}, errors.New("open /sys/fs/cgroup/cpu: no such file or directory")
	}
	return f.fakeSource.Read()
}

func TestLiveReadError(t *testing.T) {
	scr := newFakeScreen(200, 10)
	src := &failingSource{fakeSource: fakeSource{n: 3}, fail: true}
	startLive(t, src, scr)
	lines := scr.next(t, "the error", func(l []string) bool { return strings.Contains(l[0], "read failed: open /sys/fs/cgroup/cpu") })
	if len(names(lines)) != 3 {
		t.Errorf("rows dropped on a failed reading:\n%s", strings.Join(lines, "\n"))
	}
}

func TestOnce(t *testing.T) {
	m, err := Once(context.Background(), &fakeSource{n: 4}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rows := m.Rows(SortThrottled, false)
	if len(rows) != 4 || !rows[0].Ready() || rows[0].Cgroup != "/g03" || !near(*rows[0].ThrottledRatio, 0.3) {
		t.Errorf("rows after two readings: %+v", rows)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Once(ctx, &fakeSource{n: 1}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

var monitor1CPU = cgroup.Limits{Quota: 100 * time.Millisecond, Period: 100 * time.Millisecond}
