package cgroup

// Fuzz targets for every parser of kernel files. Each is seeded from the
// fixture trees under testdata/ and asserts, beyond "does not panic", an
// invariant of its parser: parsing what the result prints as gives the
// same result again, and values stay in their domain. `make fuzz` runs
// each briefly; `go test -run '^$' -fuzz '^FuzzX$' ./internal/cgroup`
// runs one for as long as you like.

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixtureFile is one file of the fixture trees under testdata/.
type fixtureFile struct {
	path string
	data []byte
}

// fixtureFiles returns every file named name under testdata/ (fuzz
// corpora aside), in a stable order.
func fixtureFiles(f *testing.F, name string) []fixtureFile {
	f.Helper()
	var out []fixtureFile
	err := filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == filepath.Join("testdata", "fuzz") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && d.Name() == name {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, fixtureFile{p, b})
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	if len(out) == 0 {
		f.Fatalf("no fixture file is named %s", name)
	}
	return out
}

// statVersion says which cgroup version a fixture cpu.stat is from: v2
// groups have cpu.max beside it.
func statVersion(path string) uint8 {
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "cpu.max")); err == nil {
		return 2
	}
	return 1
}

// escapeMountField escapes the way the kernel's mangle() does for
// mountinfo: space, tab, newline and backslash as \ooo; and \r too, which
// bufio.ScanLines would drop at the end of a line.
func escapeMountField(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\', '\r':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func formatMountinfo(ms []Mount) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%d %d 0:0 %s %s rw shared:1 - %s %s", m.ID, m.ParentID,
			escapeMountField(m.Root), escapeMountField(m.MountPoint), m.FSType, escapeMountField(m.Source))
		if m.SuperOptions != nil {
			b.WriteString(" " + strings.Join(m.SuperOptions, ","))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func FuzzParseMountinfo(f *testing.F) {
	for _, x := range fixtureFiles(f, "mountinfo") {
		f.Add(x.data)
	}
	f.Add([]byte(`40 27 8:17 /my\040dir /mnt/a\011b\012c\134d rw master:1 - ext4 /dev/disk\040one rw` + "\n"))
	f.Add([]byte("40 27 8:17 / /media/Backup\u00a0Disk rw,relatime - ext4 /dev/sdb1 rw\n"))
	f.Add([]byte("1 2 3:4 / / rw - - - x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := parseMountinfo(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.FSType == "" || strings.ContainsAny(m.FSType, " \n") {
				t.Fatalf("mount %+v: bad FSType", m)
			}
		}
		// What the mounts print as parses back to the same mounts. Super
		// options are not unescaped, so one ending in \r (which the line
		// scanner drops at the end of a line) cannot be printed back.
		for _, m := range ms {
			if n := len(m.SuperOptions); n > 0 && strings.HasSuffix(m.SuperOptions[n-1], "\r") {
				return
			}
		}
		text := formatMountinfo(ms)
		again, err := parseMountinfo(strings.NewReader(text))
		if err != nil {
			t.Fatalf("re-parse of\n%s\nfailed: %v", text, err)
		}
		if len(ms) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(ms, again) {
			t.Fatalf("round trip differs:\n%+v\n%+v\nvia\n%q", ms, again, text)
		}
	})
}

func formatProcCgroup(cs []ProcCgroup) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%d:%s:%s\n", c.HierarchyID, strings.Join(c.Controllers, ","), c.Path)
	}
	return b.String()
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, x := range fixtureFiles(f, "cgroup") {
		f.Add(x.data)
	}
	f.Add([]byte("0::/system.slice/getty@tty1.service:a:b\n"))
	f.Add([]byte("1:name=systemd:/my group (deleted)\n0::/../x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := parseProcCgroup(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.HierarchyID < 0 || !strings.HasPrefix(c.Path, "/") {
				t.Fatalf("line %+v: bad ID or relative path", c)
			}
		}
		text := formatProcCgroup(cs)
		again, err := parseProcCgroup(strings.NewReader(text))
		if err != nil {
			t.Fatalf("re-parse of %q failed: %v", text, err)
		}
		if len(cs) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(cs, again) {
			t.Fatalf("round trip differs:\n%+v\n%+v\nvia %q", cs, again, text)
		}
	})
}

// formatCPUStat prints a Stat as cpu.stat of the version, in the units the
// kernel uses. A saturated value prints as the largest int64, which
// saturates again.
func formatCPUStat(s Stat, version int) string {
	us := func(ns int64) int64 {
		if ns == math.MaxInt64 {
			return ns
		}
		return ns / 1000
	}
	if version == 1 {
		return fmt.Sprintf("nr_periods %d\nnr_throttled %d\nthrottled_time %d\nnr_bursts %d\nburst_time %d\n",
			s.NrPeriods, s.NrThrottled, s.ThrottledNs, s.NrBursts, s.BurstNs)
	}
	return fmt.Sprintf("usage_usec %d\nuser_usec 0\nsystem_usec 0\nnr_periods %d\nnr_throttled %d\nthrottled_usec %d\nnr_bursts %d\nburst_usec %d\n",
		us(s.UsageNs), s.NrPeriods, s.NrThrottled, us(s.ThrottledNs), s.NrBursts, us(s.BurstNs))
}

func FuzzParseCPUStat(f *testing.F) {
	for _, x := range fixtureFiles(f, "cpu.stat") {
		f.Add(x.data, statVersion(x.path))
	}
	f.Add([]byte("nr_periods -5\nthrottled_time 18446744073709551615\n"), uint8(1))
	f.Add([]byte("usage_usec 9223372036854776\ncore_sched.force_idle_usec 0\n"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, v uint8) {
		version := 1 + int(v%2)
		s, err := parseCPUStat(bytes.NewReader(data), version)
		if err != nil {
			return
		}
		for i, x := range []int64{s.UsageNs, s.NrPeriods, s.NrThrottled, s.ThrottledNs, s.NrBursts, s.BurstNs} {
			if x < 0 {
				t.Fatalf("v%d: field %d of %+v is negative", version, i, s)
			}
		}
		if version == 1 && s.UsageNs != 0 {
			t.Fatalf("v1 cpu.stat gave usage %d; it comes from cpuacct.usage", s.UsageNs)
		}
		if version == 2 {
			for _, ns := range []int64{s.UsageNs, s.ThrottledNs, s.BurstNs} {
				if ns%1000 != 0 && ns != math.MaxInt64 {
					t.Fatalf("v2 duration %d ns is not whole microseconds", ns)
				}
			}
		}
		text := formatCPUStat(s, version)
		again, err := parseCPUStat(strings.NewReader(text), version)
		if err != nil || again != s {
			t.Fatalf("round trip: %+v -> %q -> %+v, %v", s, text, again, err)
		}
	})
}

func FuzzParseUsage(f *testing.F) {
	for _, x := range fixtureFiles(f, "cpuacct.usage") {
		f.Add(x.data)
	}
	f.Add([]byte("-5\n"))
	f.Add([]byte("18446744073709551615\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseUsage(bytes.NewReader(data))
		if err == nil && v < 0 {
			t.Fatalf("usage %d is negative", v)
		}
	})
}

// checkMax asserts what every parsed quota and period satisfy and that
// they print as cpu.max and parse back to themselves.
func checkMax(t *testing.T, m Limits) {
	t.Helper()
	if m.Period <= 0 || m.Period%time.Microsecond != 0 {
		t.Fatalf("%+v: period not a positive whole number of microseconds", m)
	}
	if m.Quota < 0 || m.Quota%time.Microsecond != 0 {
		t.Fatalf("%+v: quota neither 0 (max) nor a positive whole number of microseconds", m)
	}
	if m.Burst != 0 || m.Cpuset != "" {
		t.Fatalf("%+v: the quota files set a burst or a cpuset", m)
	}
	q := "max"
	if !m.Unlimited() {
		q = strconv.FormatInt(int64(m.Quota/time.Microsecond), 10)
	}
	text := fmt.Sprintf("%s %d\n", q, m.Period/time.Microsecond)
	again, err := parseCPUMax(strings.NewReader(text))
	if err != nil || again != m {
		t.Fatalf("round trip: %+v -> %q -> %+v, %v", m, text, again, err)
	}
}

func FuzzParseCPUMax(f *testing.F) {
	for _, x := range fixtureFiles(f, "cpu.max") {
		f.Add(x.data)
	}
	for _, s := range []string{"max\n", "50000\n", "1000 1000\n", "max 1000000\n", "garbage\n", "9223372036854775 100000\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseCPUMax(bytes.NewReader(data))
		if err != nil {
			return
		}
		checkMax(t, m)
	})
}

func FuzzParseV1Max(f *testing.F) {
	for _, q := range fixtureFiles(f, "cpu.cfs_quota_us") {
		p, err := os.ReadFile(filepath.Join(filepath.Dir(q.path), "cpu.cfs_period_us"))
		if err != nil {
			p = []byte("100000\n")
		}
		f.Add(q.data, p)
	}
	f.Add([]byte("-1\n"), []byte("100000\n"))
	f.Add([]byte("1000\n"), []byte("1000000\n"))
	f.Fuzz(func(t *testing.T, quota, period []byte) {
		m, err := parseV1Max(bytes.NewReader(quota), bytes.NewReader(period))
		if err != nil {
			return
		}
		checkMax(t, m)
	})
}

// formatCPUList prints sorted CPUs as the kernel does: ranges of
// consecutive numbers joined by commas.
func formatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func FuzzParseCPUList(f *testing.F) {
	for _, name := range []string{"cpuset.cpus", "cpuset.cpus.effective"} {
		for _, x := range fixtureFiles(f, name) {
			f.Add(string(x.data))
		}
	}
	for _, s := range []string{"", "0", "0-1\n", "0-3,5,7-8", "5,1,3", "0-2,1-3", "3-1", "0-65535", "9223372036854775807", "1-,", "0-1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		for i, c := range cpus {
			if c < 0 || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("ParseCPUList(%q) = %v: not sorted, unique and non-negative", s, cpus)
			}
		}
		text := formatCPUList(cpus)
		again, err := ParseCPUList(text)
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("round trip: %q -> %v -> %q -> %v, %v", s, cpus, text, again, err)
		}
	})
}
