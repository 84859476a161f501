package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// systemdUnit is the exporter's unit for hosts without Kubernetes.
const systemdUnit = "deploy/systemd/cfsprobe-exporter.service"

// unitBinary is the cfsprobe the unit runs.
const unitBinary = "/usr/local/bin/cfsprobe"

// exposureRE is systemd-analyze security's verdict.
var exposureRE = regexp.MustCompile(`(?m)^→ Overall exposure level for \S+: ([0-9.]+) (\w+)`)

// Must show 4: the unit passes systemd-analyze verify, and systemd-analyze
// security --offline=yes (which reads the file, no running systemd needed)
// rates it OK or better, with the hardening the issue names in force.
func TestSystemdUnit(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	unit, err := filepath.Abs(repoPath(systemdUnit))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readFile(t, systemdUnit))

	// verify checks that ExecStart's program exists and is executable:
	// a copy of the unit runs this test's own executable instead of the
	// installed cfsprobe (cmd/cfsprobe's TestSystemdUnitFlags runs the
	// real one with the unit's flags).
	if !strings.Contains(text, "ExecStart="+unitBinary+" exporter") {
		t.Fatalf("%s: ExecStart does not run %s exporter", systemdUnit, unitBinary)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	copied := filepath.Join(copyDir, filepath.Base(systemdUnit))
	if err := os.WriteFile(copied, []byte(strings.Replace(text, "ExecStart="+unitBinary, "ExecStart="+self, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copied).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", systemdUnit, err, out)
	} else {
		t.Logf("systemd-analyze verify %s: no complaint", systemdUnit)
	}

	out, err = exec.Command(analyze, "security", "--offline=yes", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=yes %s: %v\n%s", systemdUnit, err, out)
	}
	m := exposureRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("systemd-analyze security gives no overall exposure:\n%s", out)
	}
	exposure, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security --offline=yes %s: exposure %.1f %s (0 best, 10 worst)", systemdUnit, exposure, m[2])
	var flagged []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "✗") {
			flagged = append(flagged, strings.Join(strings.Fields(l), " "))
		}
	}
	t.Logf("still exposed: %s", strings.Join(flagged, "; "))
	if !slices.Contains([]string{"PERFECT", "SAFE", "OK"}, m[2]) || exposure > 2 {
		t.Errorf("exposure %.1f %s, want OK or better and at most 2.0", exposure, m[2])
	}
	// The hardening of node_exporter's packaging and more, in force.
	for _, setting := range []string{"NoNewPrivileges=", "ProtectSystem=", "ProtectControlGroups=", "ProtectHome=", "PrivateTmp=",
		"PrivateDevices=", "ProtectKernelTunables=", "ProtectKernelModules=", "CapabilityBoundingSet=~CAP_SYS_ADMIN",
		"RestrictSUIDSGID=", "MemoryDenyWriteExecute=", "SystemCallFilter=~@privileged", "User=/DynamicUser="} {
		if !strings.Contains(string(out), "✓ "+setting) {
			t.Errorf("systemd-analyze security does not pass %s", setting)
		}
	}
	for _, line := range []string{"ReadOnlyPaths=/sys/fs/cgroup", "CapabilityBoundingSet=\n", "ProtectSystem=strict\n", "DynamicUser=yes\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("%s lacks %q", systemdUnit, strings.TrimSpace(line))
		}
	}
}
