package check

import (
	"fmt"
	"strconv"
	"strings"
)

// What the kernel's version says, before any test.
const (
	// ExpectAffected: the version is in the range of a known defect and
	// is not a stable release known to carry the fix.
	ExpectAffected = "affected"
	// ExpectFixed: the version carries the known fixes.
	ExpectFixed = "fixed"
	// ExpectUnknown: the version says nothing either way.
	ExpectUnknown = "unknown"
)

// The known defects of CFS bandwidth control that throttle a group below
// its quota.
const (
	// DefectSliceExpiry (3.16 to 4.17): a CPU's share of the quota was
	// treated as expired after the group's period timer had stopped and
	// been restarted, so a group waking from a long sleep was throttled
	// at once (seed 000). Fixed in 4.18 by 512ac999d275.
	DefectSliceExpiry = "slice-expiry"
	// DefectStrandedSlices (4.18 to 5.3): every CPU that ran the group
	// kept up to 1 ms of quota that expired unused at the end of each
	// period, so a group spread thinly over many CPUs was throttled well
	// below its quota. Fixed in 5.4 by de53fd7aedb1, backported to 4.14.154
	// and 4.19.84.
	DefectStrandedSlices = "stranded-slices"
)

// Throttling models.
const (
	// ThrottleRunqueue: the group's whole run queue on a CPU is taken off
	// the CPU the moment it runs out of quota (before 6.18).
	ThrottleRunqueue = "runqueue"
	// ThrottleTask: a throttled task is stopped when it next returns to
	// user space; it may finish what it does in the kernel (6.18+).
	ThrottleTask = "task"
)

// Kernel is what the kernel's release says about throttling below quota.
// A distribution kernel may carry fixes its version does not show: the
// test decides, this only explains.
type Kernel struct {
	Release string `json:"release"`
	// Version is the upstream version parsed from the release ("4.19.80"),
	// empty when the release could not be parsed.
	Version string `json:"version,omitempty"`
	// Defect is the known defect whose range the version falls in
	// (DefectSliceExpiry, DefectStrandedSlices), or empty.
	Defect string `json:"defect,omitempty"`
	// Expectation is ExpectAffected, ExpectFixed or ExpectUnknown.
	Expectation string `json:"expectation"`
	// Vendor is true when the release has a suffix after the version
	// (a distribution or custom build, which may carry backports).
	Vendor bool `json:"vendor"`
	// Detail says, in a sentence, what the version means.
	Detail string `json:"detail"`
	// Throttling is ThrottleRunqueue or ThrottleTask, ThrottlingDetail
	// says what it means.
	Throttling       string `json:"throttling"`
	ThrottlingDetail string `json:"throttling_detail"`
}

// version is an upstream kernel version.
type version struct{ major, minor, patch int }

func (v version) less(o version) bool {
	if v.major != o.major {
		return v.major < o.major
	}
	if v.minor != o.minor {
		return v.minor < o.minor
	}
	return v.patch < o.patch
}

func (v version) String() string { return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch) }

// parseRelease reads "4.19.80", "4.15.0-45-generic", "6.18.44-fc-v669" or
// "5.4" into a version and the suffix after it.
func parseRelease(rel string) (version, string, bool) {
	rel = strings.TrimSpace(rel)
	var nums []int
	rest := rel
	for len(nums) < 3 {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			break
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil {
			return version{}, "", false
		}
		nums = append(nums, n)
		rest = rest[i:]
		if len(nums) < 3 && strings.HasPrefix(rest, ".") && len(rest) > 1 && rest[1] >= '0' && rest[1] <= '9' {
			rest = rest[1:]
			continue
		}
		break
	}
	if len(nums) < 2 {
		return version{}, "", false
	}
	v := version{major: nums[0], minor: nums[1]}
	if len(nums) == 3 {
		v.patch = nums[2]
	}
	return v, rest, true
}

var (
	v3_16 = version{3, 16, 0}
	v4_18 = version{4, 18, 0}
	v5_4  = version{5, 4, 0}
	v6_18 = version{6, 18, 0}
)

// AssessKernel places a kernel release in the table of known defects:
//
//	3.16 to 4.17  slice expiry (seed 000), fixed in 4.18 (512ac999d275);
//	              4.14.154+ carries de53fd7aedb1, which removes expiry
//	4.18 to 5.3   stranded per-CPU slices, fixed in 5.4 (de53fd7aedb1);
//	              4.19.84+ carries the fix
//	5.4+          fixed
//	6.18+         fixed; task-based throttling
//	other         unknown: the test decides
func AssessKernel(release string) Kernel {
	k := Kernel{Release: release, Expectation: ExpectUnknown, Throttling: ThrottleRunqueue,
		ThrottlingDetail: "a CPU's run queue of the group is taken off the CPU as soon as it runs out of quota, until the next period"}
	v, suffix, ok := parseRelease(release)
	if !ok {
		k.Detail = fmt.Sprintf("kernel release %q could not be read: the version says nothing, the test decides", release)
		return k
	}
	k.Version = v.String()
	k.Vendor = suffix != ""
	if !v.less(v6_18) {
		k.Throttling = ThrottleTask
		k.ThrottlingDetail = "task-based (Linux 6.18+): a throttled task keeps running in the kernel and stops when it next returns to user space"
	}
	backport := ""
	if k.Vendor {
		backport = "; a distribution kernel may carry the fix without showing it in its version, the test decides"
	}
	switch {
	case v.less(v3_16):
		k.Detail = fmt.Sprintf("Linux %s predates the defects this check knows (3.16 to 5.3): the test decides", v)
	case v.less(v4_18) && v.major == 4 && v.minor == 14 && v.patch >= 154:
		k.Expectation = ExpectFixed
		k.Detail = fmt.Sprintf("Linux %s is a 4.14 stable release with the fix (4.14.154+ carries de53fd7aedb1, which removes slice expiry)", v)
	case v.less(v4_18):
		k.Expectation, k.Defect = ExpectAffected, DefectSliceExpiry
		k.Detail = fmt.Sprintf("Linux %s is in the range of the slice-expiry defect (3.16 to 4.17, fixed in 4.18 by 512ac999d275): a group waking after a long sleep is throttled at once%s", v, backport)
	case v.less(v5_4) && v.major == 4 && v.minor == 19 && v.patch >= 84:
		k.Expectation = ExpectFixed
		k.Detail = fmt.Sprintf("Linux %s is a 4.19 stable release with the fix (4.19.84+ carries de53fd7aedb1)", v)
	case v.less(v5_4):
		k.Expectation, k.Defect = ExpectAffected, DefectStrandedSlices
		k.Detail = fmt.Sprintf("Linux %s is in the range of the stranded-slice defect (4.18 to 5.3, fixed in 5.4 by de53fd7aedb1, and in 4.14.154+ and 4.19.84+): every CPU that runs the group strands up to 1ms of quota per period%s", v, backport)
	default:
		k.Expectation = ExpectFixed
		k.Detail = fmt.Sprintf("Linux %s has both known fixes (512ac999d275 in 4.18, de53fd7aedb1 in 5.4)", v)
	}
	return k
}
