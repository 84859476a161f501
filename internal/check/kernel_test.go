package check

import "testing"

func TestAssessKernel(t *testing.T) {
	cases := []struct {
		release, version, expect, defect, throttling string
		vendor                                       bool
	}{
		// Seed 000's kernels.
		{"4.14.4", "4.14.4", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, false},
		{"4.9.51", "4.9.51", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, false},
		{"4.4.0-101-generic", "4.4.0", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, true},
		{"4.13.9-300.fc27.x86_64", "4.13.9", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, true},
		{"3.16.0", "3.16.0", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, false},
		{"4.17.19", "4.17.19", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, false},
		// The 4.14 stable backport of de53fd7aedb1.
		{"4.14.153", "4.14.153", ExpectAffected, DefectSliceExpiry, ThrottleRunqueue, false},
		{"4.14.154", "4.14.154", ExpectFixed, "", ThrottleRunqueue, false},
		// Stranded slices, and the 4.19 stable backport.
		{"4.18.0", "4.18.0", ExpectAffected, DefectStrandedSlices, ThrottleRunqueue, false},
		{"4.19.83", "4.19.83", ExpectAffected, DefectStrandedSlices, ThrottleRunqueue, false},
		{"4.19.84", "4.19.84", ExpectFixed, "", ThrottleRunqueue, false},
		{"4.19.0-6-amd64", "4.19.0", ExpectAffected, DefectStrandedSlices, ThrottleRunqueue, true},
		{"5.3.18", "5.3.18", ExpectAffected, DefectStrandedSlices, ThrottleRunqueue, false},
		{"5.4", "5.4.0", ExpectFixed, "", ThrottleRunqueue, false},
		{"5.15.0-91-generic", "5.15.0", ExpectFixed, "", ThrottleRunqueue, true},
		{"6.17.9", "6.17.9", ExpectFixed, "", ThrottleRunqueue, false},
		// This machine, and task-based throttling.
		{"6.18.44-fc-v669", "6.18.44", ExpectFixed, "", ThrottleTask, true},
		{"7.0.1", "7.0.1", ExpectFixed, "", ThrottleTask, false},
		// Unknown.
		{"3.10.0-1160.el7.x86_64", "3.10.0", ExpectUnknown, "", ThrottleRunqueue, true},
		{"", "", ExpectUnknown, "", ThrottleRunqueue, false},
		{"linux", "", ExpectUnknown, "", ThrottleRunqueue, false},
		{"5", "", ExpectUnknown, "", ThrottleRunqueue, false},
	}
	for _, c := range cases {
		k := AssessKernel(c.release)
		if k.Version != c.version || k.Expectation != c.expect || k.Defect != c.defect || k.Throttling != c.throttling || k.Vendor != c.vendor {
			t.Errorf("%q: version %q expect %q defect %q throttling %q vendor %v; want %q %q %q %q %v",
				c.release, k.Version, k.Expectation, k.Defect, k.Throttling, k.Vendor, c.version, c.expect, c.defect, c.throttling, c.vendor)
		}
		if k.Detail == "" || k.ThrottlingDetail == "" {
			t.Errorf("%q: no detail", c.release)
		}
	}
}

func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"4.19.80", "6.18.44-fc-v669", "5.4", "4.15.0-45-generic", "", "x.y", "1.2.3.4.5", "99999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := AssessKernel(s)
		if k.Expectation == "" || k.Detail == "" {
			t.Errorf("%q: empty assessment", s)
		}
		if v, _, ok := parseRelease(s); ok && (v.major < 0 || v.minor < 0 || v.patch < 0) {
			t.Errorf("%q: negative version %v", s, v)
		}
	})
}
