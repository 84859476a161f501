package monitor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

// Run reads the groups Follow gives it at once, also while it waits a
// second for its next pass (nothing to read), and returns when its
// context is done, its files closed.
func TestRunFollowAndStop(t *testing.T) {
	dir := t.TempDir()
	g := Group{Path: "/g", CPUDir: filepath.Join(dir, "cpu/g"), AcctDir: filepath.Join(dir, "cpuacct/g"), Version: 1}
	writeFile(t, filepath.Join(g.CPUDir, "cpu.stat"), "nr_periods 3\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n")
	writeFile(t, filepath.Join(g.AcctDir, "cpuacct.usage"), "1000000\n")
	s := NewSampler(SamplerOptions{MaxGroups: 1, CPUs: 2, UsageBuckets: []float64{1}, StallBuckets: []float64{1}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	time.Sleep(50 * ms) // Run has made its first pass and waits
	s.Follow([]Target{{Group: g, Limits: cgroup.Limits{Quota: 20 * ms, Period: 100 * ms}}})
	for deadline := time.Now().Add(maxIdleWait / 2); ; time.Sleep(ms) {
		s.mu.Lock()
		read := len(s.groups) == 1 && s.groups[0].haveLast
		s.mu.Unlock()
		if read {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group Follow gave was not read in %v: Run waited for its next pass", maxIdleWait/2)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context was done")
	}
	if s.Groups() != 0 || s.alarm != nil {
		t.Errorf("Run returned following %d groups (alarm %v): want none, its files closed", s.Groups(), s.alarm)
	}
}
