//go:build tools

// The plugins build.sh builds; importing them keeps their modules in go.mod.
package cni

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/main/ptp"
)
