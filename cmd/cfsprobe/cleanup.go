package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

func newCleanupCmd() *cobra.Command {
	var dryRun, asJSON bool
	var parent string
	var roots hostRoots
	c := &cobra.Command{
		Use:   "cleanup",
		Short: "remove cgroups (and kill their tasks) that killed cfsprobe runs left behind",
		Long: `A cfsprobe run removes its cgroup when it ends, also on Ctrl-C and SIGTERM. A run
killed with SIGKILL cannot: its group stays under cfsprobe/ in each hierarchy.
cleanup finds cfsprobe's own groups (recognised by their names, run-PID-XXXXXXXX,
under the cfsprobe/ parent), skips those whose cfsprobe process still runs,
kills the tasks of the others and removes them. Nothing else is touched.`,
		Args: noArgs("name the parent group with --parent"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkParent(parent); err != nil {
				return err
			}
			l, err := cgroup.Detect(roots.FS())
			if err != nil {
				if errors.Is(err, cgroup.ErrNoCPUController) {
					return usageErr("%w: cfsprobe cannot have made groups here; check --proc-root and --fs-root, or mount a v1 cpu hierarchy or enable +cpu in the v2 root's cgroup.subtree_control", err)
				}
				return err
			}
			if err := l.CheckFS(); err != nil {
				return &exitError{2, err}
			}
			m := cgroup.NewManager(l, parent)
			left, err := m.Leftovers(roots.FS())
			if err != nil {
				return err
			}
			type row struct {
				Dir     string `json:"dir"`
				Owner   int    `json:"owner_pid"`
				Action  string `json:"action"`
				Problem string `json:"error,omitempty"`
			}
			var rows []row
			var errs []error
			for _, lo := range left {
				r := row{Dir: lo.Dir, Owner: lo.OwnerPID}
				switch {
				case lo.Alive:
					r.Action = "kept (its cfsprobe process still runs)"
				case dryRun:
					r.Action = "would remove"
				default:
					r.Action = "removed"
					if err := m.Remove(lo); err != nil {
						r.Action, r.Problem = "failed", err.Error()
						errs = append(errs, err)
					}
				}
				rows = append(rows, r)
			}
			out := c.OutOrStdout()
			if asJSON {
				if rows == nil {
					rows = []row{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rows); err != nil {
					return err
				}
			} else {
				if len(rows) == 0 {
					fmt.Fprintln(out, "nothing to clean up")
				}
				for _, r := range rows {
					line := fmt.Sprintf("%s %s (made by cfsprobe pid %d)", r.Action, r.Dir, r.Owner)
					if r.Problem != "" {
						line += ": " + r.Problem
					}
					fmt.Fprintln(out, line)
				}
			}
			return errors.Join(errs...)
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "only list what would be removed")
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	c.Flags().StringVar(&parent, "parent", cgroup.DefaultParent, "the parent group runs were created under")
	roots.addFlags(c.Flags())
	return c
}
